// The forced rollout's metrics (inference_metrics.h).
#include "tools/inference_metrics.h"

#include <cmath>

#include "distributed/shards.h"
#include "distributed/sphere_blocks.h"
#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "models/step_loss.h"
#include "ops/ops.h"

namespace gs::tools {

InferenceMetrics::InferenceMetrics(std::vector<std::string> variables, std::vector<double> area_weights, int64_t nlon,
                                   const dist::ProcessGrid& grid)
    : variables_(std::move(variables)), area_weights_(std::move(area_weights)), nlon_(nlon), grid_(grid) {
  GS_CHECK(!variables_.empty() && !area_weights_.empty() && nlon_ >= 1,
           "InferenceMetrics: expected variables and a grid, got {} variables on {}x{}", variables_.size(),
           area_weights_.size(), nlon_);
}

std::vector<double> InferenceMetrics::masked_mean(const Tensor& x, const Tensor& valid) const {
  const Tensor m = to(valid, DType::f64);
  const Tensor filled = where(valid, to(x, DType::f64), zeros({}, DType::f64));
  // (1, C, h, w) -> (1, C): the whole sphere's area-weighted sums (the weights are normalised).
  const Tensor num = dist::area_weighted_mean(unsqueeze(filled, 0), area_weights_, nlon_, grid_);
  const Tensor den = dist::area_weighted_mean(unsqueeze(m, 0), area_weights_, nlon_, grid_);
  const auto n = num.to_vector<double>(), d = den.to_vector<double>();
  std::vector<double> out(n.size());
  for (size_t c = 0; c < n.size(); ++c) out[c] = d[c] > 0 ? n[c] / d[c] : std::nan("");
  return out;
}

void InferenceMetrics::add(const Tensor& prediction, const Tensor& truth) {
  NoGradGuard no_grad;
  GS_CHECK(prediction.defined() && truth.defined() && prediction.sizes() == truth.sizes() && prediction.dim() == 3 &&
               prediction.size(0) == static_cast<int64_t>(variables_.size()),
           "InferenceMetrics::add: expected prediction and truth (C = {}, h, w) alike, got {} and {}", variables_.size(),
           prediction.meta_str(), truth.meta_str());
  const Tensor p = to(to(prediction, Device::cpu()), DType::f64), t = to(to(truth, Device::cpu()), DType::f64);
  const Tensor valid = models::present(t);
  mean_prediction_.push_back(masked_mean(p, valid));
  mean_truth_.push_back(masked_mean(t, valid));
  const Tensor zero = zeros({}, DType::f64);
  const Tensor vp = where(valid, p, zero), vt = where(valid, t, zero), m = to(valid, DType::f64);
  if (!count_.defined()) {
    sum_prediction_ = contiguous_copy(vp), sum_truth_ = contiguous_copy(vt), count_ = contiguous_copy(m);
  } else {
    add_(sum_prediction_, vp), add_(sum_truth_, vt), add_(count_, m);
  }
  ++steps_;
}

InferenceMetrics::Result InferenceMetrics::finish() const {
  NoGradGuard no_grad;
  GS_CHECK(steps_ > 0, "InferenceMetrics: no step was added");
  Result r;
  r.variables = variables_;
  r.mean_prediction = mean_prediction_;
  r.mean_truth = mean_truth_;
  // Time means where the truth had a value at least once; NaN elsewhere.
  const Tensor seen = gt(count_, 0.0);
  const Tensor n = where(seen, count_, ones({}, DType::f64));
  const Tensor nan = full({}, std::nan(""), DType::f64);
  const Tensor tp = where(seen, div(sum_prediction_, n), nan), tt = where(seen, div(sum_truth_, n), nan);
  const Tensor bias = sub(tp, tt);
  const std::vector<double> mean_bias = masked_mean(bias, seen);
  const std::vector<double> mean_square = masked_mean(mul(bias, bias), seen);
  for (size_t c = 0; c < variables_.size(); ++c) {
    r.global_mean_bias.push_back(mean_bias[c]);
    r.rmse_of_time_mean.push_back(std::sqrt(mean_square[c]));
  }
  const dist::Distribution tiles = dist::Distribution::sharded_2d(1, 2);
  r.time_mean_prediction = dist::gather_shards(tp, tiles, grid_);
  r.time_mean_truth = dist::gather_shards(tt, tiles, grid_);
  r.bias = dist::gather_shards(bias, tiles, grid_);
  return r;
}

}  // namespace gs::tools
