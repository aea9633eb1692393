// The generic element-map kernels of the CUDA twins: one thread per output element (grid-stride),
// each finding its operands through the StridedLoop (broadcast dims have stride 0), applying a
// functor of ops/elementwise_math.h (or another GS_HD header). Included by the .cu files only.
#pragma once
#include <type_traits>

#include "engine/cuda_types.cuh"
#include "engine/strided_index.h"

namespace gs::cuda_kernels {


template <typename Out, typename A, typename F>
__global__ void map1(Out* out, const A* a, StridedLoop<2> loop, F f) {
  GS_GRID_STRIDE(i, loop.numel) {
    int64_t off[2];
    loop.offsets(i, off);
    out[off[0]] = f(a[off[1]]);
  }
}

template <typename Out, typename A, typename B, typename F>
__global__ void map2(Out* out, const A* a, const B* b, StridedLoop<3> loop, F f) {
  GS_GRID_STRIDE(i, loop.numel) {
    int64_t off[3];
    loop.offsets(i, off);
    out[off[0]] = f(a[off[1]], b[off[2]]);
  }
}

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

template <typename Out, typename A, typename F>
bool launch1(void* out, const void* a, const StridedLoop<2>& loop, void* stream, F f) {
  if constexpr (std::is_invocable_v<F, A>) {
    if (loop.numel > 0)
      map1<Out, A, F><<<blocks_for(loop.numel), kThreads, 0, as_stream(stream)>>>(
          static_cast<Out*>(out), static_cast<const A*>(a), loop, f);
    return true;
  } else {
    return false;
  }
}

template <typename Out, typename A, typename B, typename F>
bool launch2(void* out, const void* a, const void* b, const StridedLoop<3>& loop, void* stream, F f) {
  if constexpr (std::is_invocable_v<F, A, B>) {
    if (loop.numel > 0)
      map2<Out, A, B, F><<<blocks_for(loop.numel), kThreads, 0, as_stream(stream)>>>(
          static_cast<Out*>(out), static_cast<const A*>(a), static_cast<const B*>(b), loop, f);
    return true;
  } else {
    return false;
  }
}

template <typename Out, typename A, typename B, typename C, typename F>
__global__ void map3(Out* out, const A* a, const B* b, const C* c, StridedLoop<4> loop, F f) {
  GS_GRID_STRIDE(i, loop.numel) {
    int64_t off[4];
    loop.offsets(i, off);
    out[off[0]] = f(a[off[1]], b[off[2]], c[off[3]]);
  }
}

template <typename Out, typename A, typename B, typename C, typename F>
bool launch3(void* out, const void* a, const void* b, const void* c, const StridedLoop<4>& loop, void* stream, F f) {
  if constexpr (std::is_invocable_v<F, A, B, C>) {
    if (loop.numel > 0)
      map3<Out, A, B, C, F><<<blocks_for(loop.numel), kThreads, 0, as_stream(stream)>>>(
          static_cast<Out*>(out), static_cast<const A*>(a), static_cast<const B*>(b), static_cast<const C*>(c), loop,
          f);
    return true;
  } else {
    return false;
  }
}

}  // namespace gs::cuda_kernels
