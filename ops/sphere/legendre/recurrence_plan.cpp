// Building and caching the recurrence plans (recurrence_plan.h). The seeds Pbar_m^m and the
// coefficients are those of functions.cpp (same formulas, same scaled diagonal), so the
// on-the-fly path agrees with the tables to rounding.
#include "ops/sphere/legendre/recurrence_plan.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numbers>

#include "engine/error.h"
#include "engine/keyed_cache.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/legendre/functions.h"

namespace gs::sphere {
namespace {

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

// The recurrence's coefficients, Pbar_l = a_l x Pbar_{l-1} - b_l Pbar_{l-2} (functions.cpp's formulas).
double recurrence_a(double l, double m) { return std::sqrt((2.0 * l - 1.0) * (2.0 * l + 1.0) / ((l - m) * (l + m))); }
double recurrence_b(double l, double m) {
  return l - m < 2 ? 0.0 : std::sqrt((l + m - 1.0) * (l - m - 1.0) * (2.0 * l + 1.0) / ((l - m) * (l + m) * (2.0 * l - 3.0)));
}

// The pair form (RecurrencePlan::pair_rec). With p_l = Pbar_l^m and the recurrence
// p_l = a_l x p_{l-1} - b_l p_{l-2}, write E_k = p_{m+2k} and x O_k = p_{m+2k+1} (both polynomials
// in t = x^2 times sin^m). The odd step gives O_k = al_k E_k - be_k O_{k-1} (al_k = a_{m+2k+1},
// be_k = b_{m+2k+1}), so E_k = (O_k + be_k O_{k-1}) / al_k; the even step
// E_{k+1} = ga_k t O_k - de_k E_k (ga_k = a_{m+2k+2}, de_k = b_{m+2k+2}) then gives a three-term
// recurrence of O alone in t:
//   O_{k+1} = (A_k t + B_k) O_k + C_k O_{k-1},
//   A_k = al_{k+1} ga_k,  B_k = -(al_{k+1} de_k / al_k + be_{k+1}),  C_k = -al_{k+1} de_k be_k / al_k.
// Rescaled as Y_k = O_k / sigma_k with sigma_0 = sigma_1 = 1 and sigma_{k+1} = C_k sigma_{k-1}, the
// last coefficient is 1: two fused multiply-adds advance two degrees, where the plain recurrence
// needs two per degree. (The idea is Ishioka's (2018), used by SHTns; this family, O, is the odd
// one.) The even sums read O_k through the two-term relation, which costs nothing per point: it is
// folded into the coefficients (pair_syn) or applied to the row sums (pair_ana). O_k = p_odd / x is
// about l times p_even near the equator, so the even values lose up to log10(l) digits to
// cancellation there: 1e-13 relative at l = 720, within the path's tests.
void build_pair_form(RecurrencePlan& p) {
  const int64_t lmax = p.key.lmax, mmax = p.key.mmax;
  auto a = recurrence_a, b = recurrence_b;
  p.pair_offset.resize(static_cast<size_t>(mmax));
  p.pair_seed_scale.resize(static_cast<size_t>(mmax));
  size_t total = 0;
  for (int64_t m = 0; m < mmax; ++m) {
    p.pair_offset[static_cast<size_t>(m)] = total;
    total += static_cast<size_t>(p.pairs(m) + 1);
  }
  p.pair_rec.assign(2 * total, 0.0);
  p.pair_syn.assign(3 * total, 0.0);
  p.pair_ana.assign(3 * total, 0.0);
  for (int64_t m = 0; m < mmax; ++m) {
    const int64_t n = lmax - m, np = p.pairs(m);
    const double md = static_cast<double>(m);
    auto al = [&](int64_t k) { return a(md + 2.0 * k + 1.0, md); };  // degree m + 2k + 1 <= lmax
    auto be = [&](int64_t k) { return b(md + 2.0 * k + 1.0, md); };
    auto ga = [&](int64_t k) { return a(md + 2.0 * k + 2.0, md); };
    auto de = [&](int64_t k) { return b(md + 2.0 * k + 2.0, md); };
    auto f = [&](int64_t d) { return d < n ? p.f(m, m + d) : 0.0; };  // factor of degree m + d
    std::vector<double> sigma(static_cast<size_t>(np + 1), 1.0);
    double* rec = p.pair_rec.data() + 2 * p.pair_offset[static_cast<size_t>(m)];
    double* syn = p.pair_syn.data() + 3 * p.pair_offset[static_cast<size_t>(m)];
    double* ana = p.pair_ana.data() + 3 * p.pair_offset[static_cast<size_t>(m)];
    for (int64_t k = 0; k + 1 < np; ++k) {
      const double A = al(k + 1) * ga(k), B = -(al(k + 1) * de(k) / al(k) + be(k + 1));
      const double C = -al(k + 1) * de(k) * be(k) / al(k);
      if (k > 0) sigma[static_cast<size_t>(k + 1)] = C * sigma[static_cast<size_t>(k - 1)];
      const double r = sigma[static_cast<size_t>(k)] / sigma[static_cast<size_t>(k + 1)];
      rec[2 * k] = A * r;
      rec[2 * k + 1] = B * r;
    }
    p.pair_seed_scale[static_cast<size_t>(m)] = al(0);
    for (int64_t k = 0; k < np; ++k) {
      const double sk = sigma[static_cast<size_t>(k)], skm = k > 0 ? sigma[static_cast<size_t>(k - 1)] : 0.0;
      syn[3 * k] = sk * f(2 * k) / al(k);
      syn[3 * k + 1] = 2 * k + 2 < n ? sk * f(2 * k + 2) * be(k + 1) / al(k + 1) : 0.0;
      syn[3 * k + 2] = sk * f(2 * k + 1);
      ana[3 * k] = f(2 * k) * sk / al(k);
      ana[3 * k + 1] = f(2 * k) * be(k) * skm / al(k);
      ana[3 * k + 2] = f(2 * k + 1) * sk;
    }
  }
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
      p->ab.push_back(recurrence_a(ld, md));
      p->ab.push_back(recurrence_b(ld, md));
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

  build_pair_form(*p);

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

}  // namespace

namespace {

KeyedCache<LegendreTableKey, RecurrencePlan>& plan_cache() {
  // Never destroyed: plans may be looked up during static destruction.
  static auto* plans = new KeyedCache<LegendreTableKey, RecurrencePlan>(
      [](const LegendreTableKey& k) -> std::shared_ptr<const RecurrencePlan> { return build_plan(k); },
      [](const RecurrencePlan& p) { return p.nbytes(); });
  return *plans;
}

}  // namespace

std::shared_ptr<const RecurrencePlan> recurrence_plan_cached(const LegendreTableKey& key) {
  return plan_cache().get(key.canonical());
}

size_t clear_recurrence_plans() { return plan_cache().clear(); }

size_t RecurrencePlan::nbytes() const {
  size_t doubles = x.size() + weight.size() + ab.size() + factor.size() + alpha.size() + out_factor.size() + seed.size();
  for (const auto& s : scaled) doubles += 4 * s.size();
  doubles += pair_rec.size() + pair_syn.size() + pair_ana.size() + pair_seed_scale.size();
  return doubles * sizeof(double) + (first_row.size() + ab_offset.size() + pair_offset.size()) * sizeof(int64_t);
}

int64_t recurrence_first_row(const RecurrencePlan& plan, int64_t m) {
  return plan.first_row.at(static_cast<size_t>(m));
}
int64_t recurrence_scaled_starts(const RecurrencePlan& plan) { return plan.n_scaled; }

}  // namespace gs::sphere
