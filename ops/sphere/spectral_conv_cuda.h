// Launchers of the spectral-convolution kernels on CUDA (spectral_conv_cuda.cu), plain arguments
// as ops/elementwise_cuda.h; the arithmetic is spectral_conv_math.h's. Contiguous complex operands
// (interleaved) of the real dtype `real`; each returns false for a real dtype other than f32 / f64.
#pragma once
#include <cstdint>

#include "engine/dtype_code.h"

namespace gs::cuda_kernels {

struct SpectralDims {
  int64_t B, I, O, L, M;
};

// y (B, adjoint ? I : O, L, M) from x (B, adjoint ? O : I, L, M) and w.
bool spectral_apply(DType real, bool dh, bool adjoint, const void* x, const void* w, void* y, const SpectralDims& d,
                    void* stream);
// gw (I, O, L[, M]) from x (B, I, L, M) and g (B, O, L, M).
bool spectral_weight_grad(DType real, bool dh, const void* x, const void* g, void* gw, const SpectralDims& d,
                          void* stream);

}  // namespace gs::cuda_kernels
