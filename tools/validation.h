// Validation by autoregressive rollout: from evenly spread initial states of the validation set,
// roll the model out lead_steps steps (forced by the data) and score every lead with the
// area-weighted RMSE per predicted variable (physical units; masked where the truth is missing),
// next to persistence (the initial state as the forecast for every lead). A stepper that trains
// ensembles rolls out each of its members (each with its own noise) and adds the ensemble scores.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "models/data/dataset.h"
#include "models/stepper.h"

namespace gs::tools {

struct ValidationSet {
  Tensor input;   // (S, C, H, W) normalised
  Tensor truth;   // (S, n, C, H, W) normalised
};

// `samples` windows of lead_steps + 1 states spread evenly over all validation windows (fewer when
// there are fewer windows), on the tile rows x cols (the whole grid by default).
ValidationSet make_validation_set(const models::TrajectorySource& data, const models::Normalizer& norm,
                                  int64_t samples, int64_t lead_steps, DType dtype, models::Span rows = {},
                                  models::Span cols = {});

struct ValidationScores {
  std::vector<std::string> variables;            // the predicted ones (prognostic, then diagnostic)
  std::vector<double> lead_hours;                // per lead
  std::vector<std::vector<double>> rmse;         // [lead][variable], physical units
  std::vector<std::vector<double>> persistence;  // [lead][variable]
  // Area-weighted MSE in normalised units averaged over leads and variables: the number the
  // reduce-on-plateau schedule and the loss curve use.
  double loss = 0;
  Tensor prediction;  // (S, n, C, H, W) normalised, for the maps (an ensemble: member 0's)
  // An ensemble (the stepper's ensemble_members K > 1; tools/ensemble_scores.h): `rmse` and `loss`
  // are the ensemble mean's, and per [lead][variable] in physical units:
  int64_t members = 1;
  std::vector<Tensor> member_predictions;  // K tensors like `prediction` (member 0's is it)
  std::vector<std::vector<double>> spread, spread_skill, crps;
  std::vector<double> rank_histogram;  // K + 1 shares summing to 1, over every lead and variable
};

// On a grid that splits the sphere, `set` holds this rank's tile of every sample (every data
// replica validates all of them), the scores are the whole sphere's (equal on every rank) and the
// prediction is the tile; nlon is the whole sphere's.
ValidationScores validate(models::Stepper& stepper, const ValidationSet& set, const models::Normalizer& norm,
                          const std::vector<double>& area_weights, const std::vector<std::string>& variables,
                          double dt_hours, int64_t batch_size, const dist::ProcessGrid& grid = {}, int64_t nlon = 0);

using models::output_channel_indices;
using models::output_channels;
// The predicted channels' part of a data description (names, units, roles, levels), for outputs.
models::TrajectoryInfo output_info(const models::TrajectoryInfo& info);
// The normaliser of the predicted channels (to denormalise predictions).
models::Normalizer output_normalizer(const models::Normalizer& norm, const models::ChannelLayout& l);

// "lead 24h: geopotential 12.3 (persistence 45.6) ..." lines, one per lead; for an ensemble also
// "spread ... spread/skill ... CRPS ..." lines and the rank histogram.
std::string format_scores(const ValidationScores& s);

}  // namespace gs::tools
