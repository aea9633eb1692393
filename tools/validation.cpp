#include "tools/validation.h"

#include <cmath>

#include <fmt/format.h>

#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "ops/ops.h"
#include "distributed/sphere_blocks.h"
#include "ops/sphere/sfno_blocks.h"

namespace gs::tools {

ValidationSet make_validation_set(const models::TrajectorySource& data, const models::Normalizer& norm,
                                  int64_t samples, int64_t lead_steps, DType dtype, models::Span rows,
                                  models::Span cols) {
  auto all = models::list_windows(data.info(), lead_steps);
  GS_CHECK(!all.empty(), "validation: no window of {} states in the validation data", lead_steps + 1);
  const int64_t n = std::min<int64_t>(samples, static_cast<int64_t>(all.size()));
  std::vector<std::pair<int64_t, int64_t>> picked;
  for (int64_t i = 0; i < n; ++i) picked.push_back(all[(i * static_cast<int64_t>(all.size())) / n]);
  auto batch = models::make_batch(data, norm, picked, lead_steps, dtype, rows, cols);
  return {batch.input, batch.targets};
}

ValidationScores validate(models::Stepper& stepper, const ValidationSet& set, const models::Normalizer& norm,
                          const std::vector<double>& area_weights, const std::vector<std::string>& variables,
                          double dt_hours, int64_t batch_size, const dist::ProcessGrid& grid, int64_t nlon) {
  InferenceModeGuard inference;
  const int64_t S = set.input.size(0), n = set.truth.size(1), C = set.input.size(1);
  // Roll out in chunks of batch_size initial states (the memory of one training batch).
  std::vector<Tensor> parts;
  for (int64_t s = 0; s < S; s += batch_size) {
    const int64_t b = std::min(batch_size, S - s);
    // Every replica predicts the same samples: their noise starts at global sample s.
    parts.push_back(stepper.predict(narrow(set.input, 0, s, b), n, /*rollout_id=*/static_cast<uint64_t>(s), s));
  }
  ValidationScores r;
  r.variables = variables;
  r.prediction = parts.size() == 1 ? parts[0] : cat(parts, 0);  // (S, n, C, H, W)
  double loss_sum = 0;
  for (int64_t k = 0; k < n; ++k) {
    const Tensor truth = select(set.truth, 1, k);       // (S, C, H, W)
    const Tensor pred = select(r.prediction, 1, k);
    // area-weighted mean over the sphere (its tiles summed over the grid), then mean over samples: (C)
    const Tensor mse = mean(dist::area_weighted_mean(square(pred - truth), area_weights, nlon, grid), {0});
    const Tensor pmse = mean(dist::area_weighted_mean(square(set.input - truth), area_weights, nlon, grid), {0});
    const auto m = to(mse, DType::f64).to_vector<double>(), p = to(pmse, DType::f64).to_vector<double>();
    std::vector<double> rm(C), pr(C);
    for (int64_t c = 0; c < C; ++c) {
      rm[c] = std::sqrt(m[c]) * norm.std[c];  // back to physical units
      pr[c] = std::sqrt(p[c]) * norm.std[c];
      loss_sum += m[c];
    }
    r.rmse.push_back(rm);
    r.persistence.push_back(pr);
    r.lead_hours.push_back(dt_hours * static_cast<double>(k + 1));
  }
  r.loss = loss_sum / static_cast<double>(n * C);
  return r;
}

std::string format_scores(const ValidationScores& s) {
  std::string out;
  for (size_t k = 0; k < s.lead_hours.size(); ++k) {
    out += fmt::format("  lead {:>4g}h:", s.lead_hours[k]);
    for (size_t c = 0; c < s.variables.size(); ++c)
      out += fmt::format("  {} {:.4g} (persistence {:.4g})", s.variables[c], s.rmse[k][c], s.persistence[k][c]);
    out += "\n";
  }
  return out;
}

}  // namespace gs::tools
