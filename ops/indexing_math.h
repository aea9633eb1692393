// The per-element arithmetic of the indexing ops (ops/indexing.h), shared by the CPU loops
// (ops/index_map.cpp) and the CUDA kernels (ops/indexing_cuda.cu), so the CPU suites test what
// the GPU computes. Every indexing op is reduced to two primitives over flat row-major positions:
//   take: out[q] = x[positions[q]]                        (index_select, gather, masked_select, x[idx])
//   put:  out[p] = base[p] combined with the sources q that target p, listed in increasing q
//         (a CSR table: entries[starts[p] .. starts[p+1]) ), which makes duplicates deterministic:
//         accumulate sums them in that order, overwrite keeps the last one (the last in index order).
// No checks here: the host validates every index before a kernel runs.
#pragma once
#include <cstdint>

#include "ops/elementwise_math.h"  // GS_HD

namespace gs::indexing {

// The accumulator of a sum: f32 sums in f64, c64 in c128, as every sum of gradsphere.
template <typename T>
struct Wider {
  using type = T;
};
template <>
struct Wider<float> {
  using type = double;
};
template <template <typename> class Complex>
struct Wider<Complex<float>> {
  using type = Complex<double>;
};

template <typename T>
GS_HD inline T take_point(const T* x, const int64_t* positions, int64_t q) {
  return x[positions[q]];
}

// base[p] plus every source that targets p, in increasing source order.
template <typename T>
GS_HD inline T put_accumulate_point(const T* base, const T* src, const int64_t* starts, const int64_t* entries,
                                    int64_t p) {
  using A = typename Wider<T>::type;
  A acc = static_cast<A>(base[p]);
  for (int64_t k = starts[p]; k < starts[p + 1]; ++k) acc += static_cast<A>(src[entries[k]]);
  return static_cast<T>(acc);
}

// The last source that targets p, or base[p] when none does. `src_step` 0 reads src[0] for every
// source (a fill with one value).
template <typename T>
GS_HD inline T put_overwrite_point(const T* base, const T* src, int64_t src_step, const int64_t* starts,
                                   const int64_t* entries, int64_t p) {
  const int64_t last = starts[p + 1] - 1;
  return last >= starts[p] ? src[entries[last] * src_step] : base[p];
}

}  // namespace gs::indexing
