// The CPU loop of the line kernels (internal to ops/: ops/scan.cpp, ops/argmax.cpp). A contiguous
// operand is seen as (outer, n, inner) and the op runs along n: line l starts at element
// (l / inner) * n * inner + l % inner and its elements lie `inner` apart, as in the CUDA kernels
// of ops/reduce_more_cuda.cu.
#pragma once
#include "ops/kernels.h"

namespace gs::kernels {

struct LineShape {
  int64_t outer = 1, n = 1, inner = 1;
};

// The lines along dim d of a tensor of `sizes` (a 0-dim tensor: one line of one element).
inline LineShape lines_along(const Shape& sizes, int64_t d) {
  LineShape s;
  for (int64_t k = 0; k < static_cast<int64_t>(sizes.size()); ++k)
    (k < d ? s.outer : k == d ? s.n : s.inner) *= sizes[k];
  return s;
}

// f(l, first element of line l) for every line, over OpenMP threads when the work is large.
template <typename F>
void for_each_line(const LineShape& s, F&& f) {
  const int64_t lines = s.outer * s.inner;
  auto run = [&](int64_t l) { f(l, (l / s.inner) * s.n * s.inner + l % s.inner); };
  if (lines > 1 && lines * s.n >= kParallelGrain) {
#pragma omp parallel for
    for (int64_t l = 0; l < lines; ++l) run(l);
  } else {
    for (int64_t l = 0; l < lines; ++l) run(l);
  }
}

}  // namespace gs::kernels
