// Ensemble scores of one lead (ensemble_scores.h).
#include "tools/ensemble_scores.h"

#include <cmath>

#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "models/ensemble_loss.h"
#include "models/step_loss.h"
#include "ops/ops.h"

namespace gs::tools {
std::vector<double> masked_means(const Tensor& values, const Tensor& valid, const std::vector<double>& aw, int64_t nlon,
                                 const dist::ProcessGrid& grid) {
  const models::MaskedSums m = models::masked_value_sums(values, valid, aw, nlon, grid);
  const auto num = to(sum(m.weighted_values, {0}), DType::f64).to_vector<double>();
  const auto den = to(sum(m.weights, {0}), DType::f64).to_vector<double>();
  std::vector<double> out(num.size());
  for (size_t c = 0; c < num.size(); ++c) out[c] = den[c] > 0 ? num[c] / den[c] : std::nan("");
  return out;
}

EnsembleLeadScores score_ensemble_lead(const std::vector<Tensor>& members, const Tensor& truth,
                                       const std::vector<double>& area_weights, int64_t nlon,
                                       const dist::ProcessGrid& grid) {
  NoGradGuard no_grad;
  const int64_t K = static_cast<int64_t>(members.size());
  GS_CHECK(K >= 2, "ensemble scores: expected at least 2 members, got {}", K);
  const Tensor valid = models::present(truth);
  const Tensor y = models::fill_missing(truth);
  Tensor mean_field = members[0];
  for (int64_t k = 1; k < K; ++k) mean_field = add(mean_field, members[k]);
  mean_field = div(mean_field, static_cast<double>(K));
  EnsembleLeadScores r;
  const Tensor err = sub(mean_field, y);
  r.mean_square_error = masked_means(mul(err, err), valid, area_weights, nlon, grid);
  Tensor var;
  for (const Tensor& x : members) {
    const Tensor d = sub(x, mean_field);
    var = var.defined() ? add(var, mul(d, d)) : mul(d, d);
  }
  r.variance = masked_means(div(var, static_cast<double>(K - 1)), valid, area_weights, nlon, grid);
  r.crps = masked_means(models::crps_field(members, y, 1.0), valid, area_weights, nlon, grid);
  // The truth's rank: how many members lie below it.
  Tensor below = zeros(truth.sizes(), truth.dtype(), truth.device());
  for (const Tensor& x : members) below = add(below, to(lt(x, y), truth.dtype()));
  for (int64_t rank = 0; rank <= K; ++rank) {
    const Tensor at_rank = to(eq(below, static_cast<double>(rank)), truth.dtype());
    const models::MaskedSums m = models::masked_value_sums(at_rank, valid, area_weights, nlon, grid);
    r.rank_weights.push_back(sum(m.weighted_values).item<double>());
  }
  return r;
}

double spread_skill_ratio(double spread, double rmse, int64_t members) {
  if (!(rmse > 0) || std::isnan(spread)) return std::nan("");
  const double K = static_cast<double>(members);
  return std::sqrt((K + 1) / K) * spread / rmse;
}

}  // namespace gs::tools
