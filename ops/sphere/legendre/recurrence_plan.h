// The plan of the on-the-fly Legendre contractions (recurrence.h): everything the recurrence
// kernels read for one table key (rows kept per order, seeds, the rescaled recurrence
// coefficients, scaled starts). Device-independent: the CPU kernels (recurrence.cpp) read it, and
// a CUDA twin can read the same plan. When the path is taken: path.h.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "ops/sphere/legendre/table.h"

namespace gs::sphere {

struct RecurrencePlan;

// What the recurrence needs for one table key (RecurrencePlan below), O(lmax * mmax + mmax * nlat)
// doubles (a few MB at lmax = 720), cached (a KeyedCache) until clear_legendre_cache.
std::shared_ptr<const RecurrencePlan> recurrence_plan_cached(const LegendreTableKey& key);
size_t clear_recurrence_plans();  // returns the bytes the plans held

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
  // The pair form the kernels march (recurrence_plan.cpp, "The pair form"): one sequence
  // Y_k(x^2), k = 0 .. pairs(m) - 1, serves degrees m + 2k (even) and m + 2k + 1 (odd):
  //   Pbar_{m+2k+1} = x sigma_k Y_k,   Pbar_{m+2k} = (sigma_k Y_k + beta_k sigma_{k-1} Y_{k-1}) / alpha_k,
  //   Y_{k+1} = (pair_rec[2k] x^2 + pair_rec[2k+1]) Y_k + Y_{k-1},   Y_0 = pair_seed_scale[m] Pbar_m^m, Y_{-1} = 0:
  // two operations per two degrees. Per order at pair_offset[m] (pairs(m) + 1 entries each, the
  // last recurrence pair 0 so that a march may step past the end):
  //   pair_rec  (2 per pair)  the recurrence;
  //   pair_syn  (3 per pair)  synthesis: Y_k's even coefficient is pair_syn[3k] c_{m+2k} +
  //             pair_syn[3k+1] c_{m+2k+2}, its odd one (times x) pair_syn[3k+2] c_{m+2k+1}, with
  //             c_l the spectral value (the degree's factor is folded in);
  //   pair_ana  (3 per pair)  analysis: with G_k = sum_j Y_k(x_j) E_j and H_k = sum_j Y_k(x_j) x_j O_j,
  //             the results (the degree's factor included) are pair_ana[3k] G_k + pair_ana[3k+1] G_{k-1}
  //             (degree m + 2k) and pair_ana[3k+2] H_k (degree m + 2k + 1).
  std::vector<size_t> pair_offset;  // mmax
  std::vector<double> pair_rec, pair_syn, pair_ana, pair_seed_scale;
  int64_t pairs(int64_t m) const { return (key.lmax - m + 1) / 2; }
  const double* pair_rec_of(int64_t m) const { return pair_rec.data() + 2 * pair_offset[static_cast<size_t>(m)]; }
  const double* pair_syn_of(int64_t m) const { return pair_syn.data() + 3 * pair_offset[static_cast<size_t>(m)]; }
  const double* pair_ana_of(int64_t m) const { return pair_ana.data() + 3 * pair_offset[static_cast<size_t>(m)]; }
  std::vector<double> seed;  // (mmax, n_even): Pbar_m^m(x_j); 0 before first_row and for scaled starts
  std::vector<std::vector<ScaledStart>> scaled;       // mmax
  int64_t n_scaled = 0;

  size_t nbytes() const;

  double f(int64_t m, int64_t l) const { return factor[static_cast<size_t>(m * key.lmax + l)]; }
  const double* alpha_of(int64_t m) const { return alpha.data() + ab_offset[static_cast<size_t>(m)] / 2; }
  const double* out_factor_of(int64_t m) const {
    return out_factor.data() + ab_offset[static_cast<size_t>(m)] / 2 + static_cast<size_t>(m);
  }
};

// For tests: the first northern row the recurrence keeps for order m (rows nearer the pole hold
// only negligible values for every degree), and how many (order, row) pairs start below the f64
// range and are handled by the scaled start.
int64_t recurrence_first_row(const RecurrencePlan& plan, int64_t m);
int64_t recurrence_scaled_starts(const RecurrencePlan& plan);

}  // namespace gs::sphere
