// The indexing primitives on CUDA, with ops/indexing_math.h's arithmetic (the CPU loops' own).
#include "engine/cuda_types.cuh"
#include "ops/indexing_cuda.h"
#include "ops/indexing_math.h"

namespace gs::cuda_kernels {
namespace {

template <typename T>
__global__ void take_kernel(T* out, const T* x, const int64_t* positions, int64_t n) {
  GS_GRID_STRIDE(q, n) { out[q] = indexing::take_point(x, positions, q); }
}

template <typename T>
__global__ void accumulate_kernel(T* out, const T* base, const T* src, const int64_t* starts, const int64_t* entries,
                                  int64_t n) {
  GS_GRID_STRIDE(p, n) { out[p] = indexing::put_accumulate_point(base, src, starts, entries, p); }
}

template <typename T>
__global__ void overwrite_kernel(T* out, const T* base, const T* src, int64_t step, const int64_t* starts,
                                 const int64_t* entries, int64_t n) {
  GS_GRID_STRIDE(p, n) { out[p] = indexing::put_overwrite_point(base, src, step, starts, entries, p); }
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

bool index_take(DType dtype, void* out, const void* x, const int64_t* positions, int64_t n, void* stream) {
  if (n == 0) return true;
  with_storage_dtype(dtype, [&](auto tag) {
    using T = device_t<decltype(tag)::value>;
    take_kernel<T><<<blocks_for(n), kThreads, 0, as_stream(stream)>>>(static_cast<T*>(out), static_cast<const T*>(x),
                                                                       positions, n);
  });
  return true;
}

bool index_put_accumulate(DType dtype, void* out, const void* base, const void* src, const int64_t* starts,
                          const int64_t* entries, int64_t n_out, void* stream) {
  if (dtype == DType::b8 || dtype == DType::bf16) return false;  // no arithmetic in these
  if (n_out == 0) return true;
  with_dtype(dtype, [&](auto tag) {
    using T = device_t<decltype(tag)::value>;
    if constexpr (!std::is_same_v<T, bool>)
      accumulate_kernel<T><<<blocks_for(n_out), kThreads, 0, as_stream(stream)>>>(
          static_cast<T*>(out), static_cast<const T*>(base), static_cast<const T*>(src), starts, entries, n_out);
  });
  return true;
}

bool index_put_overwrite(DType dtype, void* out, const void* base, const void* src, int64_t src_step,
                         const int64_t* starts, const int64_t* entries, int64_t n_out, void* stream) {
  if (n_out == 0) return true;
  with_storage_dtype(dtype, [&](auto tag) {
    using T = device_t<decltype(tag)::value>;
    overwrite_kernel<T><<<blocks_for(n_out), kThreads, 0, as_stream(stream)>>>(
        static_cast<T*>(out), static_cast<const T*>(base), static_cast<const T*>(src), src_step, starts, entries,
        n_out);
  });
  return true;
}

}  // namespace gs::cuda_kernels
