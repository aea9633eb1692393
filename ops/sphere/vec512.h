// A 512-bit register of T for the ops/sphere kernels (lane_fft.cpp, legendre/table_kernels.cpp),
// as a GCC/Clang vector type: element-wise operators compile to whole-register instructions
// without depending on the auto-vectoriser, and the compiler splits them on narrower hardware.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

// Without AVX-512 GCC notes that passing or returning a 64-byte vector by value has a different ABI.
// Only kernel helpers do that: the includers' anonymous-namespace helpers and the inline load /
// store below, all compiled with the library's one -march; no interface of the library takes or
// returns a Vec.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace gs::sphere::simd {

template <typename T>
struct VecOf {
  typedef T type __attribute__((vector_size(64)));
};
template <typename T>
using Vec = typename VecOf<T>::type;

// Values of T per register: 8 doubles or 16 floats.
template <typename T>
constexpr int kLanes = static_cast<int>(64 / sizeof(T));

// The integer vector __builtin_shuffle takes as the index of a Vec<T> (GCC).
template <typename T>
struct IndexOf {
  using I = std::conditional_t<sizeof(T) == 8, int64_t, int32_t>;
  typedef I type __attribute__((vector_size(64)));
};
template <typename T>
using Index = typename IndexOf<T>::type;

// One register's worth of T from or to memory of any alignment.
template <typename T>
inline Vec<T> load(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename T>
inline void store(T* p, const Vec<T>& v) {
  std::memcpy(p, &v, sizeof v);
}

// An L x L block in L registers, transposed in place (v[i][j] -> v[j][i]): log2(L) rounds of
// two-source shuffles instead of L^2 scalar moves (the lane FFT's row loads and stores, the GEMM's
// transposed panels). Round b swaps bit b of the row index with bit b of the column index; after
// all rounds every bit is swapped.
// kSkipTop: every round but the last (bit log2(L) - 1), which the row movers below do with their
// half-register loads and stores.
template <typename R, bool kSkipTop = false>
inline void transpose_block(Vec<R> (&v)[kLanes<R>]) {
  constexpr int L = kLanes<R>;
#if defined(__GNUC__) && !defined(__clang__)
  using Mask = Index<R>;
  auto round = [&]<int b>() {
    Mask lo, hi;
    for (int p = 0; p < L; ++p) {
      lo[p] = (p & b) ? L + p - b : p;
      hi[p] = (p & b) ? L + p : p + b;
    }
    for (int i = 0; i < L; ++i)
      if ((i & b) == 0) {
        const Vec<R> a = v[i], c = v[i + b];
        v[i] = __builtin_shuffle(a, c, lo);
        v[i + b] = __builtin_shuffle(a, c, hi);
      }
  };
  round.template operator()<1>();
  round.template operator()<2>();
  if constexpr (L == 8) {
    if constexpr (!kSkipTop) round.template operator()<4>();
  } else {
    round.template operator()<4>();
    if constexpr (!kSkipTop) round.template operator()<8>();
  }
#else
  static_assert(!kSkipTop, "transpose_block: the rounds but the top one need GCC's shuffles");
  R t[L][L];
  for (int i = 0; i < L; ++i)
    for (int j = 0; j < L; ++j) t[j][i] = v[i][j];
  for (int i = 0; i < L; ++i) std::memcpy(&v[i], t[i], sizeof(v[i]));
#endif
}

// The L x L block at rows[i] + offset (i < L) transposed into v, and back (rows i < nr). With
// AVX-512 (and GCC's shuffles) the top round of the transpose (the 256-bit halves of rows i and
// i + L/2 exchanged) is done by the loads and stores themselves: half-register loads inserted into
// a register, and half-register stores, where a shuffle round takes the one port that does 512-bit
// shuffles (8 x 8 doubles: 16 shuffles instead of 24). Elsewhere: whole rows and every round.
template <typename R>
inline void load_transposed(const R* const (&rows)[kLanes<R>], int64_t offset, Vec<R> (&v)[kLanes<R>]) {
  constexpr int L = kLanes<R>;
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
  constexpr int H = L / 2;
  for (int i = 0; i < H; ++i) {
    const double* a = reinterpret_cast<const double*>(rows[i] + offset);
    const double* b = reinterpret_cast<const double*>(rows[i + H] + offset);
    v[i] = (Vec<R>)_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd(a)), _mm256_loadu_pd(b), 1);
    v[i + H] = (Vec<R>)_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd(a + 4)), _mm256_loadu_pd(b + 4), 1);
  }
  transpose_block<R, true>(v);
#else
  for (int i = 0; i < L; ++i) std::memcpy(&v[i], rows[i] + offset, sizeof(v[i]));
  transpose_block<R>(v);
#endif
}
template <typename R>
inline void store_transposed(Vec<R> (&v)[kLanes<R>], R* const (&rows)[kLanes<R>], int64_t offset, int64_t nr) {
  constexpr int L = kLanes<R>;
#if defined(__AVX512F__) && defined(__GNUC__) && !defined(__clang__)
  constexpr int H = L / 2;
  transpose_block<R, true>(v);
  for (int r = 0; r < L && r < nr; ++r) {
    double* out = reinterpret_cast<double*>(rows[r] + offset);
    const __m512d a = (__m512d)v[r % H], b = (__m512d)v[r % H + H];
    _mm256_storeu_pd(out, r < H ? _mm512_castpd512_pd256(a) : _mm512_extractf64x4_pd(a, 1));
    _mm256_storeu_pd(out + 4, r < H ? _mm512_castpd512_pd256(b) : _mm512_extractf64x4_pd(b, 1));
  }
#else
  transpose_block<R>(v);
  for (int i = 0; i < L && i < nr; ++i) std::memcpy(rows[i] + offset, &v[i], sizeof(v[i]));
#endif
}

}  // namespace gs::sphere::simd
