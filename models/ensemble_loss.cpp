// The ensemble losses (ensemble_loss.h).
#include "models/ensemble_loss.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "distributed/collectives.h"
#include "distributed/sphere_transforms.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/ops.h"
#include "ops/sphere/sht.h"

namespace gs::models {
namespace {

// sum_k |x_k - y| / K over the members given (K: the whole ensemble's count).
Tensor target_term(const std::vector<Tensor>& x, const Tensor& y, int64_t K) {
  Tensor t;
  for (const Tensor& xk : x) t = t.defined() ? add(t, abs(sub(xk, y))) : abs(sub(xk, y));
  return K == 1 ? t : div(t, static_cast<double>(K));
}

// mean_k |x_k - y| - c * mean_{i<j} |x_i - x_j| over K members (abs: the real modulus or the complex one).
Tensor kernel_form(const std::vector<Tensor>& x, const Tensor& y, double pair_factor) {
  const int64_t K = static_cast<int64_t>(x.size());
  const Tensor target = target_term(x, y, K);
  if (K == 1 || pair_factor == 0) return target;
  Tensor pairs;
  for (size_t i = 0; i < x.size(); ++i)
    for (size_t j = i + 1; j < x.size(); ++j) {
      const Tensor d = abs(sub(x[i], x[j]));
      pairs = pairs.defined() ? add(pairs, d) : d;
    }
  const double n_pairs = static_cast<double>(K * (K - 1) / 2);
  return sub(target, mul(pairs, pair_factor / n_pairs));
}

// This rank's part of kernel_form when it holds members start.. of all K (`all`, gathered): the
// target term of its own members, and half of every ordered pair (i, j != i) whose first member it
// holds, so each unordered pair counts once over the ranks, the pair work is spread evenly, and
// every rank's loss reads `all` (its gather's backward, a collective, runs on every rank).
Tensor kernel_form_part(const std::vector<Tensor>& own, int64_t start, const Tensor& all, const Tensor& y,
                        double pair_factor) {
  const int64_t K = all.size(0);
  GS_CHECK(K >= 2, "ensemble loss: a split ensemble needs at least 2 members, got {}", K);
  Tensor pairs;
  for (size_t i = 0; i < own.size(); ++i)
    for (int64_t j = 0; j < K; ++j) {
      if (j == start + static_cast<int64_t>(i)) continue;
      const Tensor d = abs(sub(own[i], select(all, 0, j)));
      pairs = pairs.defined() ? add(pairs, d) : d;
    }
  const double n_pairs = static_cast<double>(K * (K - 1) / 2);
  return sub(target_term(own, y, K), mul(pairs, 0.5 * pair_factor / n_pairs));
}

// fme's get_crps: the pair term's factor (1 - eps) / 2 with eps = (1 - alpha) / 2.
double crps_pair_factor(double alpha) { return 0.5 * (1.0 - (1.0 - alpha) / 2.0); }

void check_members(const std::vector<Tensor>& members, const Tensor& target, const char* what) {
  GS_CHECK(!members.empty(), "{}: expected at least one ensemble member, got none", what);
  for (size_t k = 0; k < members.size(); ++k)
    GS_CHECK(members[k].defined() && members[k].sizes() == target.sizes() && members[k].dtype() == target.dtype(),
             "{}: expected every member like the target {}, got member {} {}", what, target.meta_str(), k,
             members[k].defined() ? members[k].meta_str() : std::string("undefined"));
}

}  // namespace

MemberShare member_share(int64_t members, const dist::ProcessGrid& grid) {
  const int64_t E = grid.ensemble_size();
  if (E == 1) return {};
  GS_CHECK(members >= E,
           "ensemble members: the grid's ensemble axis has {} ranks but there are {} members per initial condition; "
           "every ensemble rank needs at least one (set training.ensemble_members >= {}, or a grid with E <= {})",
           E, members, E, members);
  const dist::Block b = dist::split_block(members, E, grid.ensemble_rank());
  return {b.start, members, b.count};
}

Tensor gather_members(const Tensor& own, const MemberShare& share, const dist::ProcessGrid& grid) {
  const dist::CommPtr& comm = grid.comm(dist::Group::ensemble);
  return dist::copy_to_group(dist::gather_along(own, 0, share.total, comm), comm);
}

std::string LossTerms::str() const {
  std::vector<std::string> parts;
  if (mse > 0) parts.push_back(fmt::format("mse {}", mse));
  if (crps > 0) parts.push_back(fmt::format("crps {} (alpha {})", crps, crps_alpha));
  if (energy_score > 0) parts.push_back(fmt::format("energy_score {}", energy_score));
  return fmt::format("{}", fmt::join(parts, " + "));
}

void LossTerms::check(int64_t members) const {
  for (auto [name, w] : {std::pair{"mse", mse}, std::pair{"crps", crps}, std::pair{"energy_score", energy_score}})
    GS_CHECK(std::isfinite(w) && w >= 0, "loss: expected a finite weight >= 0 for {}, got {}", name, w);
  GS_CHECK(mse + crps + energy_score > 0, "loss: expected a positive weight for at least one of mse, crps and "
                                          "energy_score, got every weight 0");
  GS_CHECK(std::isfinite(crps_alpha) && crps_alpha >= 0 && crps_alpha <= 1,
           "loss: expected crps_alpha in [0, 1] (1: fair CRPS, 0: standard CRPS), got {}", crps_alpha);
  GS_CHECK(members >= 1, "loss: expected ensemble_members >= 1, got {}", members);
  GS_CHECK(!needs_members() || members >= 2,
           "loss: {} needs an ensemble of at least 2 members per initial condition (its spread term compares "
           "members; with one member it is undefined), got ensemble_members {}: set training.ensemble_members >= 2 "
           "or use loss.type mse",
           crps > 0 ? "crps" : "energy_score", members);
}

Tensor crps_field(const std::vector<Tensor>& members, const Tensor& target, double alpha) {
  check_members(members, target, "crps_field");
  return kernel_form(members, target, crps_pair_factor(alpha));
}

Tensor energy_kernel(const std::vector<Tensor>& member_coeffs, const Tensor& target_coeffs) {
  check_members(member_coeffs, target_coeffs, "energy_kernel");
  return kernel_form(member_coeffs, target_coeffs, 0.5);
}

Tensor energy_score(const std::vector<Tensor>& members, const Tensor& target, sphere::GridKind grid, int64_t nlat,
                    int64_t nlon, const dist::ProcessGrid& pgrid, const MemberShare& share) {
  check_members(members, target, "energy_score");
  GS_CHECK(target.dim() == 4, "energy_score: expected fields (B, C, H, W), got {}", target.meta_str());
  // fme's get_real_sht is torch-harmonics' RealSHT with its defaults: lmax = nlat on a
  // legendre-gauss grid (what its quadrature resolves; other grids: the degrees theirs resolves,
  // where torch-harmonics 0.8 would also take nlat), mmax = nlon/2 + 1. Orders m >= lmax hold no
  // coefficient (l < m) and add 0 to the sum, so the transform stops at lmax orders, and only the
  // scaling counts fme's lmax x (nlon/2 + 1) modes.
  const int64_t fme_mmax = nlon / 2 + 1;
  const int64_t lmax = sphere::default_lmax(grid, nlat);
  const sphere::ShtSpec spec = sphere::make_sht_spec(grid, nlat, nlon, lmax, std::min(fme_mmax, lmax));
  // Every member and the target in one transform: (K + 1, B, C, H, W) -> (K + 1, B, C, L, M).
  std::vector<Tensor> fields(members.begin(), members.end());
  fields.push_back(target);
  const Tensor coeffs = pgrid.spatially_split() ? dist::sht(stack(fields, 0), spec, pgrid) : sphere::sht(stack(fields, 0), spec);
  const int64_t K = static_cast<int64_t>(members.size());
  std::vector<Tensor> x;
  for (int64_t k = 0; k < K; ++k) x.push_back(select(coeffs, 0, k));
  const Tensor y = select(coeffs, 0, K);
  const Tensor es = share.split()  // (B, C, l, m) this rank's modes
                        ? kernel_form_part(x, share.start, gather_members(narrow(coeffs, 0, 0, K), share, pgrid), y, 0.5)
                        : energy_kernel(x, y);
  // Mode weights 1 at m = 0, else 2; fme's scaling L*M / (2 sqrt(L*M)) before the mean over modes.
  const dist::Block orders = pgrid.spatially_split() ? dist::local_orders(pgrid, spec.mmax) : dist::Block{0, spec.mmax};
  std::vector<double> w(static_cast<size_t>(orders.count), 2.0);
  if (orders.start == 0 && !w.empty()) w[0] = 1.0;
  const double modes = static_cast<double>(spec.lmax * fme_mmax);
  const Tensor mode_weights = to(cast_copy(from_vector(w), es.dtype()), es.device());
  const Tensor partial = div(sum(mul(es, mode_weights), {-2, -1}), 2.0 * std::sqrt(modes));  // (B, C)
  return pgrid.spatially_split() ? dist::reduce_replicated(partial, pgrid.comm(dist::Group::spatial)) : partial;
}

Tensor ensemble_step_loss(const std::vector<Tensor>& members, const Tensor& target, const LossTerms& terms,
                          const StepLossSpec& spec, const Tensor& area_weights, const dist::ProcessGrid& grid,
                          const StepMask* mask, const MemberShare& share) {
  check_members(members, target, "ensemble step loss");
  if (members.size() == 1 && terms.plain_mse() && !share.split())
    return step_loss(members[0], target, spec, area_weights, grid, mask);
  const double K = static_cast<double>(share.split() ? share.total : static_cast<int64_t>(members.size()));
  Tensor total;
  auto add_term = [&](double weight, const Tensor& term) {
    const Tensor t = weight == 1.0 ? term : mul(term, weight);
    total = total.defined() ? add(total, t) : t;
  };
  if (terms.mse > 0) {
    Tensor sum_mse;
    for (const Tensor& x : members) {
      const Tensor l = step_loss(x, target, spec, area_weights, grid, mask);
      sum_mse = sum_mse.defined() ? add(sum_mse, l) : l;
    }
    add_term(terms.mse, K == 1 ? sum_mse : div(sum_mse, K));  // split: this rank's members' part of the mean
  }
  if (!terms.needs_members()) return total;
  // Missing values of the target read 0 in every term: the masked mean leaves them out of the CRPS,
  // and the energy score (which transforms whole fields) sees 0 in target and members alike.
  const Tensor y = scaled(mask ? fill_missing(target) : target, spec);
  std::vector<Tensor> x;
  for (const Tensor& m : members) x.push_back(scaled(m, spec));
  if (terms.crps > 0) {
    const Tensor field = share.split() ? kernel_form_part(x, share.start, gather_members(stack(x, 0), share, grid), y,
                                                          crps_pair_factor(terms.crps_alpha))
                                       : crps_field(x, y, terms.crps_alpha);
    add_term(terms.crps, mean_point_loss(field, target, spec, area_weights, grid, mask));
  }
  if (terms.energy_score > 0) {
    if (mask) {
      const Tensor valid = present(target);
      const Tensor zero = zeros({}, y.dtype(), y.device());
      for (Tensor& m : x) m = where(valid, m, zero);
    }
    const int64_t nlat = static_cast<int64_t>(spec.area_weights.size());
    const int64_t nlon = grid.spatially_split() ? spec.nlon : target.size(3);
    const Tensor es = energy_score(x, y, terms.grid, nlat, nlon, grid, share);  // (B, C)
    // The mean over this share's samples and channels, as the unmasked MSE (the stepper's share
    // weights and the replicas' average make it the global batch's).
    add_term(terms.energy_score, mean(es));
  }
  return total;
}

}  // namespace gs::models
