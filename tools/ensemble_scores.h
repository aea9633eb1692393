// Scores of an ensemble forecast at one lead, for validation and rollout (tools/validation.h):
// per variable, the masked area-weighted means over the samples and the whole sphere (normalised
// units; the caller scales by the variable's std):
//
//   mean_square_error   of the ensemble mean against the truth (its root: the ensemble-mean RMSE)
//   variance            the members' unbiased variance about their mean (its root: the spread)
//   crps                the fair CRPS (models/ensemble_loss.h, alpha = 1)
//
// and over every variable and point, the truth's rank among the K members (the number of members
// below it, 0..K), each point weighted by its area: the rank histogram, flat for a calibrated
// ensemble. The spread-skill ratio sqrt((K + 1) / K) spread / RMSE is 1 for a calibrated ensemble
// of K members (the factor corrects the finite ensemble, Fortin et al. 2014).
#pragma once
#include <cstdint>
#include <vector>

#include "distributed/process_grid.h"
#include "engine/tensor.h"

namespace gs::tools {

struct EnsembleLeadScores {
  std::vector<double> mean_square_error, variance, crps;  // per variable (NaN where the truth has no value)
  std::vector<double> rank_weights;                        // K + 1 area-weighted counts (not normalised)
};

// members: K >= 2 tensors (S, C, H, W), normalised; truth (S, C, H, W), NaN where missing. On a
// split sphere the tensors are this rank's tiles and the scores the whole sphere's (nlon: whole).
EnsembleLeadScores score_ensemble_lead(const std::vector<Tensor>& members, const Tensor& truth,
                                       const std::vector<double>& area_weights, int64_t nlon,
                                       const dist::ProcessGrid& grid);

// Per variable of values (S, C, H, W): the masked area-weighted mean over the samples and the whole
// sphere, read only where `valid` (NaN for a variable with no valid point).
std::vector<double> masked_means(const Tensor& values, const Tensor& valid, const std::vector<double>& area_weights,
                                 int64_t nlon, const dist::ProcessGrid& grid);

// sqrt((K + 1) / K) * spread / rmse (NaN when rmse is 0 or either is NaN).
double spread_skill_ratio(double spread, double rmse, int64_t members);

}  // namespace gs::tools
