// The lane FFT (lane_fft.h). Layout of a group of L rows: element k of the complex sequence (the
// half-length packed row for even n, the whole row for odd n) is 2L reals, the L real parts then
// the L imaginary parts ([k][re/im][lane]), so every butterfly is a loop over lanes that the
// compiler turns into whole-register operations.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
// The lane count is sized for 512-bit vectors; GCC's tuning for AVX-512 CPUs defaults to 256.
#pragma GCC target("prefer-vector-width=512")
#endif
#include "ops/sphere/lane_fft.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <memory>
#include <numbers>
#include <utility>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "engine/error.h"
#include "engine/keyed_cache.h"
#include "ops/sphere/vec512.h"

namespace gs::sphere::detail {

// One Stockham decimation-in-frequency stage: sub-transforms of length len = radix * span, stride
// s (the product of the earlier radices). Its twiddles w_len^{j p} (forward sign), p < span,
// 1 <= j < radix, are stored at tw[(p * (radix - 1) + j - 1)].
template <typename R>
struct LaneFftStage {
  int radix;
  int64_t span, stride;
  std::vector<R> tw_re, tw_im;
  std::vector<R> root_re, root_im;  // e^{-2 pi i t / radix}, t < radix (the odd-prime DFT)
};

// A plan for one (n, R): the stages of the length-h complex FFT (h = n/2 for even n, n for odd n)
// and, for even n, the recombination twiddles e^{-2 pi i m / n} for m <= h.
template <typename R>
struct LanePlan {
  int64_t n = 0, h = 0;
  std::vector<LaneFftStage<R>> stages;      // forward; the inverse too for even n
  std::vector<LaneFftStage<R>> inv_stages;  // odd n: the inverse's (the radices in the other order)
  std::vector<R> rec_re, rec_im;
  const std::vector<LaneFftStage<R>>& stages_for(bool inverse) const {
    return inverse && n % 2 != 0 ? inv_stages : stages;
  }
};

namespace {

using simd::kLanes;  // rows per group: one 64-byte register of R
using simd::Vec;
using simd::transpose_block;

// e^{i 2 pi num / den}, with num reduced mod den first so that the angle is exact in f64.
std::complex<double> unit_root(int64_t num, int64_t den) {
  const int64_t r = ((num % den) + den) % den;
  const double a = 2.0 * std::numbers::pi * static_cast<double>(r) / static_cast<double>(den);
  return {std::cos(a), std::sin(a)};
}

// Radices of h, largest power of 4 first, then 2, 3, 5, 7, ...; empty if a prime factor is above
// kMaxRadix. (An odd row's plan reorders them: make_plan.)
std::vector<int> factor_radices(int64_t h, bool* ok) {
  std::vector<int> radices;
  *ok = true;
  while (h % 4 == 0) radices.push_back(4), h /= 4;
  for (int p = 2; p <= kMaxRadix; ++p)  // only primes divide: their smaller factors are gone
    while (h % p == 0) radices.push_back(p), h /= p;
  if (h != 1) *ok = false;
  return radices;
}



// The Stockham stages of a length-h transform with the radices in this order.
template <typename R>
std::vector<LaneFftStage<R>> stages_of(int64_t h, const std::vector<int>& radices) {
  std::vector<LaneFftStage<R>> stages;
  int64_t len = h, stride = 1;
  for (int r : radices) {
    LaneFftStage<R> st{r, len / r, stride, {}, {}, {}, {}};
    for (int t = 0; t < r; ++t) {
      const std::complex<double> w = unit_root(-t, r);
      st.root_re.push_back(static_cast<R>(w.real()));
      st.root_im.push_back(static_cast<R>(w.imag()));
    }
    for (int64_t p = 0; p < st.span; ++p)
      for (int j = 1; j < r; ++j) {
        const std::complex<double> w = unit_root(-j * p, len);
        st.tw_re.push_back(static_cast<R>(w.real()));
        st.tw_im.push_back(static_cast<R>(w.imag()));
      }
    stages.push_back(std::move(st));
    len /= r;
    stride *= r;
  }
  return stages;
}

template <typename R>
std::shared_ptr<const LanePlan<R>> make_plan(int64_t n) {
  auto plan = std::make_shared<LanePlan<R>>();
  GS_CHECK(n >= 2, "lane FFT: expected a length n >= 2, got {}", n);
  plan->n = n;
  plan->h = n % 2 == 0 ? n / 2 : n;  // odd n: a complex FFT of the whole row
  bool ok = false;
  const std::vector<int> radices = factor_radices(plan->h, &ok);
  GS_CHECK(ok, "lane FFT: length {} is not supported (expected n >= 2 with n/2 (even n) or n (odd n) free "
                         "of primes above {})",
           n, kMaxRadix);
  if (n % 2 == 0) {
    plan->stages = stages_of<R>(plan->h, radices);
  } else {
    // An odd row is real going in (forward) and only its real part comes out (inverse): the
    // largest prime's stage, most of the work, goes first forward and last in the inverse, where
    // a prime >= 7 (a direct DFT) reads or makes half the values (run_stage's RealEdge). Rows of
    // 3s and 5s only (15, 75) get the order and no saving.
    std::vector<int> largest_first(radices.rbegin(), radices.rend());
    plan->stages = stages_of<R>(plan->h, largest_first);
    plan->inv_stages = stages_of<R>(plan->h, radices);
  }
  for (int64_t m = 0; m <= plan->h && n % 2 == 0; ++m) {  // the even-length recombination only
    const std::complex<double> w = unit_root(-m, n);
    plan->rec_re.push_back(static_cast<R>(w.real()));
    plan->rec_im.push_back(static_cast<R>(w.imag()));
  }
  return plan;
}

// Plans are cached per (n, R) in a KeyedCache that is never destroyed (as FFTW's plans).
template <typename R>
std::shared_ptr<const LanePlan<R>> cached_plan(int64_t n) {
  static auto* plans = new KeyedCache<int64_t, LanePlan<R>>(
      [](const int64_t& len) -> std::shared_ptr<const LanePlan<R>> { return make_plan<R>(len); });
  return plans->get(n);
}

// A complex lane vector: the L real parts, then the L imaginary parts.
template <typename R>
struct Lanes {
  Vec<R> re, im;
};

// v * (wr + i wi), on one complex lane vector.
template <typename R>
inline Lanes<R> twiddled(Vec<R> vr, Vec<R> vi, R wr, R wi) {
  return {vr * wr - vi * wi, vr * wi + vi * wr};
}

// ---- moving rows in and out of lanes ----
// A block of L rows x L reals (L/2 complex values per row) is moved with an in-register transpose:
// L unaligned row loads (or stores) and log2(L) rounds of two-source shuffles, instead of L^2
// scalar moves.

// The first `count` (< L) values at p into a vector (the rest zero), and the first `count` lanes of
// v to p: for the partial block at the end of a row. With AVX-512 one masked load or store (no
// access past count); elsewhere through a zero-padded copy.
template <typename R>
inline Vec<R> load_partial(const R* p, int count) {
#if defined(__AVX512F__)
  if constexpr (sizeof(R) == 4) return (Vec<R>)_mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1), p);
  else return (Vec<R>)_mm512_maskz_loadu_pd(static_cast<__mmask8>((1u << count) - 1), p);
#else
  R part[kLanes<R>] = {};
  std::memcpy(part, p, static_cast<size_t>(count) * sizeof(R));
  Vec<R> v;
  std::memcpy(&v, part, sizeof v);
  return v;
#endif
}
template <typename R>
inline void store_partial(R* p, const Vec<R>& v, int count) {
#if defined(__AVX512F__)
  if constexpr (sizeof(R) == 4) _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << count) - 1), (__m512)v);
  else _mm512_mask_storeu_pd(p, static_cast<__mmask8>((1u << count) - 1), (__m512d)v);
#else
  R part[kLanes<R>];
  std::memcpy(part, &v, sizeof v);
  std::memcpy(p, part, static_cast<size_t>(count) * sizeof(R));
#endif
}

// Each mover runs whole blocks in one loop and the partial last block apart: one loop over both,
// through load_partial / store_partial with a full-width case, was 10-40% slower per row (the
// whole-block loop then lost its fixed-width loads and stores).

// dst[t] = (rows[i][2t], rows[i][2t + 1]) over lanes i, for t < count.
template <typename R>
void load_lanes(const R* const (&rows)[kLanes<R>], Lanes<R>* dst, int64_t count) {
  constexpr int L = kLanes<R>;
  int64_t t0 = 0;
  for (; t0 + L / 2 <= count; t0 += L / 2) {
    Vec<R> v[L];
    simd::load_transposed<R>(rows, 2 * t0, v);
    for (int t = 0; t < L / 2; ++t) dst[t0 + t] = {v[2 * t], v[2 * t + 1]};
  }
  if (const int w = static_cast<int>(count - t0); w > 0) {  // the partial last block
    Vec<R> v[L];
    for (int i = 0; i < L; ++i) v[i] = load_partial(rows[i] + 2 * t0, 2 * w);
    transpose_block<R>(v);
    for (int t = 0; t < w; ++t) dst[t0 + t] = {v[2 * t], v[2 * t + 1]};
  }
}

// rows[i][2t], rows[i][2t + 1] = src[t] for lanes i < nr, t < count.
template <typename R>
void store_lanes(const Lanes<R>* src, int64_t count, R* const (&rows)[kLanes<R>], int64_t nr) {
  constexpr int L = kLanes<R>;
  int64_t t0 = 0;
  for (; t0 + L / 2 <= count; t0 += L / 2) {
    Vec<R> v[L];
    for (int t = 0; t < L / 2; ++t) v[2 * t] = src[t0 + t].re, v[2 * t + 1] = src[t0 + t].im;
    simd::store_transposed<R>(v, rows, 2 * t0, nr);
  }
  if (const int w = static_cast<int>(count - t0); w > 0) {
    Vec<R> v[L] = {};
    for (int t = 0; t < w; ++t) v[2 * t] = src[t0 + t].re, v[2 * t + 1] = src[t0 + t].im;
    transpose_block<R>(v);
    for (int i = 0; i < nr; ++i) store_partial(rows[i] + 2 * t0, v[i], 2 * w);
  }
}

// dst[t] = (rows[i][t], 0) over lanes i, for t < count: real rows (odd lengths) into complex lanes.
template <typename R>
void load_real_lanes(const R* const (&rows)[kLanes<R>], Lanes<R>* dst, int64_t count) {
  constexpr int L = kLanes<R>;
  int64_t t0 = 0;
  for (; t0 + L <= count; t0 += L) {
    Vec<R> v[L];
    simd::load_transposed<R>(rows, t0, v);
    for (int t = 0; t < L; ++t) dst[t0 + t] = {v[t], Vec<R>{}};
  }
  if (const int w = static_cast<int>(count - t0); w > 0) {
    Vec<R> v[L];
    for (int i = 0; i < L; ++i) v[i] = load_partial(rows[i] + t0, w);
    transpose_block<R>(v);
    for (int t = 0; t < w; ++t) dst[t0 + t] = {v[t], Vec<R>{}};
  }
}

// rows[i][t] = Re src[t] for lanes i < nr, t < count.
template <typename R>
void store_real_lanes(const Lanes<R>* src, int64_t count, R* const (&rows)[kLanes<R>], int64_t nr) {
  constexpr int L = kLanes<R>;
  int64_t t0 = 0;
  for (; t0 + L <= count; t0 += L) {
    Vec<R> v[L];
    for (int t = 0; t < L; ++t) v[t] = src[t0 + t].re;
    simd::store_transposed<R>(v, rows, t0, nr);
  }
  if (const int w = static_cast<int>(count - t0); w > 0) {
    Vec<R> v[L] = {};
    for (int t = 0; t < w; ++t) v[t] = src[t0 + t].re;
    transpose_block<R>(v);
    for (int i = 0; i < nr; ++i) store_partial(rows[i] + t0, v[i], w);
  }
}

// What a stage may assume at its edge (the direct DFT of a prime radix >= 7 uses it): nothing; that
// its inputs are real (an odd row's first forward stage: half the multiply-adds); that only the
// real parts of its outputs are read (an odd row's last inverse stage, span 1: half again).
enum class RealEdge { none, input, output };

// Applies one stage from `in` to `out` (arrays of h Lanes). Inverse stages use conjugate twiddles
// and roots. Radices 2, 3, 4 and 5 have dedicated butterflies; other odd primes a direct DFT.
// kRadix: the stage's radix (st.radix), a constant here (kStageRadices).
template <typename R, bool Inverse, int kRadix, RealEdge Edge = RealEdge::none>
void run_stage(const LaneFftStage<R>& st, const Lanes<R>* in, Lanes<R>* out) {
  using V = Vec<R>;
  constexpr int r = kRadix;
  const int64_t span = st.span, s = st.stride, in_step = s * span;
  if constexpr (Edge == RealEdge::output)  // it writes no twiddles: the last stage only
    GS_CHECK(span == 1, "lane FFT: internal error: a real-output stage of span {} (expected the last, span 1)", span);
  const R sgn = Inverse ? R(1) : R(-1);  // the sign of the exponent
  const R tw_sign = Inverse ? R(-1) : R(1);
  for (int64_t p = 0; p < span; ++p) {
    // Output j > 0 gets the twiddle w^{j p}, conjugated for the inverse.
    R wr[r], wi[r];
    for (int j = 1; j < r; ++j) {
      wr[j] = st.tw_re[static_cast<size_t>(p * (r - 1) + j - 1)];
      wi[j] = tw_sign * st.tw_im[static_cast<size_t>(p * (r - 1) + j - 1)];
    }
    for (int64_t q = 0; q < s; ++q) {
      const Lanes<R>* a = in + q + s * p;  // a[k * in_step] is input k
      Lanes<R>* y = out + q + s * r * p;   // y[j * s] is output j
      auto put = [&](int j, V vr, V vi) { y[j * s] = j == 0 ? Lanes<R>{vr, vi} : twiddled<R>(vr, vi, wr[j], wi[j]); };
      if constexpr (r == 4) {
        const Lanes<R> a0 = a[0], a1 = a[in_step], a2 = a[2 * in_step], a3 = a[3 * in_step];
        const V t0r = a0.re + a2.re, t0i = a0.im + a2.im, t1r = a0.re - a2.re, t1i = a0.im - a2.im;
        const V t2r = a1.re + a3.re, t2i = a1.im + a3.im, t3r = a1.re - a3.re, t3i = a1.im - a3.im;
        // y1 = t1 + sgn i t3, y3 = t1 - sgn i t3 (omega_4 = sgn i)
        put(0, t0r + t2r, t0i + t2i);
        put(1, t1r - sgn * t3i, t1i + sgn * t3r);
        put(2, t0r - t2r, t0i - t2i);
        put(3, t1r + sgn * t3i, t1i - sgn * t3r);
      } else if constexpr (r == 2) {
        const Lanes<R> a0 = a[0], a1 = a[in_step];
        put(0, a0.re + a1.re, a0.im + a1.im);
        put(1, a0.re - a1.re, a0.im - a1.im);
      } else if constexpr (r == 3) {
        const Lanes<R> a0 = a[0], a1 = a[in_step], a2 = a[2 * in_step];
        const R c = R(-0.5), sn = sgn * static_cast<R>(std::numbers::sqrt3 / 2);
        const V sr = a1.re + a2.re, si = a1.im + a2.im, dr = a1.re - a2.re, di = a1.im - a2.im;
        const V mr = a0.re + c * sr, mi = a0.im + c * si;
        put(0, a0.re + sr, a0.im + si);
        put(1, mr - sn * di, mi + sn * dr);
        put(2, mr + sn * di, mi - sn * dr);
      } else if constexpr (r == 5) {
        const Lanes<R> a0 = a[0], a1 = a[in_step], a2 = a[2 * in_step], a3 = a[3 * in_step], a4 = a[4 * in_step];
        // cos and sin of 2 pi / 5 and 4 pi / 5
        const R c1 = st.root_re[1], c2 = st.root_re[2], s1 = -st.root_im[1], s2 = -st.root_im[2];
        const V t1r = a1.re + a4.re, t1i = a1.im + a4.im, t2r = a2.re + a3.re, t2i = a2.im + a3.im;
        const V t3r = a1.re - a4.re, t3i = a1.im - a4.im, t4r = a2.re - a3.re, t4i = a2.im - a3.im;
        const V b1r = a0.re + c1 * t1r + c2 * t2r, b1i = a0.im + c1 * t1i + c2 * t2i;
        const V b2r = a0.re + c2 * t1r + c1 * t2r, b2i = a0.im + c2 * t1i + c1 * t2i;
        const V d1r = s1 * t3r + s2 * t4r, d1i = s1 * t3i + s2 * t4i;
        const V d2r = s2 * t3r - s1 * t4r, d2i = s2 * t3i - s1 * t4i;
        // y1 = b1 + sgn i d1, y4 = b1 - sgn i d1, y2 = b2 + sgn i d2, y3 = b2 - sgn i d2
        put(0, a0.re + t1r + t2r, a0.im + t1i + t2i);
        put(1, b1r - sgn * d1i, b1i + sgn * d1r);
        put(2, b2r - sgn * d2i, b2i + sgn * d2r);
        put(3, b2r + sgn * d2i, b2i - sgn * d2r);
        put(4, b1r + sgn * d1i, b1i - sgn * d1r);
      } else if constexpr (Edge != RealEdge::none) {
        // The generic DFT below on real rows, with half its sums: cos_j = a_0 + sum_k cos t_k and
        // sin_j = sum_k sin u_k, real.
        //   input (Im a_k = 0): t_k, u_k real; y_j, y_{r-j} = cos_j +- sgn i sin_j, then twiddled.
        //   output (only Re y read; the last stage: span 1, no twiddles): t_k's real part, u_k's
        //   imaginary part; Re y_j, Re y_{r-j} = cos_j -+ sgn sin_j. The imaginary parts are not
        //   written (store_real_lanes reads the real parts only).
        constexpr bool real_in = Edge == RealEdge::input;
        constexpr int kHalf = (r - 1) / 2;
        V tr[kHalf], u[kHalf];
        V y0r = a[0].re;
        for (int k = 1; k <= kHalf; ++k) {
          const Lanes<R>& ak = a[k * in_step];
          const Lanes<R>& bk = a[(r - k) * in_step];
          tr[k - 1] = ak.re + bk.re, u[k - 1] = real_in ? ak.re - bk.re : ak.im - bk.im;
          y0r += tr[k - 1];
        }
        if constexpr (real_in) put(0, y0r, V{});
        else y[0].re = y0r;
        for (int j = 1; j <= kHalf; ++j) {
          V cos_j = a[0].re, sin_j{};
          int t = 0;  // j k mod r
          for (int k = 1; k <= kHalf; ++k) {
            t += j;
            if (t >= r) t -= r;
            cos_j += st.root_re[static_cast<size_t>(t)] * tr[k - 1];
            sin_j += -st.root_im[static_cast<size_t>(t)] * u[k - 1];
          }
          if constexpr (real_in) {
            put(j, cos_j, sgn * sin_j);
            put(r - j, cos_j, -sgn * sin_j);
          } else {
            y[j * s].re = cos_j - sgn * sin_j;
            y[(r - j) * s].re = cos_j + sgn * sin_j;
          }
        }
      } else {
        // Odd prime radix r <= kMaxRadix: y_j = sum_k a_k e^{sgn 2 pi i j k / r}. Pairing k with
        // r - k (t_k = a_k + a_{r-k}, u_k = a_k - a_{r-k}, k <= (r-1)/2) and j with r - j:
        //   y_j, y_{r-j} = a_0 + sum_k cos(2 pi jk/r) t_k  +- sgn i sum_k sin(2 pi jk/r) u_k,
        // a quarter of the multiplies of the direct sum (the 17 of an 85-point row: 256 per
        // butterfly, not 1088).
        constexpr int kHalf = (r - 1) / 2, half = kHalf;
        V tr[kHalf], ti[kHalf], ur[kHalf], ui[kHalf];
        V y0r = a[0].re, y0i = a[0].im;
        for (int k = 1; k <= half; ++k) {
          const Lanes<R>& ak = a[k * in_step];
          const Lanes<R>& bk = a[(r - k) * in_step];
          tr[k - 1] = ak.re + bk.re, ti[k - 1] = ak.im + bk.im;
          ur[k - 1] = ak.re - bk.re, ui[k - 1] = ak.im - bk.im;
          y0r += tr[k - 1], y0i += ti[k - 1];
        }
        put(0, y0r, y0i);
        for (int j = 1; j <= half; ++j) {
          V cr = a[0].re, ci = a[0].im, sr{}, si{};
          int t = 0;  // j k mod r
          for (int k = 1; k <= half; ++k) {
            t += j;
            if (t >= r) t -= r;
            const R c = st.root_re[static_cast<size_t>(t)], sn = -st.root_im[static_cast<size_t>(t)];
            cr += c * tr[k - 1], ci += c * ti[k - 1];
            sr += sn * ur[k - 1], si += sn * ui[k - 1];
          }
          put(j, cr - sgn * si, ci + sgn * sr);
          put(r - j, cr + sgn * si, ci - sgn * sr);
        }
      }
    }
  }
}

// Per-thread work buffers of a group (two arrays of h + 1 lane vectors: spectra reach m = h).
template <typename R>
struct GroupBuffers {
  explicit GroupBuffers(int64_t h) : a(static_cast<size_t>(h) + 1), b(static_cast<size_t>(h) + 1) {}
  std::vector<Lanes<R>> a, b;
};

// Every radix a plan uses (factor_radices: 4, 2 and the primes up to kMaxRadix), each with its own
// instantiation of run_stage, where the radix is a constant: its loops unroll and its twiddles stay
// in registers (rows of 128-1440 took 0.74-0.89x the time of one run_stage with the radix read at
// run time; 43 points 0.76-0.89x, 21 points 0.62x).
using kStageRadices = std::integer_sequence<int, 2, 3, 4, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61>;
template <int... P>
constexpr bool lists_4_and_the_primes_to_max_radix(std::integer_sequence<int, P...>) {
  for (int p = 2; p <= kMaxRadix; ++p) {
    bool prime = true;
    for (int d = 2; d * d <= p; ++d) prime = prime && p % d != 0;
    if ((prime || p == 4) != ((P == p) || ...)) return false;
  }
  return true;
}
static_assert(lists_4_and_the_primes_to_max_radix(kStageRadices{}),
              "kStageRadices must list 4 and every prime up to kMaxRadix");

// The stage with its real edge where the radix has a direct DFT to use it (forward: real inputs;
// inverse: real outputs), as a plain stage otherwise.
template <typename R, bool Inverse, int P>
void run_stage_at_edge(const LaneFftStage<R>& st, const Lanes<R>* in, Lanes<R>* out, bool real_edge) {
  if constexpr (P >= 7) {
    if (real_edge) return run_stage<R, Inverse, P, Inverse ? RealEdge::output : RealEdge::input>(st, in, out);
  }
  run_stage<R, Inverse, P>(st, in, out);
}

template <typename R, bool Inverse, int... P>
void run_any_stage(const LaneFftStage<R>& st, const Lanes<R>* in, Lanes<R>* out, bool real_edge,
                   std::integer_sequence<int, P...>) {
  const bool ran = ((st.radix == P && (run_stage_at_edge<R, Inverse, P>(st, in, out, real_edge), true)) || ...);
  GS_CHECK(ran, "lane FFT: internal error: no stage for radix {}", st.radix);
}

// The length-h complex FFT of a group from `buf`, through `scratch` (the same size), both
// overwritten; unnormalised, exponent sign - (forward) or + (Inverse). Returns the one of the two
// that holds the result (stages alternate between them; copying an odd count's result back was
// 2% of a 720x1440 SHT).
// real_row (odd n only): the group holds real rows, so the first forward stage reads real inputs
// and only the real parts of the last inverse stage's outputs are used.
template <typename R, bool Inverse>
Lanes<R>* complex_fft(const LanePlan<R>& plan, Lanes<R>* buf, Lanes<R>* scratch, bool real_row = false) {
  Lanes<R>* in = buf;
  Lanes<R>* out = scratch;
  const std::vector<LaneFftStage<R>>& stages = plan.stages_for(Inverse);
  for (size_t i = 0; i < stages.size(); ++i) {
    const bool edge = real_row && (Inverse ? i + 1 == stages.size() : i == 0);
    run_any_stage<R, Inverse>(stages[i], in, out, edge, kStageRadices{});
    std::swap(in, out);
  }
  return in;
}

// The other buffer of the group's pair.
template <typename R>
Lanes<R>* other_of(GroupBuffers<R>& g, const Lanes<R>* p) {
  return p == g.a.data() ? g.b.data() : g.a.data();
}

bool is_edge(int64_t m, int64_t n) { return m == 0 || 2 * m == n; }

// Where a group's spectra go, and where the inverse reads them:
//   rows    (rows, M) complex, one row per lane: moved through the transposing block stores / loads;
//   groups  the grouped layout of LaneRowFft::forward_groups: the group's M lane vectors as they
//           are ([m][re/im][lane]), group after group: one contiguous copy.
template <typename R>
struct SpectraAt {
  std::complex<R>* X = nullptr;  // rows
  R* groups = nullptr;           // or groups (then X is null)
};

// The group of rows from r0 in grouped spectra: M lane vectors. (The buffer is 64-byte aligned,
// LaneRowFft::forward_groups, and a group is M x 2 registers.)
template <typename R>
Lanes<R>* group_of(const SpectraAt<R>& at, int64_t r0, int64_t M) {
  return reinterpret_cast<Lanes<R>*>(at.groups + r0 / kLanes<R> * 2 * M * kLanes<R>);
}

// Group spectra spec[0 .. M) of rows [r0, r0 + nr) to `at`.
template <typename R>
void put_spectra(const Lanes<R>* spec, int64_t M, const SpectraAt<R>& at, int64_t r0, int64_t nr) {
  constexpr int L = kLanes<R>;
  if (at.groups != nullptr) {
    std::memcpy(group_of(at, r0, M), spec, static_cast<size_t>(M) * sizeof(Lanes<R>));
    return;
  }
  R* out_rows[L];
  for (int i = 0; i < L; ++i) out_rows[i] = reinterpret_cast<R*>(at.X + (r0 + std::min<int64_t>(i, nr - 1)) * M);
  store_lanes<R>(spec, M, out_rows, nr);
}

// Rows [r0, r0 + nr) of x, nr <= L, through the forward transform into `at`.
template <typename R>
void rfft_group(const LanePlan<R>& plan, const R* x, const SpectraAt<R>& at, int64_t r0, int64_t nr, int64_t M,
                R w_edge, R w_int, GroupBuffers<R>& g) {
  constexpr int L = kLanes<R>;
  const int64_t n = plan.n, h = plan.h;
  Lanes<R>* z = g.a.data();
  // z[k] = x[2k] + i x[2k+1]; lanes past the last row repeat it (their results are dropped).
  const R* in_rows[L];
  for (int i = 0; i < L; ++i) in_rows[i] = x + (r0 + std::min<int64_t>(i, nr - 1)) * n;
  if (n % 2 != 0) {  // odd n: the row's complex FFT, X[m] = w_m Z[m] (m = 0 is the only edge)
    load_real_lanes<R>(in_rows, z, n);
    z = complex_fft<R, false>(plan, z, g.b.data(), /*real_row=*/true);
    for (int64_t m = 0; m < M; ++m) {
      const R w = m == 0 ? w_edge : w_int;
      z[m].re *= w, z[m].im *= w;
    }
    put_spectra(z, M, at, r0, nr);
    return;
  }
  load_lanes<R>(in_rows, z, h);
  z = complex_fft<R, false>(plan, z, g.b.data());
  // With Zc = conj(Z[h - m]): E = (Z[m] + Zc) / 2, O = -i (Z[m] - Zc) / 2, X[m] = E + e^{-2 pi i m/n} O.
  // Grouped spectra are written in place (their layout is spec's); rows through the other buffer.
  Lanes<R>* spec = at.groups != nullptr ? group_of(at, r0, M) : other_of(g, z);
  for (int64_t m = 0; m < M; ++m) {
    // Z is h-periodic: m = h reads Z[0] twice. (Written as z[m % h], z[(h - m % h) % h], the two
    // integer divisions per mode were a fifth of a 360-point row.)
    const int64_t i = m < h ? m : 0;
    const Lanes<R> zm = z[i], zc = z[i == 0 ? 0 : h - i];
    const R wr = plan.rec_re[static_cast<size_t>(m)], wi = plan.rec_im[static_cast<size_t>(m)];
    const R scale = (is_edge(m, n) ? w_edge : w_int) * R(0.5);
    const Vec<R> er = zm.re + zc.re, ei = zm.im - zc.im;   // 2E
    const Vec<R> or_ = zm.im + zc.im, oi = zc.re - zm.re;  // 2O
    spec[m] = {scale * (er + wr * or_ - wi * oi), scale * (ei + wr * oi + wi * or_)};
  }
  if (at.groups == nullptr) put_spectra(spec, M, at, r0, nr);
}

// Rows [r0, r0 + nr) of the spectra at `at` through the inverse transform into x.
template <typename R>
void irfft_group(const LanePlan<R>& plan, const SpectraAt<R>& at, R* x, int64_t r0, int64_t nr, int64_t M,
                 R w_edge, R w_int, GroupBuffers<R>& g) {
  constexpr int L = kLanes<R>;
  const int64_t n = plan.n, h = plan.h;
  // The M input modes, in b (h + 1 entries). Grouped spectra are read where they are, by the
  // weighting below (odd n: its copy).
  Lanes<R>* Y = g.b.data();
  const Lanes<R>* in = Y;
  if (at.groups != nullptr) {
    in = group_of(at, r0, M);
  } else {
    const R* in_rows[L];
    for (int i = 0; i < L; ++i)
      in_rows[i] = reinterpret_cast<const R*>(at.X + (r0 + std::min<int64_t>(i, nr - 1)) * M);
    load_lanes<R>(in_rows, Y, M);
  }
  R* out_rows[L];
  for (int i = 0; i < L; ++i) out_rows[i] = x + (r0 + std::min<int64_t>(i, nr - 1)) * n;
  if (n % 2 != 0) {  // odd n: x = Re of the complex inverse FFT of Z[m] = w_m X[m], m < M
    Lanes<R>* z = g.a.data();
    for (int64_t m = 0; m < n; ++m) {
      if (m >= M) {
        z[m].re = z[m].im = Vec<R>{};
      } else if (m == 0) {
        z[m] = {in[0].re * w_edge, Vec<R>{}};
      } else {
        z[m] = {in[m].re * w_int, in[m].im * w_int};
      }
    }
    store_real_lanes<R>(complex_fft<R, true>(plan, z, g.b.data(), /*real_row=*/true), n, out_rows, nr);
    return;
  }
  // Even n: Y[m] (m <= h): w_edge Re X at the edges (m = 0 and the Nyquist mode m = h), w_int / 2 X
  // inside (the Hermitian sum doubles it), zero from M on; weighted as they are read below (a
  // separate weighting pass over Y cost a load and a store per mode).
  const R w_half = w_int * R(0.5);
  auto weighted = [&](int64_t m) -> Lanes<R> {
    if (m >= M) return {Vec<R>{}, Vec<R>{}};
    if (m == 0 || m == h) return {in[m].re * w_edge, Vec<R>{}};
    return {in[m].re * w_half, in[m].im * w_half};
  };
  // E = Y[m] + conj(Y[h - m]), O = (Y[m] - conj(Y[h - m])) e^{+2 pi i m/n}, Z = E + i O.
  Lanes<R>* z = g.a.data();
  for (int64_t m = 0; m < h; ++m) {
    const Lanes<R> ym = weighted(m), yc = weighted(h - m);
    const R wr = plan.rec_re[static_cast<size_t>(m)], wi = -plan.rec_im[static_cast<size_t>(m)];
    const Vec<R> er = ym.re + yc.re, ei = ym.im - yc.im;
    const Vec<R> dr = ym.re - yc.re, di = ym.im + yc.im;
    const Vec<R> or_ = dr * wr - di * wi, oi = dr * wi + di * wr;
    z[m].re = er - oi;
    z[m].im = ei + or_;
  }
  store_lanes<R>(complex_fft<R, true>(plan, z, g.b.data()), h, out_rows, nr);
}

}  // namespace

bool lane_fft_supports(int64_t n) {
  if (n < 2) return false;
  bool ok = false;
  factor_radices(n % 2 == 0 ? n / 2 : n, &ok);
  return ok;
}

template <typename R>
struct LaneRowFft<R>::Buffers : GroupBuffers<R> {
  using GroupBuffers<R>::GroupBuffers;
};

template <typename R>
LaneRowFft<R>::LaneRowFft(int64_t n) : plan_(cached_plan<R>(n)), buffers_(std::make_unique<Buffers>(plan_->h)) {}
template <typename R>
LaneRowFft<R>::~LaneRowFft() = default;
template <typename R>
LaneRowFft<R>::LaneRowFft(LaneRowFft&&) noexcept = default;

template <typename R>
void LaneRowFft<R>::forward(const R* x, std::complex<R>* X, int64_t rows, int64_t M, double w_edge, double w_int) {
  for (int64_t r0 = 0; r0 < rows; r0 += kLanes<R>)
    rfft_group<R>(*plan_, x, {X, nullptr}, r0, std::min<int64_t>(kLanes<R>, rows - r0), M, static_cast<R>(w_edge),
                  static_cast<R>(w_int), *buffers_);
}

template <typename R>
void LaneRowFft<R>::inverse(const std::complex<R>* X, R* x, int64_t rows, int64_t M, double w_edge, double w_int) {
  for (int64_t r0 = 0; r0 < rows; r0 += kLanes<R>)
    irfft_group<R>(*plan_, {const_cast<std::complex<R>*>(X), nullptr}, x, r0, std::min<int64_t>(kLanes<R>, rows - r0),
                   M, static_cast<R>(w_edge), static_cast<R>(w_int), *buffers_);
}

// Grouped spectra start on a group, 64-byte aligned (group_of reads them as lane vectors).
template <typename R>
void check_grouped(const R* groups, int64_t r0) {
  GS_CHECK(r0 % kLanes<R> == 0 && reinterpret_cast<uintptr_t>(groups) % 64 == 0,
           "lane FFT: internal error: grouped rows from {} at {} (expected a multiple of {}, 64-byte aligned)", r0,
           static_cast<const void*>(groups), kLanes<R>);
}

template <typename R>
void LaneRowFft<R>::forward_groups(const R* x, R* groups, int64_t r0, int64_t r1, int64_t M, double w_edge,
                                   double w_int) {
  check_grouped<R>(groups, r0);
  for (int64_t g0 = r0; g0 < r1; g0 += kLanes<R>)
    rfft_group<R>(*plan_, x, {nullptr, groups}, g0, std::min<int64_t>(kLanes<R>, r1 - g0), M, static_cast<R>(w_edge),
                  static_cast<R>(w_int), *buffers_);
}

template <typename R>
void LaneRowFft<R>::inverse_groups(const R* groups, R* x, int64_t r0, int64_t r1, int64_t M, double w_edge,
                                   double w_int) {
  check_grouped<R>(groups, r0);
  for (int64_t g0 = r0; g0 < r1; g0 += kLanes<R>)
    irfft_group<R>(*plan_, {nullptr, const_cast<R*>(groups)}, x, g0, std::min<int64_t>(kLanes<R>, r1 - g0), M,
                   static_cast<R>(w_edge), static_cast<R>(w_int), *buffers_);
}

template class LaneRowFft<float>;
template class LaneRowFft<double>;

}  // namespace gs::sphere::detail
