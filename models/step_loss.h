// The stepper's loss of one rollout step and the masks of missing values (models/stepper.h).
//
//   loss = mean over output channels c of  sum_{b,h,w} a_h m (s_c (pred - target))^2 / sum_{b,h,w} a_h m
//
// a_h the area weight of row h (cos-lat, summing to 1 over the sphere), m the mask (1 where the
// target has a value, 0 where it is missing: a fill value, NaN), s_c the channel's loss scale (fme's
// loss weight times, with residual scaling, full-field std / residual std), the sums over the whole
// global batch and the whole sphere. With no missing value and every s_c = 1 it is the
// area-weighted MSE over (batch, channels) the stepper always had, and the same ops compute it
// (bitwise the earlier results). On a grid that splits the sphere the sums are the whole sphere's
// (dist::area_weighted_mean), replicated over the spatial group.
//
// With masks the denominator belongs to the whole global batch: a micro-batch (or a data replica's
// share) contributes its numerator over the global denominator, scaled by B_global / b so that the
// stepper's share weights and the replicas' average give back the global loss and its gradient.
#pragma once
#include <vector>

#include "distributed/process_grid.h"
#include "engine/tensor.h"

namespace gs::models {

struct StepLossSpec {
  std::vector<double> area_weights;  // per latitude row of the whole sphere
  int64_t nlon = 0;                  // of the whole sphere (a split grid's tiles need it)
  Tensor scale;                      // (C_out) or undefined (every scale 1)
};

// The masked form's global denominators for one rollout step.
struct StepMask {
  Tensor weights;           // (C_out): sum over the global batch of the area-weighted mask
  double batch_factor = 1;  // B_global / b, b the samples of this micro-batch
};

// pred, target (B, C_out, H, W) normalised (target NaN where missing); a 0-dim loss. `mask` null:
// the unmasked form. Every rank of a split sphere must take the same form (they issue different
// collectives): the caller decides for all.
Tensor step_loss(const Tensor& pred, const Tensor& target, const StepLossSpec& spec, const Tensor& area_weights,
                 const dist::ProcessGrid& grid, const StepMask* mask = nullptr);

// The parts of step_loss that the ensemble losses share (ensemble_loss.h): x (B, C, H, W) times
// the per-channel scale (spec.scale undefined: x), and the mean of a per-point loss `density`
// (B, C, H, W) as step_loss averages the squared error: unmasked the mean over (B, C) of the whole
// sphere's area-weighted means, masked (`target` NaN where missing; density read only where it has
// a value) the masked mean over the global denominators.
Tensor scaled(const Tensor& x, const StepLossSpec& spec);
Tensor mean_point_loss(const Tensor& density, const Tensor& target, const StepLossSpec& spec, const Tensor& area_weights,
                       const dist::ProcessGrid& grid, const StepMask* mask);

// This rank's part of StepMask::weights: (C_out) the sum over the local batch of the whole sphere's
// area-weighted mask of `target` (B, C_out, H, W). Sum it over the data replicas for the global one.
Tensor local_mask_weights(const Tensor& target, const StepLossSpec& spec, const Tensor& area_weights,
                          const dist::ProcessGrid& grid);

// Missing values are NaN (the readers' fill values, masks): `present` is where x has a value (a bool
// tensor), has_missing whether any is missing. An infinity is a value (and makes a loss non-finite).
Tensor present(const Tensor& x);
bool has_missing(const Tensor& x);
// x with its missing values replaced by 0 (the mean, in normalised units): what the model reads.
Tensor fill_missing(const Tensor& x);

// Per (b, c): the whole sphere's sum of a_h m e^2 and of a_h m (a masked mean's numerator and
// denominator), for scores that respect masks (validation, rollout). err (B, C, H, W); m = valid
// (bool, where the truth has a value): a non-finite error where the truth is valid (a diverging
// prediction) stays in the sums, so it shows as a non-finite score, never as a dropped point.
struct MaskedSums {
  Tensor weighted_values, weights;  // (B, C) each
};
MaskedSums masked_square_sums(const Tensor& err, const Tensor& valid, const std::vector<double>& area_weights,
                              int64_t nlon, const dist::ProcessGrid& grid);
// The same for any per-point value (a score that may be negative: the fair CRPS): the sums of
// a_h m v and of a_h m, v read only where valid.
MaskedSums masked_value_sums(const Tensor& values, const Tensor& valid, const std::vector<double>& area_weights,
                             int64_t nlon, const dist::ProcessGrid& grid);

}  // namespace gs::models
