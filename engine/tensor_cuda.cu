#include "engine/cuda_types.cuh"
#include "engine/tensor_cuda.h"

namespace gs::cuda_kernels {
namespace {

template <typename To, typename From>
__global__ void strided_copy_kernel(To* dst, const From* src, StridedLoop<2> loop) {
  GS_GRID_STRIDE(i, loop.numel) {
    int64_t off[2];
    loop.offsets(i, off);
    dst[off[0]] = convert<To>(src[off[1]]);
  }
}

template <typename T>
__global__ void fill_kernel(T* dst, int64_t n, T value) {
  GS_GRID_STRIDE(i, n) dst[i] = value;
}

}  // namespace

void strided_copy(DType to, DType from, void* dst, const void* src, const StridedLoop<2>& loop, void* stream) {
  if (loop.numel == 0) return;
  with_storage_dtype(to, [&](auto to_tag) {
    with_storage_dtype(from, [&](auto from_tag) {
      using To = device_t<decltype(to_tag)::value>;
      using From = device_t<decltype(from_tag)::value>;
      strided_copy_kernel<To, From><<<blocks_for(loop.numel), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
          static_cast<To*>(dst), static_cast<const From*>(src), loop);
    });
  });
}

void fill(DType dtype, void* dst, int64_t n, double re, double im, void* stream) {
  if (n == 0) return;
  with_storage_dtype(dtype, [&](auto tag) {
    using T = device_t<decltype(tag)::value>;
    T v;
    if constexpr (is_device_complex<T>::value) {
      v = T(static_cast<typename T::value_type>(re), static_cast<typename T::value_type>(im));
    } else {
      v = static_cast<T>(re);
    }
    fill_kernel<T><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(static_cast<T*>(dst), n, v);
  });
}

}  // namespace gs::cuda_kernels
