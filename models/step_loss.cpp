// The masked, scaled loss of one rollout step (step_loss.h).
#include "models/step_loss.h"

#include "distributed/sphere_blocks.h"
#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/ops.h"
#include "ops/sphere/sfno_blocks.h"

namespace gs::models {
namespace {

// (C) -> (1, C, 1, 1), broadcast against (B, C, H, W).
Tensor per_channel(const Tensor& scale) { return reshape(scale, {1, scale.numel(), 1, 1}); }

// (B, C, H, W) -> (B, C): the whole sphere's area-weighted mean.
Tensor sphere_mean(const Tensor& x, const std::vector<double>& area_weights, int64_t nlon, const Tensor& aw,
                   const dist::ProcessGrid& grid) {
  return grid.spatially_split() ? dist::area_weighted_mean(x, area_weights, nlon, grid)
                                : sphere::area_weighted_mean(x, aw);
}

// 1 (in x's dtype) where x has a value, and x with 0 where it is missing.
std::pair<Tensor, Tensor> mask_and_filled(const Tensor& x) {
  NoGradGuard no_grad;
  const Tensor valid = present(x);
  return {to(valid, x.dtype()), where(valid, x, zeros({}, x.dtype(), x.device()))};
}

void check_mask(const Tensor& x, const Tensor& valid, const char* what) {
  GS_CHECK(valid.defined() && valid.sizes() == x.sizes() && valid.dtype() == DType::b8,
           "{}: expected a bool mask of the values' shape {}, got {}", what, x.meta_str(),
           valid.defined() ? valid.meta_str() : std::string("none"));
}

}  // namespace

Tensor present(const Tensor& x) {
  NoGradGuard no_grad;
  return eq(x, x);  // false only for NaN
}

bool has_missing(const Tensor& x) { return !all_true(present(x)); }

Tensor fill_missing(const Tensor& x) { return mask_and_filled(x).second; }

Tensor step_loss(const Tensor& pred, const Tensor& target, const StepLossSpec& spec, const Tensor& area_weights,
                 const dist::ProcessGrid& grid, const StepMask* mask) {
  GS_CHECK(pred.sizes() == target.sizes(), "step loss: expected the target {} to have the prediction's shape {}",
           target.meta_str(), pred.meta_str());
  if (!mask && !spec.scale.defined())  // the stepper's loss as it always was
    return grid.spatially_split() ? dist::area_weighted_mse(pred, target, spec.area_weights, spec.nlon, grid)
                                  : sphere::area_weighted_mse(pred, target, area_weights);
  const Tensor e = scaled(sub(pred, mask ? fill_missing(target) : target), spec);
  return mean_point_loss(mul(e, e), target, spec, area_weights, grid, mask);
}

Tensor scaled(const Tensor& x, const StepLossSpec& spec) {
  GS_CHECK(!spec.scale.defined() || (spec.scale.dim() == 1 && x.dim() == 4 && spec.scale.size(0) == x.size(1)),
           "step loss: expected one loss scale per output channel of {}, got {}", x.meta_str(), spec.scale.meta_str());
  return spec.scale.defined() ? mul(x, per_channel(spec.scale)) : x;
}

Tensor mean_point_loss(const Tensor& density, const Tensor& target, const StepLossSpec& spec, const Tensor& area_weights,
                       const dist::ProcessGrid& grid, const StepMask* mask) {
  if (!mask) return mean(sphere_mean(density, spec.area_weights, spec.nlon, area_weights, grid));
  GS_CHECK(mask->weights.defined() && mask->weights.numel() == density.size(1),
           "step loss: expected the mask weights of {} output channels, got {}", density.size(1),
           mask->weights.meta_str());
  const Tensor m = mask_and_filled(target).first;
  const Tensor num = sum(sphere_mean(mul(density, m), spec.area_weights, spec.nlon, area_weights, grid), {0});  // (C)
  Tensor den;
  double channels = 0;
  {
    NoGradGuard no_grad;
    const Tensor empty_channel = to(eq(mask->weights, 0.0), num.dtype());
    den = add(to(mask->weights, num.dtype()), empty_channel);  // a channel missing everywhere: 0 / 1, not counted
    channels = static_cast<double>(mask->weights.numel()) - sum(empty_channel).item<double>();
  }
  return mul(sum(div(num, den)), mask->batch_factor / std::max(channels, 1.0));
}

Tensor local_mask_weights(const Tensor& target, const StepLossSpec& spec, const Tensor& area_weights,
                          const dist::ProcessGrid& grid) {
  NoGradGuard no_grad;
  return sum(sphere_mean(mask_and_filled(target).first, spec.area_weights, spec.nlon, area_weights, grid), {0});
}

MaskedSums masked_square_sums(const Tensor& err, const Tensor& valid, const std::vector<double>& area_weights,
                              int64_t nlon, const dist::ProcessGrid& grid) {
  NoGradGuard no_grad;
  check_mask(err, valid, "masked_square_sums");
  const Tensor e = where(valid, err, zeros({}, err.dtype(), err.device()));
  return masked_value_sums(mul(e, e), valid, area_weights, nlon, grid);
}

MaskedSums masked_value_sums(const Tensor& values, const Tensor& valid, const std::vector<double>& area_weights,
                             int64_t nlon, const dist::ProcessGrid& grid) {
  NoGradGuard no_grad;
  check_mask(values, valid, "masked_value_sums");
  const Tensor m = to(valid, values.dtype());
  const Tensor v = where(valid, values, zeros({}, values.dtype(), values.device()));
  const Tensor aw = to(to(from_vector(area_weights), values.dtype()), values.device());
  return {sphere_mean(v, area_weights, nlon, aw, grid), sphere_mean(m, area_weights, nlon, aw, grid)};
}

}  // namespace gs::models
