// The spectral-convolution contractions (spectral_conv.h) as batched GEMMs over the degrees (and
// orders): the path on devices without a dedicated contraction kernel (CUDA, until the next
// issue's kernels; see ops/README.md). Device-generic tensor ops (permute, conj, matmul), so the
// CPU tests check them against the CPU kernels. Not recorded on the tape: spectral_conv.cpp
// records each contraction as one op.
#pragma once
#include "engine/tensor.h"
#include "ops/sphere/spectral_conv.h"

namespace gs::sphere::detail {

// spectral_conv (adjoint = false) or spectral_conv_adjoint of x and w; shapes already checked.
Tensor spectral_apply_gemm(const Tensor& x, const Tensor& w, SpectralOperator op, bool adjoint);
// spectral_conv_weight_grad of x (B, Cin, L, M) and g (B, Cout, L, M); shapes already checked.
Tensor spectral_weight_grad_gemm(const Tensor& x, const Tensor& g, SpectralOperator op);

}  // namespace gs::sphere::detail
