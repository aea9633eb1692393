// The folding steps of the reductions, once for the CPU loop (ops/reduce_kernel.h) and the CUDA
// kernel (ops/reduce_cuda.cu): step(acc, x) folds one element in, combine(a, b) merges two partial
// results (threads on the CPU, blocks and warps on the GPU).
#pragma once
#include "ops/elementwise_math.h"

namespace gs::math {

struct SumStep {
  template <typename A, typename X>
  GS_HD A operator()(A acc, X x) const { return acc + static_cast<A>(x); }
  template <typename A>
  GS_HD A combine(A a, A b) const { return a + b; }
};

// A running max (kMax) or min. NaN propagates, as in torch.amax: once the accumulator is NaN no
// comparison can replace it (x != x is NaN's test on host and device alike).
template <bool kMax>
struct ExtremumStep {
  template <typename T>
  GS_HD T operator()(T acc, T x) const {
    if (x != x) return x;
    return (kMax ? x > acc : x < acc) ? x : acc;
  }
  template <typename T>
  GS_HD T combine(T a, T b) const { return (*this)(a, b); }
};

}  // namespace gs::math
