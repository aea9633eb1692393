#include "engine/cuda_types.cuh"
#include "ops/reduce_math.h"
#include "ops/reduce_more_cuda.h"

namespace gs::cuda_kernels {
namespace {

template <typename T> struct wide { using type = T; };
template <> struct wide<float> { using type = double; };

// One thread per line (o, i): the shared sequential scan, so every element sees the CPU's order.
template <typename T, typename Step>
__global__ void scan_lines(const T* in, T* out, int64_t outer, int64_t n, int64_t inner, bool reverse,
                           typename wide<T>::type init, Step step) {
  GS_GRID_STRIDE(line, outer * inner) {
    const int64_t o = line / inner, i = line % inner;
    const int64_t base = o * n * inner + i;
    math::scan_line(in + base, out + base, n, inner, reverse, init, step);
  }
}

// One block per line: each thread keeps the best (value, index) of elements tid, tid + blockDim,
// ..., then the block halves in shared memory. ArgExtremum's choice does not depend on the order
// of the folds, so the index is the sequential loop's.
template <bool kMax, typename T>
__global__ void arg_lines(const T* in, int64_t* out, int64_t outer, int64_t n, int64_t inner) {
  __shared__ T best_value[kThreads];
  __shared__ int64_t best_index[kThreads];
  const math::ArgExtremum<kMax> arg;
  for (int64_t line = blockIdx.x; line < outer * inner; line += gridDim.x) {
    const int64_t o = line / inner, i = line % inner;
    const T* x = in + o * n * inner + i;
    int64_t bi = threadIdx.x < n ? threadIdx.x : 0;
    T bv = x[bi * inner];
    for (int64_t k = bi + blockDim.x; k < n; k += blockDim.x)
      if (arg.better(x[k * inner], k, bv, bi)) bv = x[k * inner], bi = k;
    best_value[threadIdx.x] = bv;
    best_index[threadIdx.x] = bi;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
      if (threadIdx.x < w &&
          arg.better(best_value[threadIdx.x + w], best_index[threadIdx.x + w], best_value[threadIdx.x],
                     best_index[threadIdx.x])) {
        best_value[threadIdx.x] = best_value[threadIdx.x + w];
        best_index[threadIdx.x] = best_index[threadIdx.x + w];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) out[line] = best_index[0];
    __syncthreads();
  }
}

template <typename F>
bool with_real(DType dtype, F&& f) {
  if (dtype == DType::f32) return f(float{});
  if (dtype == DType::f64) return f(double{});
  return false;
}

}  // namespace

bool scan(ScanKind kind, DType dtype, void* out, const void* in, int64_t outer, int64_t n, int64_t inner,
          bool reverse, void* stream) {
  if (outer * n * inner == 0) return true;
  return with_real(dtype, [&](auto tag) {
    using T = decltype(tag);
    using A = typename wide<T>::type;
    const auto s = static_cast<cudaStream_t>(stream);
    const auto* x = static_cast<const T*>(in);
    auto* y = static_cast<T*>(out);
    if (kind == ScanKind::sum)
      scan_lines<<<blocks_for(outer * inner), kThreads, 0, s>>>(x, y, outer, n, inner, reverse, A(0), math::SumStep{});
    else
      scan_lines<<<blocks_for(outer * inner), kThreads, 0, s>>>(x, y, outer, n, inner, reverse, A(1), math::ProdStep{});
    return true;
  });
}

bool arg_extremum(bool is_max, DType dtype, int64_t* out, const void* in, int64_t outer, int64_t n, int64_t inner,
                  void* stream) {
  if (outer * inner == 0) return true;
  if (n == 0) return false;
  return with_real(dtype, [&](auto tag) {
    using T = decltype(tag);
    const auto s = static_cast<cudaStream_t>(stream);
    const int64_t lines = outer * inner;
    const unsigned grid = static_cast<unsigned>(lines < kMaxBlocks ? lines : kMaxBlocks);
    if (is_max) arg_lines<true><<<grid, kThreads, 0, s>>>(static_cast<const T*>(in), out, outer, n, inner);
    else arg_lines<false><<<grid, kThreads, 0, s>>>(static_cast<const T*>(in), out, outer, n, inner);
    return true;
  });
}

}  // namespace gs::cuda_kernels
