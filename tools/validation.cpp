#include "tools/validation.h"

#include <cmath>

#include <fmt/format.h>

#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "ops/ops.h"
#include "distributed/sphere_blocks.h"
#include "models/step_loss.h"
#include "ops/sphere/sfno_blocks.h"
#include "tools/ensemble_scores.h"

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
  const int64_t S = set.input.size(0), n = set.truth.size(1);
  const models::ChannelLayout l = stepper.layout(set.input.size(1));
  // Roll out in chunks of batch_size initial states (the memory of one training batch); the
  // forcing of every step comes from the truth (the data after the input).
  const int64_t K = stepper.options().ensemble_members;
  std::vector<Tensor> members;  // (S, n, P + D, H, W) each
  for (int64_t m = 0; m < K; ++m) {
    std::vector<Tensor> parts;
    for (int64_t s = 0; s < S; s += batch_size) {
      const int64_t b = std::min(batch_size, S - s);
      // Every replica predicts the same samples: their noise starts at global sample s.
      parts.push_back(stepper.predict(narrow(set.input, 0, s, b), n, /*rollout_id=*/static_cast<uint64_t>(s), s,
                                      narrow(set.truth, 0, s, b), m));
    }
    members.push_back(parts.size() == 1 ? parts[0] : cat(parts, 0));
  }
  ValidationScores r;
  r.members = K;
  const std::vector<int64_t> outputs = output_channel_indices(l);
  for (int64_t c : outputs) r.variables.push_back(variables[static_cast<size_t>(c)]);
  r.prediction = members[0];
  Tensor forecast = members[0];  // what `rmse` scores: the ensemble mean for an ensemble
  if (K > 1) {
    r.member_predictions = members;
    for (int64_t m = 1; m < K; ++m) forecast = add(forecast, members[m]);
    forecast = div(forecast, static_cast<double>(K));
  }
  std::vector<double> ranks(static_cast<size_t>(K + 1), 0.0);
  const int64_t C = static_cast<int64_t>(outputs.size());
  // Persistence: the initial state for every lead, as the model reads it (missing values 0).
  const Tensor initial = models::fill_missing(output_channels(set.input, l));
  double loss_sum = 0;
  int64_t loss_terms = 0;
  for (int64_t k = 0; k < n; ++k) {
    const Tensor truth = output_channels(select(set.truth, 1, k), l);  // (S, P + D, H, W), NaN where missing
    const Tensor valid = models::present(truth);
    // The whole sphere's masked area-weighted mean square over the samples (the mask: where the
    // truth has a value); NaN for a channel the truth misses everywhere at this lead.
    auto msq = [&](const Tensor& err) { return masked_means(mul(err, err), valid, area_weights, nlon, grid); };
    const auto m = msq(sub(select(forecast, 1, k), truth)), p = msq(sub(initial, truth));
    std::vector<double> rm(C), pr(C);
    for (int64_t c = 0; c < C; ++c) {
      const double sd = norm.std[static_cast<size_t>(outputs[static_cast<size_t>(c)])];
      rm[c] = std::sqrt(m[c]) * sd;  // back to physical units
      pr[c] = std::sqrt(p[c]) * sd;
      if (!std::isnan(p[c])) loss_sum += m[c], ++loss_terms;  // a channel with no truth is left out
    }
    r.rmse.push_back(rm);
    r.persistence.push_back(pr);
    if (K > 1) {
      std::vector<Tensor> at_lead;
      for (const Tensor& x : members) at_lead.push_back(select(x, 1, k));
      const EnsembleLeadScores e = score_ensemble_lead(at_lead, truth, area_weights, nlon, grid);
      std::vector<double> spread(C), ratio(C), crps(C);
      for (int64_t c = 0; c < C; ++c) {
        const double sd = norm.std[static_cast<size_t>(outputs[static_cast<size_t>(c)])];
        spread[c] = std::sqrt(e.variance[c]) * sd;
        ratio[c] = spread_skill_ratio(spread[c], rm[c], K);
        crps[c] = e.crps[c] * sd;
      }
      r.spread.push_back(spread), r.spread_skill.push_back(ratio), r.crps.push_back(crps);
      for (size_t b = 0; b < ranks.size(); ++b) ranks[b] += e.rank_weights[b];
    }
    r.lead_hours.push_back(dt_hours * static_cast<double>(k + 1));
  }
  r.loss = loss_sum / static_cast<double>(std::max<int64_t>(loss_terms, 1));
  if (K > 1) {
    double total = 0;
    for (double w : ranks) total += w;
    for (double w : ranks) r.rank_histogram.push_back(total > 0 ? w / total : std::nan(""));
  }
  return r;
}

// The predicted channels' part of `info` (names, units, roles, levels), for the output file.
models::TrajectoryInfo output_info(const models::TrajectoryInfo& info) {
  const models::ChannelLayout l = info.layout();
  models::TrajectoryInfo out = info;
  out.variables.clear(), out.units.clear(), out.roles.clear(), out.levels.clear();
  for (int64_t c : output_channel_indices(l)) {
    const size_t i = static_cast<size_t>(c);
    out.variables.push_back(info.variables[i]);
    if (!info.units.empty()) out.units.push_back(info.units[i]);
    out.roles.push_back(info.roles.empty() ? models::VariableRole::prognostic : info.roles[i]);
    if (!info.levels.empty()) out.levels.push_back(info.levels[i]);
  }
  return out;
}

models::Normalizer output_normalizer(const models::Normalizer& norm, const models::ChannelLayout& l) {
  models::Normalizer out;
  for (int64_t c : output_channel_indices(l)) {
    out.mean.push_back(norm.mean[static_cast<size_t>(c)]);
    out.std.push_back(norm.std[static_cast<size_t>(c)]);
  }
  return out;
}

std::string format_scores(const ValidationScores& s) {
  std::string out;
  for (size_t k = 0; k < s.lead_hours.size(); ++k) {
    out += fmt::format("  lead {:>4g}h:", s.lead_hours[k]);
    for (size_t c = 0; c < s.variables.size(); ++c)
      out += fmt::format("  {} {:.4g} (persistence {:.4g})", s.variables[c], s.rmse[k][c], s.persistence[k][c]);
    out += "\n";
    if (s.members > 1) {
      out += fmt::format("  {:>10}", "");
      for (size_t c = 0; c < s.variables.size(); ++c)
        out += fmt::format("  {} spread {:.4g} spread/skill {:.3f} CRPS {:.4g}", s.variables[c], s.spread[k][c],
                           s.spread_skill[k][c], s.crps[k][c]);
      out += "\n";
    }
  }
  if (s.members > 1) {
    out += fmt::format("  rank histogram ({} members; flat = {:.3f}):", s.members, 1.0 / static_cast<double>(s.members + 1));
    for (double v : s.rank_histogram) out += fmt::format(" {:.3f}", v);
    out += "\n";
  }
  return out;
}

}  // namespace gs::tools
