// The forward kernels of the elementwise ops of ops/elementwise_more.h and of the unary ops of
// ops/elementwise.h (internal to ops/): out = f(a) or f(a, b), f the
// functor of a code of ops/elementwise_math.h, on the operands' device (CUDA launchers or the CPU
// loops of ops/kernels.h). Checks first: defined, dtype (bf16 refused with the cast to use), and
// for two operands one dtype, one device and broadcastable shapes. Nothing is recorded.
#pragma once
#include "engine/tensor.h"
#include "ops/elementwise_math.h"

namespace gs::kernels {

// f32 or f64; c64 and c128 too when complex_too.
Tensor unary_map(const Tensor& a, const char* op, math::UnaryCode code, math::UnaryParam param = {},
                 bool complex_too = false);
// f32 or f64 operands of one dtype; the result has the broadcast shape.
Tensor binary_map(const Tensor& a, const Tensor& b, const char* op, math::BinaryCode code);

}  // namespace gs::kernels
