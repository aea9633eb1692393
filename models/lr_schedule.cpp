#include "models/lr_schedule.h"

#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/error.h"
#include "engine/factory.h"

namespace gs::models {
namespace {

// Checks that `state` holds exactly the keys of `expected` ((key, dtype) pairs), each a one-element
// tensor of that dtype.
void check_scalar_state(const StateDict& state, const std::vector<std::pair<std::string, DType>>& expected,
                        const std::string& who) {
  std::vector<std::string> missing, unexpected;
  for (auto& [key, dt] : expected)
    if (!state.count(key)) missing.push_back(key);
  for (auto& [key, t] : state) {
    bool known = false;
    for (auto& e : expected) known = known || e.first == key;
    if (!known) unexpected.push_back(key);
  }
  GS_CHECK(missing.empty() && unexpected.empty(),
           "{} schedule: load_state: missing keys [{}], unexpected keys [{}] (a state saved by another kind of "
           "schedule?)",
           who, fmt::join(missing, ", "), fmt::join(unexpected, ", "));
  for (auto& [key, dt] : expected) {
    const Tensor& t = state.at(key);
    GS_CHECK(t.defined() && t.numel() == 1 && t.dtype() == dt,
             "{} schedule: load_state: '{}' must be a one-element {} tensor, got {}", who, key, dtype_name(dt),
             t.meta_str());
  }
}

}  // namespace

// ---- step-driven schedules

StateDict StepCountSchedule::state() const { return {{type_name() + ".step", state_scalar_i64(steps_)}}; }

void StepCountSchedule::load_state(const StateDict& state) {
  const std::string key = type_name() + ".step";
  check_scalar_state(state, {{key, DType::i64}}, type_name());
  const int64_t s = state.at(key).item<int64_t>();
  GS_CHECK(s >= 0, "{} schedule: load_state: '{}' holds {}, expected >= 0", type_name(), key, s);
  steps_ = s;
}

ConstantLr::ConstantLr(double lr) : lr_(lr) {
  GS_CHECK(std::isfinite(lr) && lr >= 0, "constant schedule: expected a finite lr >= 0, got {}", lr);
}

WarmupCosineLr::WarmupCosineLr(WarmupCosineOptions o) : o_(o) {
  GS_CHECK(std::isfinite(o.base_lr) && std::isfinite(o.min_lr) && o.min_lr >= 0 && o.base_lr >= o.min_lr,
           "warmup_cosine schedule: expected finite 0 <= min_lr <= base_lr, got base_lr {}, min_lr {}", o.base_lr,
           o.min_lr);
  GS_CHECK(o.warmup_steps >= 0 && o.total_steps > o.warmup_steps,
           "warmup_cosine schedule: expected 0 <= warmup_steps < total_steps, got warmup_steps {}, total_steps {}",
           o.warmup_steps, o.total_steps);
}

double WarmupCosineLr::lr_at(int64_t t) const {
  if (t < o_.warmup_steps) return o_.base_lr * static_cast<double>(t + 1) / static_cast<double>(o_.warmup_steps);
  if (t >= o_.total_steps) return o_.min_lr;
  const double progress =
      static_cast<double>(t - o_.warmup_steps) / static_cast<double>(o_.total_steps - o_.warmup_steps);
  return o_.min_lr + (o_.base_lr - o_.min_lr) * 0.5 * (1 + std::cos(M_PI * progress));
}

StepLr::StepLr(double base_lr, int64_t step_size, double gamma) : base_(base_lr), gamma_(gamma), step_size_(step_size) {
  GS_CHECK(std::isfinite(base_lr) && base_lr >= 0, "step schedule: expected a finite base_lr >= 0, got {}", base_lr);
  GS_CHECK(step_size > 0, "step schedule: expected step_size > 0, got {}", step_size);
  GS_CHECK(std::isfinite(gamma) && gamma > 0, "step schedule: expected a finite gamma > 0, got {}", gamma);
}

double StepLr::lr_at(int64_t t) const {
  // Repeated multiplication, as torch's StepLR applies gamma once per boundary (pow would differ in
  // the last bit).
  double lr = base_;
  for (int64_t k = 0; k < t / step_size_; ++k) lr *= gamma_;
  return lr;
}

// ---- reduce on plateau

ReduceLrOnPlateau::ReduceLrOnPlateau(PlateauOptions o) : o_(o), lr_(o.base_lr) {
  GS_CHECK(std::isfinite(o.base_lr) && o.base_lr >= 0, "reduce_on_plateau: expected a finite base_lr >= 0, got {}",
           o.base_lr);
  GS_CHECK(o.factor > 0 && o.factor < 1, "reduce_on_plateau: expected 0 < factor < 1, got {}", o.factor);
  GS_CHECK(o.patience >= 0 && o.cooldown >= 0, "reduce_on_plateau: expected patience >= 0 and cooldown >= 0, got {} and {}",
           o.patience, o.cooldown);
  GS_CHECK(o.threshold >= 0 && o.min_lr >= 0 && o.eps >= 0,
           "reduce_on_plateau: expected threshold, min_lr and eps >= 0, got {}, {}, {}", o.threshold, o.min_lr, o.eps);
}

void ReduceLrOnPlateau::step_metric(double metric) {
  ++metrics_seen_;
  // NaN compares false: it never improves.
  if (metric < best_ * (1 - o_.threshold)) {
    best_ = metric;
    num_bad_ = 0;
  } else {
    ++num_bad_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_ = 0;  // bad metrics during cooldown do not count
  }
  if (num_bad_ > o_.patience) {
    const double reduced = std::max(lr_ * o_.factor, o_.min_lr);
    if (lr_ - reduced > o_.eps) lr_ = reduced;
    cooldown_counter_ = o_.cooldown;
    num_bad_ = 0;
  }
}

StateDict ReduceLrOnPlateau::state() const {
  const std::string p = type_name() + ".";
  // best_ is +inf until a metric improves on nothing; a checkpoint holds only finite numbers, so
  // "no best yet" travels as a flag.
  const bool has_best = std::isfinite(best_);
  return {{p + "lr", state_scalar_f64(lr_)},
          {p + "best", state_scalar_f64(has_best ? best_ : 0.0)},
          {p + "has_best", state_scalar_i64(has_best ? 1 : 0)},
          {p + "num_bad", state_scalar_i64(num_bad_)},
          {p + "cooldown_counter", state_scalar_i64(cooldown_counter_)},
          {p + "metrics_seen", state_scalar_i64(metrics_seen_)}};
}

void ReduceLrOnPlateau::load_state(const StateDict& state) {
  const std::string p = type_name() + ".";
  check_scalar_state(state,
                     {{p + "lr", DType::f64},
                      {p + "best", DType::f64},
                      {p + "has_best", DType::i64},
                      {p + "num_bad", DType::i64},
                      {p + "cooldown_counter", DType::i64},
                      {p + "metrics_seen", DType::i64}},
                     type_name());
  const double lr = state.at(p + "lr").item<double>();
  GS_CHECK(std::isfinite(lr) && lr >= 0, "reduce_on_plateau: load_state: 'lr' holds {}, expected a finite value >= 0",
           lr);
  lr_ = lr;
  const double best = state.at(p + "best").item<double>();
  GS_CHECK(std::isfinite(best), "reduce_on_plateau: load_state: 'best' holds {}, expected a finite value", best);
  best_ = state.at(p + "has_best").item<int64_t>() != 0 ? best : std::numeric_limits<double>::infinity();
  num_bad_ = state.at(p + "num_bad").item<int64_t>();
  cooldown_counter_ = state.at(p + "cooldown_counter").item<int64_t>();
  metrics_seen_ = state.at(p + "metrics_seen").item<int64_t>();
}

}  // namespace gs::models
