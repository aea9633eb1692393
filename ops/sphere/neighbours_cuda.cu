// The 3x3 sphere-neighbourhood gather and its adjoint on CUDA: one thread per output element
// (grid-stride), indices from neighbours_math.h. The adjoint sums at each source point in a fixed
// order (no atomics), so it is deterministic.
#include "engine/cuda_types.cuh"
#include "ops/sphere/neighbours_cuda.h"
#include "ops/sphere/neighbours_math.h"

namespace gs::cuda_kernels {
namespace {

template <typename T>
__global__ void gather_kernel(T* out, const T* x, int64_t planes, int64_t H, int64_t W) {
  const int64_t HW = H * W;
  GS_GRID_STRIDE(i, planes * 9 * HW) {
    const int64_t w = i % W, h = (i / W) % H, tap = (i / HW) % 9, p = i / (9 * HW);
    const sphere::neighbours::Source s = sphere::neighbours::source(h, w, tap / 3, tap % 3, H, W, 3);
    out[i] = x[p * HW + s.row * W + s.col];
  }
}

template <typename T>
__global__ void scatter_kernel(T* out, const T* g, int64_t planes, int64_t H, int64_t W) {
  const int64_t HW = H * W;
  GS_GRID_STRIDE(i, planes * HW) {
    const int64_t c = i % W, r = (i / W) % H, p = i / HW;
    out[i] = sphere::neighbours::scatter_point(g + p * 9 * HW, r, c, H, W);
  }
}

template <template <typename> class Launch, typename... Args>
bool with_real(DType dtype, Args... args) {
  if (dtype == DType::f32) return Launch<float>{}(args...), true;
  if (dtype == DType::f64) return Launch<double>{}(args...), true;
  return false;
}

template <typename T>
struct Gather {
  void operator()(void* out, const void* x, int64_t planes, int64_t H, int64_t W, void* stream) const {
    const int64_t n = planes * 9 * H * W;
    if (n > 0)
      gather_kernel<T><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<T*>(out), static_cast<const T*>(x), planes, H, W);
  }
};

template <typename T>
struct Scatter {
  void operator()(void* out, const void* g, int64_t planes, int64_t H, int64_t W, void* stream) const {
    const int64_t n = planes * H * W;
    if (n > 0)
      scatter_kernel<T><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<T*>(out), static_cast<const T*>(g), planes, H, W);
  }
};

}  // namespace

bool neighbours_gather(DType dtype, void* out, const void* x, int64_t planes, int64_t H, int64_t W, void* stream) {
  return with_real<Gather>(dtype, out, x, planes, H, W, stream);
}

bool neighbours_scatter(DType dtype, void* out, const void* g, int64_t planes, int64_t H, int64_t W, void* stream) {
  return with_real<Scatter>(dtype, out, g, planes, H, W, stream);
}

}  // namespace gs::cuda_kernels
