// The spectral-convolution contractions on CUDA: one thread per output value (grid-stride), the
// order m fastest, so a warp reads consecutive orders of x (and of a diagonal weight). The
// arithmetic is spectral_conv_math.h's, shared with the CPU.
#include "engine/cuda_types.cuh"
#include "ops/sphere/spectral_conv_cuda.h"
#include "ops/sphere/spectral_conv_math.h"

namespace gs::cuda_kernels {
namespace {

using sphere::spectral::Dims;

template <typename R>
__global__ void apply_kernel(const R* x, const R* w, R* y, Dims d, bool dh, bool adjoint) {
  GS_GRID_STRIDE(i, d.B * (adjoint ? d.I : d.O) * d.L * d.M) sphere::spectral::apply_at(x, w, y, d, dh, adjoint, i);
}

template <typename R>
__global__ void weight_grad_kernel(const R* x, const R* g, R* gw, Dims d, bool dh) {
  GS_GRID_STRIDE(n, d.I * d.O * d.L * (dh ? 1 : d.M)) sphere::spectral::weight_grad_at(x, g, gw, d, dh, n);
}

Dims dims_of(const SpectralDims& s) { return {s.B, s.I, s.O, s.L, s.M}; }

template <typename R>
void launch_apply(bool dh, bool adjoint, const void* x, const void* w, void* y, const SpectralDims& s, void* stream) {
  const int64_t n = s.B * (adjoint ? s.I : s.O) * s.L * s.M;
  if (n > 0)
    apply_kernel<R><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const R*>(x), static_cast<const R*>(w), static_cast<R*>(y), dims_of(s), dh, adjoint);
}

template <typename R>
void launch_weight_grad(bool dh, const void* x, const void* g, void* gw, const SpectralDims& s, void* stream) {
  const int64_t n = s.I * s.O * s.L * (dh ? 1 : s.M);
  if (n > 0)
    weight_grad_kernel<R><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        static_cast<const R*>(x), static_cast<const R*>(g), static_cast<R*>(gw), dims_of(s), dh);
}

}  // namespace

bool spectral_apply(DType real, bool dh, bool adjoint, const void* x, const void* w, void* y, const SpectralDims& d,
                    void* stream) {
  if (real == DType::f32) return launch_apply<float>(dh, adjoint, x, w, y, d, stream), true;
  if (real == DType::f64) return launch_apply<double>(dh, adjoint, x, w, y, d, stream), true;
  return false;
}

bool spectral_weight_grad(DType real, bool dh, const void* x, const void* g, void* gw, const SpectralDims& d,
                          void* stream) {
  if (real == DType::f32) return launch_weight_grad<float>(dh, x, g, gw, d, stream), true;
  if (real == DType::f64) return launch_weight_grad<double>(dh, x, g, gw, d, stream), true;
  return false;
}

}  // namespace gs::cuda_kernels
