// Complex numbers: build from parts, take parts (as views), conjugate, multiply.
#pragma once
#include "engine/tensor.h"

namespace gs {

Tensor conj(const Tensor& z);                          // identity (same tensor) for real dtypes
Tensor complex(const Tensor& re, const Tensor& im);    // f32 -> c64, f64 -> c128; broadcasting
Tensor real(const Tensor& z);                          // view of the real parts; real input: itself
Tensor imag(const Tensor& z);                          // view of the imaginary parts
Tensor complex_mul(const Tensor& a, const Tensor& b);  // mul() for complex operands, by name
Tensor view_as_real(const Tensor& z);                  // (..., 2) real view
Tensor view_as_complex(const Tensor& x);               // (..., 2) contiguous-last real -> complex view

}  // namespace gs
