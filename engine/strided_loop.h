// Iteration over N strided operands that share one shape: the workhorse of copies, casts and
// elementwise kernels. The innermost dimension is handed to the callback as a run, so contiguous
// data becomes a tight loop the compiler can vectorise.
#pragma once
#include <array>
#include <cstdint>

#include "engine/shape.h"

namespace gs {

// f(std::array<int64_t, N> offsets, std::array<int64_t, N> inner_strides, int64_t inner_len)
// is called once per run of the last dimension. Offsets and strides are in elements.
template <size_t N, typename F>
void for_each_run(const Shape& sizes, const std::array<const Shape*, N>& strides, std::array<int64_t, N> offsets,
                  F&& f) {
  const int64_t nd = static_cast<int64_t>(sizes.size());
  for (auto s : sizes)
    if (s == 0) return;
  if (nd == 0) {
    std::array<int64_t, N> inner{};
    f(offsets, inner, int64_t{1});
    return;
  }
  std::array<int64_t, N> inner;
  for (size_t k = 0; k < N; ++k) inner[k] = (*strides[k])[nd - 1];
  const int64_t len = sizes[nd - 1];
  Shape idx(nd, 0);
  while (true) {
    f(offsets, inner, len);
    int64_t d = nd - 2;
    for (; d >= 0; --d) {
      idx[d]++;
      for (size_t k = 0; k < N; ++k) offsets[k] += (*strides[k])[d];
      if (idx[d] < sizes[d]) break;
      for (size_t k = 0; k < N; ++k) offsets[k] -= (*strides[k])[d] * sizes[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

}  // namespace gs
