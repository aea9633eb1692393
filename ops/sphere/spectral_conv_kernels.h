// The spectral-convolution contractions in the device form `kernels` (device_form.h): on CUDA the
// kernels of spectral_conv_cuda.cu, on the CPU (inside CompositePathsOnCpu, for the tests) plain
// loops over the same per-value functions (spectral_conv_math.h). Not recorded on the tape:
// spectral_conv.cpp records each contraction as one op, as for the GEMM form (spectral_conv_gemm.h).
#pragma once
#include "engine/tensor.h"
#include "ops/sphere/spectral_conv.h"

namespace gs::sphere::detail {

// spectral_conv (adjoint = false) or spectral_conv_adjoint of x and w; shapes already checked.
Tensor spectral_apply_kernels(const Tensor& x, const Tensor& w, SpectralOperator op, bool adjoint);
// spectral_conv_weight_grad of x (B, Cin, L, M) and g (B, Cout, L, M); shapes already checked.
Tensor spectral_weight_grad_kernels(const Tensor& x, const Tensor& g, SpectralOperator op);

}  // namespace gs::sphere::detail
