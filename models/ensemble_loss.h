// The ensemble losses of a stochastic emulator, as fme defines them (fme/core/ensemble.py get_crps
// and get_energy_score, fme/core/loss.py EnsembleLoss), on K members x_1..x_K of one sample:
//
//   crps (per grid point)   mean_k |x_k - y|  -  (1 - eps) / 2 * mean_{i<j} |x_i - x_j|,
//                           eps = (1 - alpha) / 2: alpha = 1 is the fair CRPS (fme's default),
//                           alpha < 1 the "almost fair" CRPS (fme's almost_fair_crps_alpha; fme
//                           fixes eps's denominator at 2 where Lang et al. 2024 divide by K, the
//                           same at K = 2, where alpha = 0 is the empirical CDF's standard CRPS)
//   energy_score (per       the same kernel form on the complex spherical harmonic coefficients of
//   spectral mode)          the full-resolution transform of the data's grid (as fme's get_real_sht:
//                           lmax = nlat on legendre-gauss, the resolved degrees on other grids;
//                           mmax = nlon/2 + 1), with |.| the complex modulus, fair
//                           (alpha = 1), each mode weighted 1 (m = 0) or 2 (m > 0), the mean over
//                           modes scaled by sqrt(lmax * mmax) / 2 (fme's); fme writes it for K = 2 only:
//                           for K = 2 this is fme's value, for other K the fair pair mean
//   mse                     each member's area-weighted MSE, averaged over the members (K = 1: the
//                           stepper's deterministic loss, bitwise)
//
// A term's per-point (per-mode) values are averaged as the stepper's MSE is (step_loss.h): the
// whole sphere's area-weighted mean per (sample, channel), then the mean over samples and channels
// (masked: the same masked mean). fme averages CRPS over grid points without area weights
// (`_wrap_elementwise`); the goldens compare the per-point values, and the area weighting is the
// one choice made here, as for the MSE. The energy score reads a missing value of the data as 0 in
// the target and in the members (fme's nan_mask), since a transform needs every point.
// The per-channel loss scale s_c multiplies members and target before every term (fme's
// VariableWeightingLoss), so CRPS and energy score grow by s_c and the MSE by s_c^2.
#pragma once
#include <string>
#include <vector>

#include "distributed/process_grid.h"
#include "engine/tensor.h"
#include "models/step_loss.h"
#include "ops/sphere/grids.h"

namespace gs::models {

// The weights of the loss terms (`loss.type` / `loss.weights`-free form of the configuration).
struct LossTerms {
  double mse = 1;
  double crps = 0;
  double energy_score = 0;
  double crps_alpha = 1;  // fme's almost_fair_crps_alpha, in [0, 1]
  sphere::GridKind grid = sphere::GridKind::legendre_gauss;  // the energy score's transform grid

  // Whether a term needs several members (CRPS and energy score are undefined for one).
  bool needs_members() const { return crps > 0 || energy_score > 0; }
  // Whether this is the stepper's deterministic loss (the MSE alone, weight 1).
  bool plain_mse() const { return mse == 1 && crps == 0 && energy_score == 0; }
  // "mse 1" / "crps 1 (alpha 0.95)" / "mse 0.5 + crps 1 (alpha 1) + energy_score 0.1"
  std::string str() const;
  // Throws gs::Error naming the field when a weight is negative or not finite, every weight is 0,
  // alpha is outside [0, 1], or `members` < 2 with a term that needs members.
  void check(int64_t members) const;
};

// The members a rank holds when the grid's ensemble axis splits them (split_block(total, E, e)):
// global members [start, start + count) of `total`. total = 0: every member is here.
struct MemberShare {
  int64_t start = 0, total = 0, count = 0;
  bool split() const { return total > 0; }
};
// This rank's share of `members` over grid's ensemble axis ({} when E = 1). Throws when the axis
// has more ranks than there are members.
MemberShare member_share(int64_t members, const dist::ProcessGrid& grid);

// Per point (B, C, H, W): the CRPS above of `members` (K >= 1 tensors like target) against target.
Tensor crps_field(const std::vector<Tensor>& members, const Tensor& target, double alpha);

// Per mode (..., L, M) real: the fair kernel |x_k - y| averaged over members minus half the pair
// mean, of complex coefficients (fme's get_energy_score for K = 2), unweighted.
Tensor energy_kernel(const std::vector<Tensor>& member_coeffs, const Tensor& target_coeffs);

// The energy score of `members` against target (each (B, C, H, W), a tile of the whole sphere on a
// split grid): (B, C), each the mean over the whole transform's modes of the weighted kernel,
// replicated over the spatial group. `nlat`, `nlon` are the whole sphere's.
Tensor energy_score(const std::vector<Tensor>& members, const Tensor& target, sphere::GridKind grid, int64_t nlat,
                    int64_t nlon, const dist::ProcessGrid& pgrid, const MemberShare& share = {});

// The stepper's loss of one rollout step for K members (step_loss.h's conventions: pred (B, C_out,
// H, W) each, normalised; target NaN where missing; `mask` null: the unmasked form). With
// terms.plain_mse() and one member it is step_loss itself.
//
// With the members split over the grid's ensemble axis (`share`), `members` are this rank's and
// the result is this rank's part of the loss: the parts sum over the ensemble group to the loss of
// all K members (the reducer sums gradients over that group). The pair terms read every member:
// gather_members brings them (a tape op pair: all-gather forward, its conjugate backward), and a
// rank scores half of each ordered pair (i, j != i) of its members i, so each pair counts once over
// the ranks and every rank's graph reaches its gather: the gathers' backward all-reduces run on
// every ensemble rank, in the order of their creation (the engine runs nodes by descending
// sequence number), so ranks whose graphs differ (uneven splits) still issue them alike.
Tensor ensemble_step_loss(const std::vector<Tensor>& members, const Tensor& target, const LossTerms& terms,
                          const StepLossSpec& spec, const Tensor& area_weights, const dist::ProcessGrid& grid,
                          const StepMask* mask = nullptr, const MemberShare& share = {});

// Every member from each ensemble rank's share (`own` (k, ...) stacked along dim 0): (total, ...),
// forward an all-gather over the ensemble group, backward the gradients summed over the group with
// each rank keeping its own block (copy_to_group after gather_along).
Tensor gather_members(const Tensor& own, const MemberShare& share, const dist::ProcessGrid& grid);

}  // namespace gs::models
