// On-the-fly Legendre contractions (legendre_recurrence.h). Per order m, the northern rows the
// order needs are cut into blocks of kRows latitudes; for each block the recurrence
//   Pbar_l^m = a_lm x Pbar_{l-1}^m - b_lm Pbar_{l-2}^m
// marches l = m .. lmax-1 with the kRows values in registers, and every value serves a northern row
// and its mirror through Pbar_l^m(-x) = (-1)^{l+m} Pbar_l^m(x): the analysis contracts it with the
// even part E = X[j] + X[j'] (l - m even) or the odd part O = X[j] - X[j'] (l - m odd), the
// synthesis accumulates the even and odd sums S_e, S_o and writes S_e +- S_o. The seeds Pbar_m^m and
// the coefficients are those of ops/sphere/legendre.cpp (same formulas, same scaled diagonal), so
// the two paths agree to rounding; the kernels march a rescaled form with two operations per step
// (RecurrencePlan::alpha).
//
// Negligible rows. Pbar_l^m ~ sin^m(theta) near the poles: for each order, northern rows whose values
// are all below the table's negligible level (legendre_cache.h) are skipped, a large saving at high
// m. The remaining rows may still start below the f64 range when lmax is large (the seed underflows
// while a higher degree is of order one): those (order, row) pairs march in scaled arithmetic
// at plan time until the value is back in range, and the kernel resumes them from there, one row at
// a time (none occur up to lmax ~ 1000).
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
// The blocks are sized for 512-bit vectors; GCC's tuning for AVX-512 CPUs defaults to 256.
#pragma GCC target("prefer-vector-width=512")
#endif
#include "ops/sphere/legendre_recurrence.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <numbers>
#include <vector>

#include "engine/error.h"
#include "ops/sphere/grids.h"

namespace gs::sphere {

struct RecurrencePlan {
  // An (order, row) pair whose seed is below the f64 range: the recurrence resumes at degree l with
  // Q_{l-1} = p_prev, Q_l = p_cur (RecurrencePlan::alpha; all lower degrees are below 2^-600 and
  // taken as 0).
  struct ScaledStart {
    int64_t j, l;
    double p_prev, p_cur;
  };

  LegendreTableKey key;
  int64_t n_even = 0, n_odd = 0;
  std::vector<double> x, weight;                      // n_even northern rows: cos(theta), row factor
  std::vector<int64_t> first_row;                     // mmax: first northern row kept
  std::vector<size_t> ab_offset;                      // mmax: order m's (a_l, b_l), l = m+1 .. lmax-1
  std::vector<double> ab;                             // the pairs (as in legendre.cpp), for the plan's marches
  std::vector<double> factor;                         // mmax * lmax: Condon-Shortley and Schmidt factors
  // The kernels' form of the recurrence, Q_l = alpha_l x Q_{l-1} - Q_{l-2} with Q_l = Pbar_l^m / s_l
  // and s_l = b_l s_{l-2} (s_m = s_{m+1} = 1): two operations per step instead of three. alpha
  // has order m's values for l = m+1 .. lmax-1 at ab_offset[m] / 2; out_factor = factor * s_l for
  // l = m .. lmax-1 at ab_offset[m] / 2 + m (one more entry per order than alpha).
  std::vector<double> alpha, out_factor;
  std::vector<double> seed;  // (mmax, n_even): Pbar_m^m(x_j); 0 before first_row and for scaled starts
  std::vector<std::vector<ScaledStart>> scaled;       // mmax
  int64_t n_scaled = 0;

  double f(int64_t m, int64_t l) const { return factor[static_cast<size_t>(m * key.lmax + l)]; }
  const double* alpha_of(int64_t m) const { return alpha.data() + ab_offset[static_cast<size_t>(m)] / 2; }
  const double* out_factor_of(int64_t m) const {
    return out_factor.data() + ab_offset[static_cast<size_t>(m)] / 2 + static_cast<size_t>(m);
  }
};

namespace {

constexpr double kPi = std::numbers::pi;
// Latitudes per recurrence block: four AVX-512 (eight AVX2) registers of f64. Fewer leave the
// analysis bound by its per-degree accumulator traffic (measured: 16 rows ran ~1.3x slower).
constexpr int kRows = 32;
constexpr int kLanes = 8;  // lane accumulators per (degree, field) in the analysis
// Below this many multiply-adds a contraction stays on the calling thread.
constexpr int64_t kSerialWork = 1 << 18;

std::atomic<LegendrePath> g_path{LegendrePath::automatic};

using Scaled = detail::ScaledValue;
using detail::advance_diagonal;
using detail::kFoldExponent;

double seed_00(const LegendreTableKey& key) {
  return detail::seed_00(key.norm, key.kind == LegendreTableKind::synthesis);
}

double row_factor(const LegendreTableKey& key, int64_t m, int64_t l) {
  return detail::row_factor(key.norm, key.csphase, key.kind == LegendreTableKind::synthesis, m, l);
}

// Scaled march of one (order, row) from its diagonal value. Returns log2 of the largest
// |factor * Pbar_l^m| over l < lmax; with `start`, stops at the first degree where the value is back
// in range and reports it in *start (l = lmax if it never is).
double march(const RecurrencePlan& p, int64_t m, double x, Scaled d, RecurrencePlan::ScaledStart* start) {
  const int64_t lmax = p.key.lmax;
  double pc = d.mant, pp = 0;
  int scale = d.exp;
  double best = -std::numeric_limits<double>::infinity();
  auto note = [&](int64_t l) {
    if (pc != 0) best = std::max(best, std::log2(std::abs(pc * p.f(m, l))) + scale);
  };
  note(m);
  const double* ab = p.ab.data() + p.ab_offset[static_cast<size_t>(m)];
  for (int64_t l = m + 1; l < lmax; ++l, ab += 2) {
    const double next = ab[0] * x * pc - ab[1] * pp;
    pp = pc;
    pc = next;
    int e = 0;
    std::frexp(std::max(std::abs(pc), std::abs(pp)), &e);
    pc = std::ldexp(pc, -e);
    pp = std::ldexp(pp, -e);
    scale += e;
    note(l);
    if (start && scale >= kFoldExponent) {
      *start = {0, l, std::ldexp(pp, scale), std::ldexp(pc, scale)};
      return best;
    }
  }
  if (start) start->l = lmax;
  return best;
}

std::shared_ptr<const RecurrencePlan> build_plan(const LegendreTableKey& key) {
  GS_CHECK(is_floating(key.dtype), "Legendre recurrence: expected dtype f32 or f64, got {}", dtype_name(key.dtype));
  GS_CHECK(key.nlat >= 1 && key.mmax >= 1 && key.mmax <= key.lmax,
           "Legendre recurrence: expected nlat >= 1 and 1 <= mmax <= lmax, got {}", key.str());
  auto p = std::make_shared<RecurrencePlan>();
  p->key = key;
  const int64_t lmax = key.lmax, mmax = key.mmax;
  p->n_even = (key.nlat + 1) / 2;
  p->n_odd = key.nlat / 2;
  const auto ne = static_cast<size_t>(p->n_even);
  const Quadrature q = make_quadrature(key.grid, key.nlat);
  p->x.assign(q.cos_theta.begin(), q.cos_theta.begin() + p->n_even);
  p->weight.assign(ne, 1.0);
  if (key.kind == LegendreTableKind::analysis) p->weight.assign(q.weights.begin(), q.weights.begin() + p->n_even);

  p->factor.resize(static_cast<size_t>(mmax * lmax));
  double min_factor = std::numeric_limits<double>::infinity();
  for (int64_t m = 0; m < mmax; ++m)
    for (int64_t l = 0; l < lmax; ++l) {
      p->factor[static_cast<size_t>(m * lmax + l)] = row_factor(key, m, l);
      min_factor = std::min(min_factor, std::abs(row_factor(key, m, l)));
    }
  p->ab_offset.resize(static_cast<size_t>(mmax));
  for (int64_t m = 0; m < mmax; ++m) {
    p->ab_offset[static_cast<size_t>(m)] = p->ab.size();
    const double md = static_cast<double>(m);
    for (int64_t l = m + 1; l < lmax; ++l) {
      const double ld = static_cast<double>(l);
      p->ab.push_back(std::sqrt((2.0 * ld - 1.0) * (2.0 * ld + 1.0) / ((ld - md) * (ld + md))));
      p->ab.push_back(l - m < 2 ? 0.0
                                : std::sqrt((ld + md - 1.0) * (ld - md - 1.0) * (2.0 * ld + 1.0) /
                                            ((ld - md) * (ld + md) * (2.0 * ld - 3.0))));
    }
  }

  for (int64_t m = 0; m < mmax; ++m) {
    double s_prev = 1, s_cur = 1;  // s_{l-2}, s_{l-1}
    p->out_factor.push_back(p->f(m, m));
    const double* ab = p->ab.data() + p->ab_offset[static_cast<size_t>(m)];
    for (int64_t l = m + 1; l < lmax; ++l, ab += 2) {
      const double s_l = l - m < 2 ? 1.0 : ab[1] * s_prev;
      p->alpha.push_back(ab[0] * s_cur / s_l);
      p->out_factor.push_back(p->f(m, l) * s_l);
      s_prev = s_cur;
      s_cur = s_l;
    }
  }

  // The scaled diagonal of every (order, row), marched across m as legendre.cpp does.
  std::vector<Scaled> diag(static_cast<size_t>(mmax) * ne);
  for (size_t j = 0; j < ne; ++j) {
    const double s = std::sqrt((1.0 - p->x[j]) * (1.0 + p->x[j]));
    Scaled v{};
    v.mant = std::frexp(seed_00(key), &v.exp);
    for (int64_t m = 0; m < mmax; ++m) {
      if (m > 0) advance_diagonal(v, m, s);
      diag[static_cast<size_t>(m) * ne + j] = v;
    }
  }

  // A row is kept while some degree exceeds the table's negligible level relative to a lower bound
  // of the order's largest value: an orthonormal Pbar_l^m has max |Pbar| >= 1/sqrt(4 pi) on [-1, 1]
  // (its square integrates to 1/(2 pi)); half of it allows for the grid missing the maximum. The
  // quadrature weight is left out, so this keeps at least the rows the table keeps. The largest
  // |Pbar| over degrees grows monotonically from the pole outwards in the evanescent region where
  // the cut falls, so the first kept row is found by bisection.
  const double log2_threshold =
      std::log2(LegendreTable::negligible(key.dtype) * 0.5 * seed_00(key) * min_factor);
  p->first_row.assign(static_cast<size_t>(mmax), 0);
  p->seed.assign(static_cast<size_t>(mmax) * ne, 0.0);
  p->scaled.resize(static_cast<size_t>(mmax));
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t m = 0; m < mmax; ++m) {
    const Scaled* dm = diag.data() + static_cast<size_t>(m) * ne;
    auto kept = [&](int64_t j) { return march(*p, m, p->x[static_cast<size_t>(j)], dm[j], nullptr) >= log2_threshold; };
    int64_t lo = 0, hi = p->n_even;  // the first kept row lies in [lo, hi]
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (kept(mid)) hi = mid;
      else lo = mid + 1;
    }
    p->first_row[static_cast<size_t>(m)] = lo;
    for (int64_t j = lo; j < p->n_even; ++j) {
      const Scaled d = dm[j];
      if (d.exp >= kFoldExponent) {
        p->seed[static_cast<size_t>(m) * ne + static_cast<size_t>(j)] = std::ldexp(d.mant, d.exp);
        continue;
      }
      RecurrencePlan::ScaledStart s{};
      march(*p, m, p->x[static_cast<size_t>(j)], d, &s);
      s.j = j;
      if (s.l < lmax) {  // into the kernels' form Q_l = Pbar_l / s_l
        const double* of = p->out_factor_of(m);
        s.p_prev /= of[s.l - 1 - m] / p->f(m, s.l - 1);
        s.p_cur /= of[s.l - m] / p->f(m, s.l);
      }
      if (s.l < lmax) p->scaled[static_cast<size_t>(m)].push_back(s);
    }
  }
  for (const auto& s : p->scaled) p->n_scaled += static_cast<int64_t>(s.size());
  return p;
}

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

// One block for the analysis: acc[(l - m)][f][re/im][lane] += sum over the block's rows of
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

// Orders are processed in chunks of kChunk consecutive m: the grid and spectral arrays hold m
// fastest, so a chunk reads or writes kChunk adjacent values of each row (a cache line or two)
// instead of one value per row and order, which with several fields cost more than the kernels
// (measured at 360 degrees, 4 fields: 30% of the time in the strided gathers).
constexpr int64_t kChunk = 8;

// Per-thread scratch of a chunk.
struct ChunkScratch {
  // [k][b][q][j], j < n_even + kRows (zero-padded for the last block): q = E re, E im, O re, O im
  // (analysis) or S_e, S_o (synthesis), so that blocks load and store whole vectors.
  std::vector<double> rows;
  std::vector<double> coef;    // synthesis: per order, (lmax - m) x B x 2 from offset coef_at[k]
  std::vector<double> acc;     // analysis: one order's lane accumulators
  std::vector<double> out;     // analysis: [k][b][l][2] results before the scatter
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

template <typename T>
void to_degree_chunk(const RecurrencePlan& p, const std::complex<T>* X, std::complex<T>* A, int64_t B, int64_t c0,
                     int64_t c1, ChunkScratch& ws) {
  const int64_t lmax = p.key.lmax, mmax = p.key.mmax, nlat = p.key.nlat, n_even = p.n_even;
  const int64_t K = c1 - c0, stride = 2 * B * kLanes, n_pad = n_even + kRows, row_block = B * 4 * n_pad;
  // E = w_j (X[j] + X[j']), O = w_j (X[j] - X[j']); the equator (odd nlat) has E = w_j X[j], O = 0.
  int64_t j0 = n_even;
  for (int64_t m = c0; m < c1; ++m) j0 = std::min(j0, p.first_row[static_cast<size_t>(m)]);
  ws.rows.resize(static_cast<size_t>(K * row_block));
  for (int64_t k = 0; k < K * B * 4; ++k)  // the padding the last block reads
    std::fill_n(ws.rows.data() + k * n_pad + n_even, kRows, 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = j0; j < n_even; ++j) {
      const double w = p.weight[static_cast<size_t>(j)];
      const bool equator = j == p.n_odd;
      const std::complex<T>* xn = X + (b * nlat + j) * mmax;
      const std::complex<T>* xs = X + (b * nlat + nlat - 1 - j) * mmax;
      for (int64_t m = c0; m < c1; ++m) {
        double* o = ws.rows.data() + (m - c0) * row_block + b * 4 * n_pad + j;
        const double nr = xn[m].real(), ni = xn[m].imag();
        const double sr = equator ? 0.0 : xs[m].real(), si = equator ? 0.0 : xs[m].imag();
        o[0] = w * (nr + sr), o[n_pad] = w * (ni + si);
        o[2 * n_pad] = equator ? 0.0 : w * (nr - sr), o[3 * n_pad] = equator ? 0.0 : w * (ni - si);
      }
    }
  ws.out.resize(static_cast<size_t>(K * B * lmax * 2));
  for (int64_t m = c0; m < c1; ++m) {
    const int64_t js = p.first_row[static_cast<size_t>(m)];
    const double* rows = ws.rows.data() + (m - c0) * row_block;
    ws.acc.assign(static_cast<size_t>((lmax - m) * stride), 0.0);
    for_field_tiles(B, [&]<int FB>(int64_t b0) {
      for (int64_t r0 = js; r0 < n_even; r0 += kRows) {
        const int64_t nr = std::min<int64_t>(kRows, n_even - r0);
        double x[kRows], seed[kRows];
        load_block(p, m, r0, nr, x, seed);
        analysis_block<FB>(p.alpha_of(m), m, lmax, x, seed, rows + b0 * 4 * n_pad + r0, n_pad,
                           ws.acc.data() + 2 * b0 * kLanes, stride);
      }
    });
    const double* alpha = p.alpha_of(m);
    for (const RecurrencePlan::ScaledStart& st : p.scaled[static_cast<size_t>(m)]) {
      const double x = p.x[static_cast<size_t>(st.j)];
      for (int64_t b = 0; b < B; ++b) {
        const double* v = rows + b * 4 * n_pad + st.j;
        double pp = st.p_prev, pc = st.p_cur;
        for (int64_t l = st.l;; ++l) {
          const int64_t par = (l - m) % 2;
          double* a = ws.acc.data() + (l - m) * stride + 2 * b * kLanes;
          a[0] += pc * v[2 * par * n_pad];
          a[kLanes] += pc * v[(2 * par + 1) * n_pad];
          if (l + 1 >= lmax) break;
          const double next = alpha[l - m] * x * pc - pp;
          pp = pc;
          pc = next;
        }
      }
    }
    const double* of = p.out_factor_of(m);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t l = m; l < lmax; ++l) {
        const double* a = ws.acc.data() + (l - m) * stride + 2 * b * kLanes;
        double re = 0, im = 0;
        for (int k = 0; k < kLanes; ++k) re += a[k], im += a[kLanes + k];
        double* o = ws.out.data() + (((m - c0) * B + b) * lmax + l) * 2;
        o[0] = of[l - m] * re, o[1] = of[l - m] * im;
      }
  }
  // Scatter into A[b, l, c0 .. c1), zero where l < m.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < lmax; ++l) {
      std::complex<T>* a = A + (b * lmax + l) * mmax;
      for (int64_t m = c0; m < c1; ++m) {
        const double* o = ws.out.data() + (((m - c0) * B + b) * lmax + l) * 2;
        a[m] = l < m ? std::complex<T>(0, 0) : std::complex<T>(static_cast<T>(o[0]), static_cast<T>(o[1]));
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

LegendrePath set_legendre_path(LegendrePath path) { return g_path.exchange(path); }
LegendrePath legendre_path() { return g_path.load(); }

bool use_recurrence(const LegendreTableKey& key, int64_t batch) {
  switch (legendre_path()) {
    case LegendrePath::table: return false;
    case LegendrePath::recurrence: return true;
    case LegendrePath::automatic: break;
  }
  // The measured rule (NOTES.md, "On-the-fly path"): the recurrence costs about the same per field
  // at any batch, the table GEMMs get cheaper per field as the batch grows, and in f32 they run at
  // twice the f64 rate while the recurrence stays in f64.
  const int64_t degrees_per_field = key.dtype == DType::f32 ? 64 : 32;
  return batch * degrees_per_field <= key.lmax;
}

std::shared_ptr<const RecurrencePlan> recurrence_plan_cached(const LegendreTableKey& key) {
  static std::mutex mutex;
  static auto* plans = new std::map<LegendreTableKey, std::shared_ptr<const RecurrencePlan>>();  // never destroyed
  std::lock_guard<std::mutex> lock(mutex);
  auto it = plans->find(key);
  if (it != plans->end()) return it->second;
  auto plan = build_plan(key);
  plans->emplace(key, plan);
  return plan;
}

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

int64_t recurrence_first_row(const RecurrencePlan& plan, int64_t m) {
  return plan.first_row.at(static_cast<size_t>(m));
}
int64_t recurrence_scaled_starts(const RecurrencePlan& plan) { return plan.n_scaled; }

}  // namespace gs::sphere
