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

namespace gs::math {

struct ProdStep {
  template <typename A, typename X>
  GS_HD A operator()(A acc, X x) const { return acc * static_cast<A>(x); }
};

// One line of a scan (cumsum, cumprod) in place order: y[k] = x[0] (+ or *) ... x[k], or from the
// end when `reverse` (y[k] = x[k] ... x[n-1]); elements `stride` apart. The CPU loop and the CUDA
// kernel (ops/reduce_more_cuda.cu) both run it per line, so they agree to the bit.
template <typename Acc, typename T, typename Step>
GS_HD void scan_line(const T* x, T* y, int64_t n, int64_t stride, bool reverse, Acc init, Step step) {
  Acc acc = init;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t at = (reverse ? n - 1 - k : k) * stride;
    acc = step(acc, x[at]);
    y[at] = static_cast<T>(acc);
  }
}

// argmax (kMax) / argmin: whether candidate b at index j replaces the best a at index i. As
// torch: a NaN beats every number (the first NaN is the answer), ties keep the lower index. The
// choice depends only on the two (value, index) pairs, so any fold order gives the same index.
template <bool kMax>
struct ArgExtremum {
  template <typename T>
  GS_HD bool better(T b, int64_t j, T a, int64_t i) const {
    const bool b_nan = b != b, a_nan = a != a;
    if (a_nan || b_nan) return b_nan && (!a_nan || j < i);
    if (b == a) return j < i;
    return kMax ? b > a : b < a;
  }
  // The index of the extremum of one line of n >= 1 elements `stride` apart.
  template <typename T>
  GS_HD int64_t line(const T* x, int64_t n, int64_t stride) const {
    int64_t best = 0;
    for (int64_t k = 1; k < n; ++k)
      if (better(x[k * stride], k, x[best * stride], best)) best = k;
    return best;
  }
};

}  // namespace gs::math
