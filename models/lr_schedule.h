// Learning-rate schedules. A schedule answers lr(): the rate for the next optimizer step. step() is
// called after each optimizer step, step_metric() after each validation (reduce-on-plateau only
// listens to the latter, the others only to the former). State is a StateDict whose keys carry the
// schedule's type ("warmup_cosine.step"), so a checkpoint cannot be loaded into another kind, and
// a resumed run follows the same lr sequence bit for bit.
#pragma once
#include <cstdint>
#include <limits>
#include <string>

#include "models/module.h"

namespace gs::models {

class LrSchedule {
 public:
  virtual ~LrSchedule() = default;
  virtual std::string type_name() const = 0;
  // The rate for the next optimizer step.
  virtual double lr() const = 0;
  // One optimizer step has been taken.
  virtual void step() {}
  // A validation metric (lower is better) is known.
  virtual void step_metric(double /*metric*/) {}
  virtual StateDict state() const = 0;
  // Throws on missing or unexpected keys, or a value of the wrong kind, before changing anything.
  virtual void load_state(const StateDict& state) = 0;
};

// Shared by the step-driven schedules: counts optimizer steps and asks lr_at(t).
class StepCountSchedule : public LrSchedule {
 public:
  double lr() const override { return lr_at(steps_); }
  void step() override { ++steps_; }
  // The rate at optimizer step t (0 for the first step).
  virtual double lr_at(int64_t t) const = 0;
  int64_t steps() const { return steps_; }
  StateDict state() const override;          // "<type>.step" (i64)
  void load_state(const StateDict& state) override;

 private:
  int64_t steps_ = 0;
};

class ConstantLr : public StepCountSchedule {
 public:
  explicit ConstantLr(double lr);
  std::string type_name() const override { return "constant"; }
  double lr_at(int64_t) const override { return lr_; }

 private:
  double lr_;
};

// Linear warmup then cosine decay to min_lr:
//   t < W:      base * (t + 1) / W          (the first step already moves: no wasted step at lr 0)
//   W <= t < T: min + (base - min) * (1 + cos(pi (t - W) / (T - W))) / 2
//   t >= T:     min
// with W = warmup_steps (may be 0) and T = total_steps > W.
struct WarmupCosineOptions {
  double base_lr = 1e-3;
  double min_lr = 0;
  int64_t warmup_steps = 0;
  int64_t total_steps = 1;
};
class WarmupCosineLr : public StepCountSchedule {
 public:
  explicit WarmupCosineLr(WarmupCosineOptions options);
  std::string type_name() const override { return "warmup_cosine"; }
  double lr_at(int64_t t) const override;

 private:
  WarmupCosineOptions o_;
};

// torch.optim.lr_scheduler.StepLR: base * gamma^floor(t / step_size).
class StepLr : public StepCountSchedule {
 public:
  StepLr(double base_lr, int64_t step_size, double gamma);
  std::string type_name() const override { return "step"; }
  double lr_at(int64_t t) const override;

 private:
  double base_, gamma_;
  int64_t step_size_;
};

// torch.optim.lr_scheduler.ReduceLROnPlateau, mode "min", threshold_mode "rel": a metric improves
// when metric < best * (1 - threshold). After more than `patience` metrics without improvement the
// rate becomes max(lr * factor, min_lr) (kept unless it drops by more than eps), then `cooldown`
// metrics are ignored. A NaN metric never improves.
struct PlateauOptions {
  double base_lr = 1e-3;
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  int64_t cooldown = 0;
  double min_lr = 0;
  double eps = 1e-8;
};
class ReduceLrOnPlateau : public LrSchedule {
 public:
  explicit ReduceLrOnPlateau(PlateauOptions options);
  std::string type_name() const override { return "reduce_on_plateau"; }
  double lr() const override { return lr_; }
  void step_metric(double metric) override;
  // "reduce_on_plateau.{lr,best}" (f64) and ".{num_bad,cooldown_counter,metrics_seen}" (i64).
  StateDict state() const override;
  void load_state(const StateDict& state) override;

  double best() const { return best_; }
  int64_t num_bad() const { return num_bad_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }

 private:
  PlateauOptions o_;
  double lr_;
  double best_ = std::numeric_limits<double>::infinity();
  int64_t num_bad_ = 0, cooldown_counter_ = 0, metrics_seen_ = 0;
};

}  // namespace gs::models
