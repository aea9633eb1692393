// On-the-fly Legendre contractions (recurrence.h). Per order m, the northern rows the
// order needs are cut into blocks of kRows latitudes; for each block the recurrence
//   Pbar_l^m = a_lm x Pbar_{l-1}^m - b_lm Pbar_{l-2}^m
// marches l = m .. lmax-1 with the kRows values in registers, and every value serves a northern row
// and its mirror through Pbar_l^m(-x) = (-1)^{l+m} Pbar_l^m(x): the analysis contracts it with the
// even part E = X[j] + X[j'] (l - m even) or the odd part O = X[j] - X[j'] (l - m odd), the
// synthesis accumulates the even and odd sums S_e, S_o and writes S_e +- S_o. The synthesis marches
// each block through all degrees; the analysis marches a few degrees at a time across all blocks
// (analysis_degrees) so that its sums over rows stay in registers. The seeds Pbar_m^m and
// the coefficients are those of ops/sphere/legendre.cpp (same formulas, same scaled diagonal), so
// the two paths agree to rounding; the kernels march a rescaled form with two operations per step
// (RecurrencePlan::alpha).
//
// Negligible rows. Pbar_l^m ~ sin^m(theta) near the poles: for each order, northern rows whose values
// are all below the table's negligible level (table.h) are skipped, a large saving at high
// m. The remaining rows may still start below the f64 range when lmax is large (the seed underflows
// while a higher degree is of order one): those (order, row) pairs march in scaled arithmetic
// at plan time until the value is back in range, and the kernel resumes them from there, one row at
// a time (none occur up to lmax ~ 1000).
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
// The blocks are sized for 512-bit vectors; GCC's tuning for AVX-512 CPUs defaults to 256.
#pragma GCC target("prefer-vector-width=512")
#endif
#include "ops/sphere/legendre/recurrence.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/error.h"
#include "ops/sphere/vec512.h"

namespace gs::sphere {
namespace {

// Latitudes per recurrence block: four AVX-512 (eight AVX2) registers of f64. (The analysis with 16
// or 64 rows and as many accumulators was no faster.)
constexpr int kRows = 32;
constexpr int kLanes = 8;  // doubles per analysis accumulator (Lanes): the block's rows mod 8
// Below this many multiply-adds a contraction stays on the calling thread.
constexpr int64_t kSerialWork = 1 << 18;

// ---- kernels ----

// One block of kRows northern rows (x, seed; padded rows have both 0), FB fields: the even and odd
// sums S_e[f][re/im][row] = sum_{l-m even} Pbar_l^m c[l][f], S_o likewise. c holds (lmax - m) rows of
// `stride` reals, field f at 2f.
template <int FB>
void synth_block(const double* alpha, int64_t m, int64_t lmax, const double* x, const double* seed, const double* c,
                 int64_t stride, double (&se_out)[FB][2][kRows], double (&so_out)[FB][2][kRows]) {
  // Local sums (copied out at the end) so that the compiler keeps them in registers: through the
  // reference parameters it would have to assume they alias the coefficients.
  double se[FB][2][kRows], so[FB][2][kRows];
  double p0[kRows], p1[kRows];  // the two latest degrees; each step overwrites the older
  for (int r = 0; r < kRows; ++r) p0[r] = 0, p1[r] = seed[r];
  for (int f = 0; f < FB; ++f)
    for (int i = 0; i < 2; ++i)
#pragma omp simd
      for (int r = 0; r < kRows; ++r) se[f][i][r] = p1[r] * c[2 * f + i], so[f][i][r] = 0;
  int64_t l = m + 1;
  const double* cl = c + stride;
  // Two degrees per pass so that the parity (and the accumulator) is fixed.
  for (; l + 1 < lmax; l += 2, alpha += 2, cl += 2 * stride) {
    const double a0 = alpha[0], a1 = alpha[1];
#pragma omp simd
    for (int r = 0; r < kRows; ++r) p0[r] = a0 * x[r] * p1[r] - p0[r];  // degree l (odd)
    for (int f = 0; f < FB; ++f)
      for (int i = 0; i < 2; ++i) {
        const double v = cl[2 * f + i];
#pragma omp simd
        for (int r = 0; r < kRows; ++r) so[f][i][r] += p0[r] * v;
      }
#pragma omp simd
    for (int r = 0; r < kRows; ++r) p1[r] = a1 * x[r] * p0[r] - p1[r];  // degree l + 1 (even)
    for (int f = 0; f < FB; ++f)
      for (int i = 0; i < 2; ++i) {
        const double v = cl[stride + 2 * f + i];
#pragma omp simd
        for (int r = 0; r < kRows; ++r) se[f][i][r] += p1[r] * v;
      }
  }
  if (l < lmax) {
    const double a0 = alpha[0];
#pragma omp simd
    for (int r = 0; r < kRows; ++r) p0[r] = a0 * x[r] * p1[r] - p0[r];
    for (int f = 0; f < FB; ++f)
      for (int i = 0; i < 2; ++i) {
        const double v = cl[2 * f + i];
#pragma omp simd
        for (int r = 0; r < kRows; ++r) so[f][i][r] += p0[r] * v;
      }
  }
  std::copy(&se[0][0][0], &se[0][0][0] + FB * 2 * kRows, &se_out[0][0][0]);
  std::copy(&so[0][0][0], &so[0][0][0] + FB * 2 * kRows, &so_out[0][0][0]);
}

// One vector of kLanes doubles (vec512.h: plain arithmetic, lowered to whatever vector width the
// target has; no intrinsics). The analysis kernel uses it instead of arrays of
// doubles because GCC kept those accumulators on the stack, with a load and a store per use.
using Lanes = simd::Vec<double>;
static_assert(simd::kLanes<double> == kLanes);
inline Lanes load_lanes(const double* p) {
  Lanes v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store_lanes(double* p, const Lanes& v) { __builtin_memcpy(p, &v, sizeof v); }
// The sum of the lanes of a in the tree's order (((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)) for 8
// lanes): every sum of lane_sums has this association whichever path computes it, so results do not
// depend on how many fields share a tile (and so on the batch).
inline double pairwise_sum(const Lanes& a) {
  double t[kLanes];
  for (int k = 0; k < kLanes; ++k) t[k] = a[k];
  for (int w = 1; w < kLanes; w *= 2)
    for (int k = 0; k + w < kLanes; k += 2 * w) t[k] += t[k + w];
  return t[0];
}

// s[k] = the sum of the lanes of a[k]. Eight vectors at a time by a transposing tree: 14 shuffles
// and 7 additions give eight sums, where reducing each vector alone takes 6 operations (these
// reductions were a tenth of the analysis at 10 blocks a chunk, more with fewer).
template <int N>
inline void lane_sums(const Lanes (&a)[N], double (&s)[N]) {
  int n = 0;
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
  if constexpr (kLanes == 8) {
#pragma GCC unroll 8
    for (; n + 8 <= N; n += 8) {
      Lanes t[4], u[2];
      for (int k = 0; k < 4; ++k)  // t[k] holds pair sums of a[2k] (even lanes) and a[2k+1] (odd)
        t[k] = __builtin_shufflevector(a[n + 2 * k], a[n + 2 * k + 1], 0, 8, 2, 10, 4, 12, 6, 14) +
               __builtin_shufflevector(a[n + 2 * k], a[n + 2 * k + 1], 1, 9, 3, 11, 5, 13, 7, 15);
      for (int k = 0; k < 2; ++k)  // u[k]: the sums over lanes 0-3 of a[4k .. 4k+3], then over 4-7
        u[k] = __builtin_shufflevector(t[2 * k], t[2 * k + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
               __builtin_shufflevector(t[2 * k], t[2 * k + 1], 2, 3, 10, 11, 6, 7, 14, 15);
      const Lanes r = __builtin_shufflevector(u[0], u[1], 0, 1, 2, 3, 8, 9, 10, 11) +
                      __builtin_shufflevector(u[0], u[1], 4, 5, 6, 7, 12, 13, 14, 15);
      store_lanes(s + n, r);
    }
  }
#endif
#pragma GCC unroll 8
  for (; n < N; ++n) s[n] = pairwise_sum(a[n]);
}

// The analysis marches D degrees at a time across all of an order's row blocks (the outer loop is
// over degree chunks, the block loop inside): the D x FB x 2 accumulators then stay in registers for
// the whole column of rows and are reduced once per chunk. (Marching each block through all degrees,
// as the synthesis does, needs a sum per degree, field and lane in memory, a (lmax - m) x B x 2 x 8
// array loaded and stored at every block and degree, which falls out of L1 at large lmax or B:
// 1.5-2.4x the synthesis time.) Each block's two latest degrees wait in `state` between chunks
// (512 bytes a block). kAnalysisAcc bounds the accumulators so that they, the state and x fit the
// 32 vector registers; the E and O values are read from L1 as operands of the multiply-adds.
constexpr int kAnalysisAcc = 16;
template <int FB>
constexpr int analysis_degrees() { return std::max(2, (kAnalysisAcc / (2 * FB)) & ~1); }

constexpr int kVecs = kRows / kLanes;  // vectors per row block

// D degrees l .. l+D-1 of FB fields over nblk row blocks: out[d][2f + re/im] = sum over rows of
// Q_{l+d} times E (d even) or O (d odd); l - m must be even. alpha[d] advances to degree l + d.
// state holds per block (Q_{l-2}, Q_{l-1}) and is advanced by D degrees (when D is odd, the final
// chunk, it is left inconsistent). x: nblk x kRows values; rows of field f, quantity
// q = 2 parity + re/im at eo + f fs + q qs, kRows per block.
template <int FB, int D>
void analysis_degrees(const double* alpha, int64_t nblk, const double* x, double* state, const double* eo,
                      int64_t qs, int64_t fs, double* out, int64_t out_stride) {
  constexpr int kAcc = D * FB * 2;
  Lanes acc[kAcc];  // [d][f][re/im]
#pragma GCC unroll 32
  for (int k = 0; k < kAcc; ++k) acc[k] = Lanes{};  // unrolled: GCC makes a loop a memset on the stack
  for (int64_t blk = 0; blk < nblk; ++blk) {
    double* st = state + blk * 2 * kRows;
    const double* w = eo + blk * kRows;
    Lanes p0[kVecs], p1[kVecs], xb[kVecs];  // the two latest degrees; each step overwrites the older
    for (int v = 0; v < kVecs; ++v) {
      p0[v] = load_lanes(st + v * kLanes);
      p1[v] = load_lanes(st + kRows + v * kLanes);
      xb[v] = load_lanes(x + blk * kRows + v * kLanes);
    }
#pragma GCC unroll 16
    for (int d = 0; d < D; ++d) {
      Lanes* pn = d % 2 == 0 ? p0 : p1;
      const Lanes* pl = d % 2 == 0 ? p1 : p0;
      const double a = alpha[d];
      for (int v = 0; v < kVecs; ++v) pn[v] = a * xb[v] * pl[v] - pn[v];
      for (int f = 0; f < FB; ++f)
        for (int i = 0; i < 2; ++i) {
          const double* wq = w + f * fs + (2 * (d % 2) + i) * qs;
          // A chain of multiply-adds into one accumulator, not products then sums.
          for (int v = 0; v < kVecs; ++v) acc[(d * FB + f) * 2 + i] += pn[v] * load_lanes(wq + v * kLanes);
        }
    }
    for (int v = 0; v < kVecs; ++v) {
      store_lanes(st + v * kLanes, p0[v]);
      store_lanes(st + kRows + v * kLanes, p1[v]);
    }
  }
  double sums[kAcc];
  lane_sums(acc, sums);
  for (int d = 0; d < D; ++d)
    for (int k = 0; k < 2 * FB; ++k) out[d * out_stride + k] = sums[d * 2 * FB + k];
}

// Degrees l .. lmax-1 (l - m even) in chunks of D, the rest in smaller even chunks and a last
// single degree: every chunk but the last must have an even size so that the parity of d and the
// roles of p0 and p1 in analysis_degrees stay those of the degree.
template <int FB, int D>
void analysis_march(const double* alpha, int64_t l, int64_t lmax, int64_t m, int64_t nblk, const double* x,
                    double* state, const double* eo, int64_t qs, int64_t fs, double* out, int64_t out_stride) {
  static_assert(D == 1 || D % 2 == 0);
  for (; l + D <= lmax; l += D)
    analysis_degrees<FB, D>(alpha + (l - m), nblk, x, state, eo, qs, fs, out + (l - m) * out_stride, out_stride);
  constexpr int kNext = D > 2 ? std::max(2, (D / 2) & ~1) : 1;
  if constexpr (D > 1) analysis_march<FB, kNext>(alpha, l, lmax, m, nblk, x, state, eo, qs, fs, out, out_stride);
}


// The analysis without AVX-512 (analyse_order): one block marches all degrees and adds into
// acc[(l - m)][f][re/im][lane] the sum over the block's rows of
// Pbar_l^m times E (l - m even) or O (odd). The block's rows of field f lie at eo + (4f + q) qs for
// q = E re, E im, O re, O im (kRows contiguous values each). acc rows hold `stride` reals.
template <int FB>
void analysis_block(const double* alpha, int64_t m, int64_t lmax, const double* x, const double* seed,
                    const double* eo, int64_t qs, double* acc, int64_t stride) {
  static_assert(kRows == 4 * kLanes);
  auto add = [&](const double* p, int odd, double* a) {
    for (int f = 0; f < FB; ++f)
      for (int i = 0; i < 2; ++i) {
        double* t = a + (2 * f + i) * kLanes;
        const double* w = eo + (4 * f + 2 * odd + i) * qs;
        // A chain of four multiply-adds per lane (one vector op each), not products then sums.
#pragma omp simd
        for (int k = 0; k < kLanes; ++k)
          t[k] = t[k] + p[k] * w[k] + p[k + kLanes] * w[k + kLanes] + p[k + 2 * kLanes] * w[k + 2 * kLanes] +
                 p[k + 3 * kLanes] * w[k + 3 * kLanes];
      }
  };
  double p0[kRows], p1[kRows];
  for (int r = 0; r < kRows; ++r) p0[r] = 0, p1[r] = seed[r];
  add(p1, 0, acc);
  int64_t l = m + 1;
  double* al = acc + stride;
  for (; l + 1 < lmax; l += 2, alpha += 2, al += 2 * stride) {
    const double a0 = alpha[0], a1 = alpha[1];
#pragma omp simd
    for (int r = 0; r < kRows; ++r) p0[r] = a0 * x[r] * p1[r] - p0[r];
    add(p0, 1, al);
#pragma omp simd
    for (int r = 0; r < kRows; ++r) p1[r] = a1 * x[r] * p0[r] - p1[r];
    add(p1, 0, al + stride);
  }
  if (l < lmax) {
#pragma omp simd
    for (int r = 0; r < kRows; ++r) p0[r] = alpha[0] * x[r] * p1[r] - p0[r];
    add(p0, 1, al);
  }
}

// Field tiles: 2 fields (or the last 1) share one march of the recurrence. Wider tiles spill the
// synthesis sums out of registers and were no faster (measured at 360 degrees, 4 and 8 fields).
template <typename Fn>
void for_field_tiles(int64_t batch, Fn&& fn) {
  int64_t b = 0;
  for (; b + 2 <= batch; b += 2) fn.template operator()<2>(b);
  for (; b < batch; ++b) fn.template operator()<1>(b);
}

// The block's x and seeds, zero-padded past the last row.
void load_block(const RecurrencePlan& p, int64_t m, int64_t r0, int64_t nr, double (&x)[kRows], double (&seed)[kRows]) {
  const double* s = p.seed.data() + static_cast<size_t>(m * p.n_even);
  for (int r = 0; r < kRows; ++r) {
    x[r] = r < nr ? p.x[static_cast<size_t>(r0 + r)] : 0.0;
    seed[r] = r < nr ? s[r0 + r] : 0.0;
  }
}

// Prefetches the chunk's orders [c0, c1) of a row of a (.., mmax) array (a cache line or two), issued
// kAhead rows before the row is read or written: rows are mmax values apart, a stride the hardware
// prefetchers do not follow, so without a hint each row waits for memory (measured at 720 degrees,
// batch 1: the analysis's gather and scatter were a third of its time; 1.2x faster with the hint).
constexpr int64_t kAhead = 8;
template <typename T>
inline void prefetch_orders(const std::complex<T>* row_a, const std::complex<T>* row_b, int64_t c0, int64_t c1, int write) {
  for (int64_t m = c0; m < c1; m += 64 / static_cast<int64_t>(sizeof(std::complex<T>))) {
    if (write) {
      __builtin_prefetch(row_a + m, 1);
    } else {
      __builtin_prefetch(row_a + m, 0);
      __builtin_prefetch(row_b + m, 0);
    }
  }
}

// A 64-byte aligned run of n doubles inside v.
double* aligned_doubles(std::vector<double>& v, size_t n) {
  constexpr size_t kAlign = 64 / sizeof(double);
  v.resize(n + kAlign);
  const auto misalign = reinterpret_cast<uintptr_t>(v.data()) % 64 / sizeof(double);
  return v.data() + (kAlign - misalign) % kAlign;
}

// Orders are processed in chunks of kChunk consecutive m: the grid and spectral arrays hold m
// fastest, so a chunk reads or writes kChunk adjacent values of each row (a cache line or two)
// instead of one value per row and order, which with several fields cost more than the kernels
// (measured at 360 degrees, 4 fields: 30% of the time in the strided gathers).
constexpr int64_t kChunk = 8;

// Per-thread scratch of a chunk.
struct ChunkScratch {
  // [k][b][q][j], j < n_even + kRows (zero-padded for the last block): q = E re, E im, O re, O im
  // (analysis: from the order's first kept row on, see analysis_rows) or S_e, S_o (synthesis), so
  // that blocks load and store whole vectors.
  std::vector<double> rows;
  std::vector<double> coef;    // synthesis: per order, (lmax - m) x B x 2 from offset coef_at[k]
  std::vector<double> out;     // analysis: [k][l - m][b][2] results before the scatter
  std::vector<double> x, alpha, state;  // analysis: one order's x by block, alpha, march state
  std::vector<double> acc;  // analysis without AVX-512: one order's lane sums
};

template <typename T>
void to_latitude_chunk(const RecurrencePlan& p, const std::complex<T>* A, std::complex<T>* X, int64_t B, int64_t c0,
                       int64_t c1, ChunkScratch& ws) {
  const int64_t lmax = p.key.lmax, mmax = p.key.mmax, nlat = p.key.nlat, n_even = p.n_even;
  const int64_t K = c1 - c0, stride = 2 * B, n_pad = n_even + kRows, row_block = B * 4 * n_pad;
  // Coefficients with the row factors and s_l applied: order m's (l - m)-th row of B complex values.
  std::vector<int64_t> coef_at(static_cast<size_t>(K) + 1, 0);
  for (int64_t k = 0; k < K; ++k)
    coef_at[static_cast<size_t>(k) + 1] = coef_at[static_cast<size_t>(k)] + (lmax - c0 - k) * stride;
  ws.coef.resize(static_cast<size_t>(coef_at.back()));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = c0; l < lmax; ++l) {
      const std::complex<T>* a = A + (b * lmax + l) * mmax;
      for (int64_t m = c0; m < std::min(c1, l + 1); ++m) {
        const double f = p.out_factor_of(m)[l - m];
        double* c = ws.coef.data() + coef_at[static_cast<size_t>(m - c0)] + (l - m) * stride + 2 * b;
        c[0] = f * static_cast<double>(a[m].real());
        c[1] = f * static_cast<double>(a[m].imag());
      }
    }
  ws.rows.resize(static_cast<size_t>(K * row_block));  // rows j < first_row[m] are never read
  for (int64_t m = c0; m < c1; ++m) {
    const int64_t js = p.first_row[static_cast<size_t>(m)];
    const double* coef = ws.coef.data() + coef_at[static_cast<size_t>(m - c0)];
    double* rows = ws.rows.data() + (m - c0) * row_block;
    for_field_tiles(B, [&]<int FB>(int64_t b0) {
      for (int64_t r0 = js; r0 < n_even; r0 += kRows) {
        const int64_t nr = std::min<int64_t>(kRows, n_even - r0);
        double x[kRows], seed[kRows];
        load_block(p, m, r0, nr, x, seed);
        double se[FB][2][kRows], so[FB][2][kRows];
        synth_block<FB>(p.alpha_of(m), m, lmax, x, seed, coef + 2 * b0, stride, se, so);
        for (int f = 0; f < FB; ++f) {
          double* o = rows + (b0 + f) * 4 * n_pad + r0;
          std::copy_n(se[f][0], nr, o);
          std::copy_n(se[f][1], nr, o + n_pad);
          std::copy_n(so[f][0], nr, o + 2 * n_pad);
          std::copy_n(so[f][1], nr, o + 3 * n_pad);
        }
      }
    });
    // Rows that start scaled: their block lanes held 0; one row at a time from where they resume.
    const double* alpha = p.alpha_of(m);
    for (const RecurrencePlan::ScaledStart& st : p.scaled[static_cast<size_t>(m)]) {
      const double x = p.x[static_cast<size_t>(st.j)];
      for (int64_t b = 0; b < B; ++b) {
        double* o = rows + b * 4 * n_pad + st.j;  // q = 2 parity + re/im, n_pad apart
        double pp = st.p_prev, pc = st.p_cur;
        for (int64_t l = st.l;; ++l) {
          const int64_t par = (l - m) % 2;
          o[2 * par * n_pad] += pc * coef[(l - m) * stride + 2 * b];
          o[(2 * par + 1) * n_pad] += pc * coef[(l - m) * stride + 2 * b + 1];
          if (l + 1 >= lmax) break;
          const double next = alpha[l - m] * x * pc - pp;  // degree l + 1
          pp = pc;
          pc = next;
        }
      }
    }
  }
  // Row j gets w_j (S_e + S_o), its mirror w_j (S_e - S_o), the equator (odd nlat) w_j S_e.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < n_even; ++j) {
      const double w = p.weight[static_cast<size_t>(j)];
      std::complex<T>* xn = X + (b * nlat + j) * mmax;
      std::complex<T>* xs = X + (b * nlat + nlat - 1 - j) * mmax;
      const bool equator = j == p.n_odd;
      for (int64_t m = c0; m < c1; ++m) {
        if (j < p.first_row[static_cast<size_t>(m)]) {
          xn[m] = xs[m] = std::complex<T>(0, 0);
          continue;
        }
        const double* o = ws.rows.data() + (m - c0) * row_block + b * 4 * n_pad + j;
        const double e_re = o[0], e_im = o[n_pad];
        const double o_re = equator ? 0.0 : o[2 * n_pad], o_im = equator ? 0.0 : o[3 * n_pad];
        xn[m] = std::complex<T>(static_cast<T>(w * (e_re + o_re)), static_cast<T>(w * (e_im + o_im)));
        if (!equator) xs[m] = std::complex<T>(static_cast<T>(w * (e_re - o_re)), static_cast<T>(w * (e_im - o_im)));
      }
    }
}

// The analysis's row values of a chunk of orders, [k][b][q][j - js] with q = E re, E im, O re, O im:
// E = w_j (X[j] + X[j']), O = w_j (X[j] - X[j']), the equator (odd nlat) E = w_j X[j], O = 0.
// Order m's rows start at its first kept row js and are zero-padded to whole blocks; n_pad and the
// buffer are multiples of 64 bytes, so that every block loads whole cache lines (a vector load
// across two lines costs about twice as much: this alignment made the analysis ~1.5x faster).
template <typename T>
double* analysis_rows(const RecurrencePlan& p, const std::complex<T>* X, int64_t B, int64_t c0, int64_t c1,
                      int64_t n_pad, ChunkScratch& ws) {
  const int64_t mmax = p.key.mmax, nlat = p.key.nlat, n_even = p.n_even, row_block = B * 4 * n_pad;
  double* const rows = aligned_doubles(ws.rows, static_cast<size_t>((c1 - c0) * row_block));
  int64_t j0 = n_even;
  for (int64_t m = c0; m < c1; ++m) {
    const int64_t js = p.first_row[static_cast<size_t>(m)];
    j0 = std::min(j0, js);
    for (int64_t k = 0; k < B * 4; ++k)  // the padding the last block reads
      std::fill_n(rows + (m - c0) * row_block + k * n_pad + n_even - js, kRows, 0.0);
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = j0; j < n_even; ++j) {
      const double w = p.weight[static_cast<size_t>(j)];
      const bool equator = j == p.n_odd;
      const std::complex<T>* xn = X + (b * nlat + j) * mmax;
      const std::complex<T>* xs = X + (b * nlat + nlat - 1 - j) * mmax;
      if (j + kAhead < n_even) prefetch_orders(xn + kAhead * mmax, xs - kAhead * mmax, c0, c1, 0);
      for (int64_t m = c0; m < c1; ++m) {
        const int64_t js = p.first_row[static_cast<size_t>(m)];
        if (j < js) continue;
        double* o = rows + (m - c0) * row_block + b * 4 * n_pad + (j - js);
        const double nr = xn[m].real(), ni = xn[m].imag();
        const double sr = equator ? 0.0 : xs[m].real(), si = equator ? 0.0 : xs[m].imag();
        o[0] = w * (nr + sr), o[n_pad] = w * (ni + si);
        o[2 * n_pad] = equator ? 0.0 : w * (nr - sr), o[3 * n_pad] = equator ? 0.0 : w * (ni - si);
      }
    }
  return rows;
}

// The analysis kernel needs 32 vector registers: compiled for AVX2 its accumulators spill (measured
// 3x slower than the per-block kernel there). Without AVX-512 each block marches all degrees
// instead and adds into per-degree lane sums in memory (analysis_block, the previous kernel).
#ifdef __AVX512F__
constexpr bool kRegisterAnalysis = true;
#else
constexpr bool kRegisterAnalysis = false;
#endif

// analyse_order without AVX-512; x: the order's x by block (zero-padded).
void analyse_order_by_block(const RecurrencePlan& p, int64_t m, const double* rows, int64_t B, int64_t n_pad,
                            const double* x, double* out, ChunkScratch& ws) {
  const int64_t lmax = p.key.lmax, n_even = p.n_even, js = p.first_row[static_cast<size_t>(m)];
  const int64_t stride = 2 * B * kLanes;
  const double* seed = p.seed.data() + m * n_even;
  ws.acc.assign(static_cast<size_t>((lmax - m) * stride), 0.0);
  for_field_tiles(B, [&]<int FB>(int64_t b0) {
    for (int64_t r0 = 0; r0 < n_even - js; r0 += kRows) {
      double seed_block[kRows];
      for (int r = 0; r < kRows; ++r) seed_block[r] = js + r0 + r < n_even ? seed[js + r0 + r] : 0.0;
      analysis_block<FB>(p.alpha_of(m), m, lmax, x + r0, seed_block, rows + b0 * 4 * n_pad + r0, n_pad,
                         ws.acc.data() + 2 * b0 * kLanes, stride);
    }
  });
  for (int64_t l = m; l < lmax; ++l)
    for (int64_t k = 0; k < 2 * B; ++k) {
      const double* a = ws.acc.data() + (l - m) * stride + k * kLanes;
      double sum = 0;
      for (int i = 0; i < kLanes; ++i) sum += a[i];
      out[(l - m) * 2 * B + k] = sum;
    }
}

// analyse_order with AVX-512: analysis_march over all blocks, per field tile.
void analyse_order_in_registers(const RecurrencePlan& p, int64_t m, const double* rows, int64_t B, int64_t n_pad,
                                const double* x, double* out, ChunkScratch& ws) {
  const int64_t lmax = p.key.lmax, n_even = p.n_even, js = p.first_row[static_cast<size_t>(m)];
  const int64_t nblk = (n_even - js + kRows - 1) / kRows;
  // alpha with a leading 0 so that the march starts one degree early from
  // (Q_{m-2}, Q_{m-1}) = (-seed, 0): its first step yields Q_m = seed.
  ws.alpha.resize(static_cast<size_t>(lmax - m));
  ws.alpha[0] = 0.0;
  std::copy_n(p.alpha_of(m), lmax - m - 1, ws.alpha.begin() + 1);
  const double* seed = p.seed.data() + m * n_even;
  double* const state = aligned_doubles(ws.state, static_cast<size_t>(nblk * 2 * kRows));
  for_field_tiles(B, [&]<int FB>(int64_t b0) {
    for (int64_t blk = 0; blk < nblk; ++blk)
      for (int r = 0; r < kRows; ++r) {
        const int64_t j = js + blk * kRows + r;
        state[blk * 2 * kRows + r] = j < n_even ? -seed[j] : 0.0;
        state[blk * 2 * kRows + kRows + r] = 0.0;
      }
    analysis_march<FB, analysis_degrees<FB>()>(ws.alpha.data(), m, lmax, m, nblk, x, state, rows + b0 * 4 * n_pad,
                                             n_pad, 4 * n_pad, out + 2 * b0, 2 * B);
  });
}

// Order m of the analysis: out[l - m][b][re/im] = sum_j Q_l(x_j) (E or O of field b at row j), Q_l the
// kernels' rescaled Pbar (out_factor not applied). rows: the order's row values (analysis_rows).
void analyse_order(const RecurrencePlan& p, int64_t m, const double* rows, int64_t B, int64_t n_pad, double* out,
                   ChunkScratch& ws) {
  const int64_t lmax = p.key.lmax, n_even = p.n_even, js = p.first_row[static_cast<size_t>(m)];
  const int64_t nblk = (n_even - js + kRows - 1) / kRows;
  double* const x = aligned_doubles(ws.x, static_cast<size_t>(nblk * kRows));  // by block, zero-padded
  std::fill_n(std::copy(p.x.begin() + js, p.x.begin() + n_even, x), nblk * kRows - (n_even - js), 0.0);
  if constexpr (kRegisterAnalysis) analyse_order_in_registers(p, m, rows, B, n_pad, x, out, ws);
  else analyse_order_by_block(p, m, rows, B, n_pad, x, out, ws);
  // Rows that start scaled: their block lanes held 0; one row at a time from where they resume.
  const double* alpha = p.alpha_of(m);
  for (const RecurrencePlan::ScaledStart& st : p.scaled[static_cast<size_t>(m)]) {
    const double xj = p.x[static_cast<size_t>(st.j)];
    for (int64_t b = 0; b < B; ++b) {
      const double* v = rows + b * 4 * n_pad + (st.j - js);
      double pp = st.p_prev, pc = st.p_cur;
      for (int64_t l = st.l;; ++l) {
        const int64_t par = (l - m) % 2;
        double* a = out + (l - m) * 2 * B + 2 * b;
        a[0] += pc * v[2 * par * n_pad];
        a[1] += pc * v[(2 * par + 1) * n_pad];
        if (l + 1 >= lmax) break;
        const double next = alpha[l - m] * xj * pc - pp;
        pp = pc;
        pc = next;
      }
    }
  }
}

template <typename T>
void to_degree_chunk(const RecurrencePlan& p, const std::complex<T>* X, std::complex<T>* A, int64_t B, int64_t c0,
                     int64_t c1, ChunkScratch& ws) {
  const int64_t lmax = p.key.lmax, mmax = p.key.mmax;
  const int64_t n_pad = (p.n_even + kRows + kLanes - 1) / kLanes * kLanes;
  const double* rows = analysis_rows(p, X, B, c0, c1, n_pad, ws);
  ws.out.resize(static_cast<size_t>((c1 - c0) * B * lmax * 2));  // [k][l - m][b][re/im]
  for (int64_t m = c0; m < c1; ++m)
    analyse_order(p, m, rows + (m - c0) * B * 4 * n_pad, B, n_pad, ws.out.data() + (m - c0) * B * lmax * 2, ws);
  // Scatter into A[b, l, c0 .. c1) with the row factors, zero where l < m.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < lmax; ++l) {
      std::complex<T>* a = A + (b * lmax + l) * mmax;
      if (l + kAhead < lmax) prefetch_orders(a + kAhead * mmax, a + kAhead * mmax, c0, c1, 1);
      for (int64_t m = c0; m < c1; ++m) {
        if (l < m) {
          a[m] = std::complex<T>(0, 0);
          continue;
        }
        const double* o = ws.out.data() + (m - c0) * B * lmax * 2 + (l - m) * 2 * B + 2 * b;
        const double f = p.out_factor_of(m)[l - m];
        a[m] = std::complex<T>(static_cast<T>(f * o[0]), static_cast<T>(f * o[1]));
      }
    }
}

// Runs `chunk(c0, c1, scratch)` over chunks of orders; chunks are independent, so results do not
// depend on the split. Low m cost most (lmax - m degrees, fewest skipped rows) and go first.
template <typename Fn>
void for_chunks(const RecurrencePlan& p, int64_t batch, Fn&& chunk) {
  const LegendreTableKey& k = p.key;
  const bool parallel = !omp_in_parallel() && batch * k.nlat * k.lmax * k.mmax >= kSerialWork;
  const int64_t n_chunks = (k.mmax + kChunk - 1) / kChunk;
#pragma omp parallel if (parallel)
  {
    ChunkScratch ws;
#pragma omp for schedule(dynamic, 1)
    for (int64_t c = 0; c < n_chunks; ++c) chunk(c * kChunk, std::min(k.mmax, (c + 1) * kChunk), ws);
  }
}

template <typename T>
void to_degree_all(const RecurrencePlan& p, const std::complex<T>* X, std::complex<T>* A, int64_t B) {
  for_chunks(p, B, [&](int64_t c0, int64_t c1, ChunkScratch& ws) { to_degree_chunk<T>(p, X, A, B, c0, c1, ws); });
}

template <typename T>
void to_latitude_all(const RecurrencePlan& p, const std::complex<T>* A, std::complex<T>* X, int64_t B) {
  for_chunks(p, B, [&](int64_t c0, int64_t c1, ChunkScratch& ws) { to_latitude_chunk<T>(p, A, X, B, c0, c1, ws); });
}

}  // namespace

void recurrence_to_degree(const RecurrencePlan& p, const std::complex<float>* X, std::complex<float>* A, int64_t B) {
  to_degree_all<float>(p, X, A, B);
}
void recurrence_to_degree(const RecurrencePlan& p, const std::complex<double>* X, std::complex<double>* A, int64_t B) {
  to_degree_all<double>(p, X, A, B);
}
void recurrence_to_latitude(const RecurrencePlan& p, const std::complex<float>* A, std::complex<float>* X, int64_t B) {
  to_latitude_all<float>(p, A, X, B);
}
void recurrence_to_latitude(const RecurrencePlan& p, const std::complex<double>* A, std::complex<double>* X,
                            int64_t B) {
  to_latitude_all<double>(p, A, X, B);
}

}  // namespace gs::sphere
