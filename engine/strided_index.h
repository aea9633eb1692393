// Element offsets of N strided operands over one shape, from a linear index: what a GPU thread
// needs to find its elements (one thread per output element, any strides, broadcasting as zero
// strides). __host__ __device__, so the CPU suite checks the same index arithmetic the kernels use.
#pragma once
#include <array>
#include <cstdint>

#include "engine/shape.h"

#if defined(__CUDACC__)
#define GS_HD_INDEX __host__ __device__
#else
#define GS_HD_INDEX
#endif

namespace gs {

inline constexpr int kMaxLoopDims = 16;

template <int N>
struct StridedLoop {
  int ndim = 0;  // after merging dims that are contiguous in every operand
  int64_t numel = 0;
  int64_t sizes[kMaxLoopDims] = {};
  int64_t strides[N][kMaxLoopDims] = {};  // in elements; 0 along broadcast dims

  // off[k] = offset of operand k's element number `linear` (row-major over sizes).
  // The outermost dim needs no division (what remains of `linear` is its index), so a loop that
  // merged into one dim costs a multiply per operand.
  GS_HD_INDEX void offsets(int64_t linear, int64_t (&off)[N]) const {
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 1; --d) {
      const int64_t i = linear % sizes[d];
      linear /= sizes[d];
      for (int k = 0; k < N; ++k) off[k] += i * strides[k][d];
    }
    if (ndim > 0)
      for (int k = 0; k < N; ++k) off[k] += linear * strides[k][0];
  }
};

// The loop over `shape` with each operand's strides (already expanded to `shape`). Size-1 dims are
// dropped and neighbours that are contiguous in every operand are merged, so a contiguous tensor
// becomes one dim. Throws when the merged shape still has more than kMaxLoopDims dims.
// (engine/strided_index.cpp: host code, instantiated for N = 1..4.)
template <int N>
StridedLoop<N> make_strided_loop(const Shape& shape, const std::array<const Shape*, N>& strides);

}  // namespace gs
