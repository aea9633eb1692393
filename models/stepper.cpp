#include "models/stepper.h"

#include "distributed/sphere_blocks.h"
#include "engine/autograd/checkpoint.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/shape_ops.h"
#include "ops/sphere/sfno_blocks.h"
#include "ops/view.h"

namespace gs::models {
namespace {

// splitmix64's finaliser: a bijective mix, so distinct inputs give distinct streams.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Chained mix of a domain tag and three counters into one stream id.
uint64_t noise_stream(uint64_t tag, uint64_t a, uint64_t b, uint64_t c) {
  return mix64(mix64(mix64(mix64(tag) ^ a) ^ b) ^ c);
}
constexpr uint64_t kTrainTag = 0x747261696eULL;    // "train"
constexpr uint64_t kPredictTag = 0x70726564ULL;    // "pred"

// Keys of `state` that start with `prefix`, with the prefix removed.
StateDict with_prefix_removed(const StateDict& state, const std::string& prefix) {
  StateDict out;
  for (auto& [key, t] : state)
    if (key.compare(0, prefix.size(), prefix) == 0) out[key.substr(prefix.size())] = t;
  return out;
}

}  // namespace

RandomKey stepper_noise_key(uint64_t seed, int64_t global_step, int64_t rollout_step, int64_t member) {
  return {seed, noise_stream(kTrainTag, static_cast<uint64_t>(global_step), static_cast<uint64_t>(member),
                             static_cast<uint64_t>(rollout_step))};
}

RandomKey stepper_predict_key(uint64_t seed, uint64_t rollout_id, int64_t rollout_step, int64_t member) {
  return {seed, noise_stream(kPredictTag, rollout_id, static_cast<uint64_t>(member), static_cast<uint64_t>(rollout_step))};
}

Stepper::Stepper(std::shared_ptr<Model> model, std::shared_ptr<Optimizer> optimizer, std::vector<double> area_weights,
                 StepperOptions options, std::shared_ptr<LrSchedule> schedule)
    : model_(std::move(model)),
      optimizer_(std::move(optimizer)),
      schedule_(std::move(schedule)),
      area_weights_(std::move(area_weights)),
      o_(std::move(options)) {
  GS_CHECK(model_ != nullptr && optimizer_ != nullptr, "Stepper: expected a model and an optimizer, got a null one");
  double sum = 0;
  for (double w : area_weights_) {
    GS_CHECK(std::isfinite(w) && w >= 0, "Stepper: area weights must be finite and >= 0, got {}", w);
    sum += w;
  }
  GS_CHECK(sum > 0, "Stepper: expected area weights (one per latitude) with a positive sum, got {} weights summing to {}",
           area_weights_.size(), sum);
  GS_CHECK(o_.micro_batches >= 1, "Stepper: expected micro_batches >= 1, got {}", o_.micro_batches);
  GS_CHECK(!(o_.clip_grad_norm < 0) && !std::isnan(o_.clip_grad_norm),
           "Stepper: expected clip_grad_norm >= 0 (0: no clipping), got {}", o_.clip_grad_norm);
  for (double w : o_.step_weights)
    GS_CHECK(std::isfinite(w) && w >= 0, "Stepper: step weights must be finite and >= 0, got {}", w);
  for (double w : o_.loss_scale)
    GS_CHECK(std::isfinite(w) && w >= 0, "Stepper: loss scales must be finite and >= 0, got {}", w);
  GS_CHECK(o_.layout.total() == 0 || o_.layout.model_outputs() > 0,
           "Stepper: expected at least one prognostic or diagnostic channel, got only {} forcing channel(s)",
           o_.layout.forcing);
  GS_CHECK(o_.loss_scale.empty() || o_.layout.total() == 0 ||
               static_cast<int64_t>(o_.loss_scale.size()) == o_.layout.model_outputs(),
           "Stepper: expected one loss scale per output channel ({} prognostic + {} diagnostic), got {}",
           o_.layout.prognostic, o_.layout.diagnostic, o_.loss_scale.size());
  o_.loss.check(o_.ensemble_members);
}

ChannelLayout Stepper::layout(int64_t channels) const {
  if (o_.layout.total() == 0) return ChannelLayout::all_prognostic(channels);
  GS_CHECK(o_.layout.total() == channels,
           "Stepper: the data has {} channels but the stepper's layout has {} ({} prognostic, {} forcing, {} "
           "diagnostic)",
           channels, o_.layout.total(), o_.layout.prognostic, o_.layout.forcing, o_.layout.diagnostic);
  return o_.layout;
}

Tensor Stepper::model_input(const Tensor& state, const Tensor& data, const ChannelLayout& l) const {
  if (l.forcing == 0) return state;
  return cat({state, narrow(data, 1, l.prognostic, l.forcing)}, 1);
}

Tensor output_channels(const Tensor& data, const ChannelLayout& l) {
  const int64_t dim = data.dim() - 3;  // (..., C, H, W)
  if (l.forcing == 0) return l.diagnostic == 0 ? data : narrow(data, dim, 0, l.model_outputs());
  if (l.diagnostic == 0) return narrow(data, dim, 0, l.prognostic);
  return cat({narrow(data, dim, 0, l.prognostic), narrow(data, dim, l.model_inputs(), l.diagnostic)}, dim);
}

StepLossSpec Stepper::loss_spec(DType dtype, Device device) const {
  StepLossSpec spec{area_weights_, grid_.spatially_split() ? model_->grid_shape()[1] : 0, {}};
  if (!o_.loss_scale.empty()) {
    spec.scale = cast_copy(from_vector(o_.loss_scale), dtype);
    if (!device.is_cpu()) spec.scale = to(spec.scale, device);
  }
  return spec;
}

void Stepper::check_batch(const Batch& b) const {
  GS_CHECK(b.input.defined() && b.targets.defined(), "Stepper: the batch needs an input and targets");
  GS_CHECK(b.input.dim() == 4, "Stepper: expected input (B, C, H, W), got {}", b.input.meta_str());
  GS_CHECK(b.targets.dim() == 5, "Stepper: expected targets (B, n, C, H, W), got {}", b.targets.meta_str());
  const Shape& in = b.input.sizes();
  const Shape& tg = b.targets.sizes();
  GS_CHECK(tg[0] == in[0] && tg[2] == in[1] && tg[3] == in[2] && tg[4] == in[3] && tg[1] >= 1,
           "Stepper: targets must be (B, n >= 1, C, H, W) with the input's (B, C, H, W) = {}, got {}", shape_str(in),
           shape_str(tg));
  GS_CHECK(b.input.dtype() == b.targets.dtype() && is_floating(b.input.dtype()),
           "Stepper: expected input and targets of one real dtype, got {} and {}", dtype_name(b.input.dtype()),
           dtype_name(b.targets.dtype()));
  const int64_t rows = grid_.local_lat(static_cast<int64_t>(area_weights_.size())).count;
  GS_CHECK(in[2] == rows,
           "Stepper: the grid has {} latitudes but the stepper has {} area weights{}", in[2], area_weights_.size(),
           grid_.spatially_split() ? fmt::format(" (this rank's tile of them: {} rows)", rows) : std::string());
  GS_CHECK(o_.step_weights.empty() || static_cast<int64_t>(o_.step_weights.size()) == tg[1],
           "Stepper: {} step weights for a rollout of {} steps", o_.step_weights.size(), tg[1]);
  GS_CHECK(o_.micro_batches <= in[0], "Stepper: cannot split a batch of {} into {} micro-batches", in[0],
           o_.micro_batches);
}

const Tensor& Stepper::area_weights(DType dtype, Device device) {
  Tensor& cached = dtype == DType::f32 ? area_f32_ : area_f64_;
  if (!cached.defined() || cached.device() != device) {
    cached = cast_copy(from_vector(area_weights_), dtype);
    if (!device.is_cpu()) cached = to(cached, device);
  }
  return cached;
}

void Stepper::set_distributed(const dist::ProcessGrid& grid, dist::ReducerOptions options) {
  GS_CHECK(!reducer_, "Stepper::set_distributed: already distributed over {}", grid_.str());
  if (grid.spatially_split()) {
    const auto shape = model_->grid_shape();
    GS_CHECK(shape[0] > 0 && shape[1] > 0,
             "Stepper::set_distributed: the grid {} splits the sphere, but the model does not say the shape of the "
             "whole sphere it maps (Model::grid_shape), which the losses need",
             grid.str());
    GS_CHECK(shape[0] == static_cast<int64_t>(area_weights_.size()),
             "Stepper::set_distributed: the model maps a {}x{} sphere but the stepper has {} area weights", shape[0],
             shape[1], area_weights_.size());
  }
  member_share(o_.ensemble_members, grid);  // an ensemble axis needs a member on every rank
  grid_ = grid;
  reduced_params_.clear();
  for (const auto& p : model_->named_parameters()) reduced_params_.push_back({p.name, p.tensor, p.distribution});
  reducer_ = std::make_unique<dist::GradientReducer>(grid_, reduced_params_, options);
}


void Stepper::before_backward(bool last) const {
  if (reducer_) reducer_->prepare_for_backward(last);
}

void Stepper::run_micro_batch(const Tensor& input, const Tensor& targets, int64_t mb, int64_t first_sample, bool last_mb,
                              double share, const std::vector<Tensor>& masks, double global_batch, TrainResult& r) {
  const int64_t n = targets.size(1);
  const Tensor& aw = area_weights(input.dtype(), input.device());
  const ChannelLayout l = layout(input.size(1));
  const bool masked = !masks.empty();
  const StepLossSpec spec = loss_spec(input.dtype(), input.device());
  const Tensor data0 = masked ? fill_missing(input) : input;  // (b, C, H, W)
  const Tensor state0 = l.model_outputs() == l.total() ? data0 : narrow(data0, 1, 0, l.prognostic);
  // This rank's members (all of them unless the grid's ensemble axis splits them).
  const MemberShare members = member_share(o_.ensemble_members, grid_);
  const int64_t first_member = members.start;
  const int64_t my_members = members.split() ? members.count : o_.ensemble_members;
  std::vector<Tensor> states(static_cast<size_t>(my_members), state0);  // fed back, one per member
  // The parameters enter through the reducer's nodes (tape mode), so backward reduces them; a
  // data replica backpropagates its part of the global loss (its mean times loss_scale()).
  const dist::ReducedForward routed = reducer_ ? reducer_->forward_scope() : dist::ReducedForward();
  const double replica_scale = reducer_ ? reducer_->loss_scale() : 1.0;
  Tensor objective;  // the weighted losses still to backpropagate (0-dim)
  for (int64_t k = 0; k < n; ++k) {
    const bool optimised = o_.optimize_last_step_only ? k == n - 1 : true;
    const Tensor target = output_channels(select(targets, 1, k), l);  // (b, P + D, H, W) at t_{k+1}
    std::vector<Tensor> preds;
    Tensor loss;
    {
      GradModeGuard grad_mode(optimised);
      // The forcing at the step's input time t_k: the batch input's, then the targets' before.
      const Tensor forcing_data = k == 0 ? data0 : fill_missing(select(targets, 1, k - 1));
      for (int64_t m = 0; m < my_members; ++m) {
        ForwardContext ctx;
        ctx.noise_key = stepper_noise_key(o_.seed, global_step_, k, first_member + m);
        ctx.first_sample = first_sample;
        const auto& ac = o_.activation_checkpointing;
        ctx.checkpoint_blocks = ac.mode == ActivationCheckpointing::Mode::blocks;
        const Tensor x = model_input(states[m], forcing_data, l);
        if (ac.mode == ActivationCheckpointing::Mode::rollout_steps_after && k >= ac.after) {
          // ACE's after_n_forward_steps: the whole step replayed in backward (after this loop has
          // ended: the replay owns copies of what it reads).
          preds.push_back(checkpoint([this, ctx, l](const std::vector<Tensor>& in) {
            return std::vector<Tensor>{run_model(in[0], ctx, l, "Stepper")};
          }, {x})[0]);
        } else {
          preds.push_back(run_model(x, ctx, l, "Stepper"));  // (b, P + D, H, W)
        }
      }
      StepMask mask;
      if (masked) mask = {masks[static_cast<size_t>(k)], global_batch / static_cast<double>(input.size(0))};
      // On a split sphere the loss is the whole sphere's, replicated over the spatial group.
      // Split members: this rank's part of the loss (the parts sum over the ensemble group).
      loss = ensemble_step_loss(preds, target, o_.loss, spec, aw, grid_, masked ? &mask : nullptr, members);
    }
    const double value = loss.item<double>();
    r.step_losses[k] += share * value;
    if (dist::any_rank(grid_, !std::isfinite(value))) {
      r.applied = false;
      r.report = std::isfinite(value)
                     ? fmt::format("step {}: the loss of rollout step {} (micro-batch {}) is not finite on another "
                                   "rank; the optimizer step was not applied on any rank",
                                   global_step_, k, mb)
                     : fmt::format("step {}: the loss of rollout step {} (micro-batch {}) is {}; the optimizer step "
                                   "was not applied",
                                   global_step_, k, mb, value);
      return;  // nothing of this micro-batch is backpropagated, on any rank
    }
    if (optimised) {
      const double w = (o_.step_weights.empty() ? 1.0 : o_.step_weights[k]) * share * replica_scale;
      Tensor term = w == 1.0 ? loss : mul(loss, w);
      if (o_.detach_between_steps) {
        before_backward(last_mb && k == n - 1);
        term.backward();
        for (Tensor& p : preds) p = p.detach();
      } else {
        objective = objective.defined() ? add(objective, term) : term;
      }
    }
    // Only the prognostic part goes on; where the data at its time is missing it reads 0, as the input did.
    for (size_t m = 0; m < preds.size(); ++m) {
      Tensor& state = states[m];
      state = l.diagnostic == 0 ? preds[m] : narrow(preds[m], 1, 0, l.prognostic);
      if (masked)
        state = where(present(narrow(target, 1, 0, l.prognostic)), state, zeros({}, state.dtype(), state.device()));
    }
  }
  if (objective.defined()) {
    before_backward(last_mb);
    objective.backward();
  }
}

std::vector<Tensor> Stepper::mask_weights(const Batch& batch) {
  if (!dist::any_rank(grid_, has_missing(batch.input) || has_missing(batch.targets))) return {};
  NoGradGuard no_grad;
  const ChannelLayout l = layout(batch.input.size(1));
  const StepLossSpec spec = loss_spec(batch.input.dtype(), batch.input.device());
  const Tensor& aw = area_weights(batch.input.dtype(), batch.input.device());
  std::vector<Tensor> out;
  for (int64_t k = 0; k < batch.targets.size(1); ++k) {
    Tensor w = to(local_mask_weights(output_channels(select(batch.targets, 1, k), l), spec, aw, grid_), DType::f64);
    if (reducer_ && grid_.data_size() > 1) {
      w = contiguous_copy(w);
      grid_.comm(dist::Group::data)->all_reduce(w, dist::ReduceOp::sum);
    }
    out.push_back(w);
  }
  return out;
}

TrainResult Stepper::compute_gradients(const Batch& batch) {
  check_batch(batch);
  const int64_t B = batch.input.size(0), n = batch.targets.size(1), k = o_.micro_batches;
  if (reducer_ && grid_.data_size() > 1) {
    // The replicas count 1/D each (the reducer's mean over data), which is the global batch's mean only for equal shares:
    // refuse unequal ones on every rank alike (every rank sees the same extremes).
    Tensor lo = from_vector(std::vector<int64_t>{B}), hi = from_vector(std::vector<int64_t>{B});
    grid_.comm(dist::Group::world)->all_reduce(lo, dist::ReduceOp::min);
    grid_.comm(dist::Group::world)->all_reduce(hi, dist::ReduceOp::max);
    GS_CHECK(lo.item<int64_t>() == hi.item<int64_t>(),
             "Stepper: the data-parallel replicas hold batches of {} to {} samples (this rank: {}); the gradient "
             "reducer averages replicas, so every replica needs an equal share of the global batch (a global batch "
             "divisible by the data size {})",
             lo.item<int64_t>(), hi.item<int64_t>(), B, grid_.data_size());
  }
  model_->zero_grad();
  optimizer_->zero_grad();
  if (reducer_) reducer_->discard_pending();  // a skipped step's earlier micro-batches
  TrainResult r;
  r.step = global_step_;
  r.step_losses.assign(n, 0.0);
  r.lr = schedule_ ? schedule_->lr() : optimizer_->lr();
  const std::vector<Tensor> masks = mask_weights(batch);
  // Uneven split as the process grid's: the first B % k micro-batches get one more sample.
  int64_t start = 0;
  for (int64_t mb = 0; mb < k && r.applied; ++mb) {
    const int64_t len = B / k + (mb < B % k ? 1 : 0);
    // Shares are equal (checked above), so this replica's samples start at data_rank * B.
    run_micro_batch(narrow(batch.input, 0, start, len), narrow(batch.targets, 0, start, len), mb,
                    grid_.data_rank() * B + start, mb == k - 1, static_cast<double>(len) / static_cast<double>(B),
                    masks, static_cast<double>(B * grid_.data_size()), r);
    start += len;
  }
  if (r.applied && reducer_ && grid_.data_size() * grid_.ensemble_size() > 1) {
    // Each replica's losses are the mean over its share of the batch: the global batch's are their
    // mean over the data shards, of the sum over the ensemble ranks' parts (every rank agreed on
    // `applied`, so every rank takes part).
    Tensor losses = from_vector(r.step_losses);
    grid_.comm(dist::Group::replicas)->all_reduce(losses, dist::ReduceOp::sum);
    r.step_losses = losses.to_vector<double>();
    for (auto& v : r.step_losses) v /= static_cast<double>(grid_.data_size());
  }
  for (int64_t s = 0; s < n; ++s)
    if (!o_.optimize_last_step_only || s == n - 1)
      r.loss += (o_.step_weights.empty() ? 1.0 : o_.step_weights[s]) * r.step_losses[s];
  if (!r.applied) {
    r.grad_norm = std::numeric_limits<double>::quiet_NaN();
    model_->zero_grad();
    optimizer_->zero_grad();
    return r;
  }
  r.grad_norm = reducer_ ? dist::global_grad_norm(grid_, reduced_params_) : grad_norm(model_->parameters());
  if (!std::isfinite(r.grad_norm)) {
    r.applied = false;
    r.report = fmt::format("step {}: the gradient norm is {} (the losses were finite: a NaN or Inf arose in backward; "
                           "anomaly mode names the op); the optimizer step was not applied",
                           global_step_, r.grad_norm);
    model_->zero_grad();
    optimizer_->zero_grad();
  }
  return r;
}

TrainResult Stepper::train_on_batch(const Batch& batch) {
  TrainResult r = compute_gradients(batch);
  if (!r.applied) {
    GS_CHECK(!o_.throw_on_nonfinite, "Stepper: {}", r.report);
    return r;
  }
  // clip_grad_norm's rule, reusing the norm already computed.
  if (o_.clip_grad_norm > 0) clip_grads_to_norm(model_->parameters(), r.grad_norm, o_.clip_grad_norm);
  if (schedule_) optimizer_->set_lr(schedule_->lr());
  r.lr = optimizer_->lr();
  optimizer_->step();
  if (reducer_ && dist::check_replicas_enabled()) dist::check_parameters_replicated(grid_, reduced_params_);
  if (schedule_) schedule_->step();
  ++global_step_;
  return r;
}

Tensor Stepper::run_model(const Tensor& x, const ForwardContext& ctx, const ChannelLayout& l, const char* what) {
  Tensor pred = model_->forward(x, ctx);
  GS_CHECK(pred.defined() && pred.dim() == 4 && pred.size(0) == x.size(0) && pred.size(1) == l.model_outputs() &&
               pred.size(2) == x.size(2) && pred.size(3) == x.size(3) && pred.dtype() == x.dtype(),
           "{}: the model must map its input {} ({} prognostic + {} forcing channels) to a prediction of {} channels ({} "
           "prognostic + {} diagnostic) on the same grid and dtype, got {}",
           what, x.meta_str(), l.prognostic, l.forcing, l.model_outputs(), l.prognostic, l.diagnostic, pred.meta_str());
  if (!o_.residual_prediction) return pred;
  const Tensor change = add(narrow(pred, 1, 0, l.prognostic), narrow(x, 1, 0, l.prognostic));
  return l.diagnostic == 0 ? change : cat({change, narrow(pred, 1, l.prognostic, l.diagnostic)}, 1);
}

Tensor Stepper::forecast_step(const Tensor& prognostic, const Tensor& forcing, int64_t step, uint64_t rollout_id,
                              int64_t first_sample, int64_t member) {
  GS_CHECK(prognostic.defined() && prognostic.dim() == 4, "Stepper::forecast_step: expected a state (B, P, H, W), got {}",
           prognostic.meta_str());
  GS_CHECK(!forcing.defined() || (forcing.dim() == 4 && forcing.size(0) == prognostic.size(0)),
           "Stepper::forecast_step: expected the forcing (B, F, H, W) of the state's B = {} samples, got {}",
           prognostic.size(0), forcing.meta_str());
  InferenceModeGuard inference;
  ForwardContext ctx;
  ctx.noise_key = stepper_predict_key(o_.seed, rollout_id, step, member);
  ctx.first_sample = first_sample >= 0 ? first_sample : grid_.data_rank() * prognostic.size(0);
  const Tensor x = forcing.defined() ? cat({prognostic, fill_missing(forcing)}, 1) : prognostic;
  const ChannelLayout l = o_.layout.total() == 0 ? ChannelLayout::all_prognostic(prognostic.size(1)) : o_.layout;
  GS_CHECK(prognostic.size(1) == l.prognostic && (forcing.defined() ? forcing.size(1) : 0) == l.forcing,
           "Stepper::forecast_step: expected {} prognostic and {} forcing channels, got {} and {}", l.prognostic,
           l.forcing, prognostic.size(1), forcing.defined() ? forcing.size(1) : 0);
  return run_model(x, ctx, l, "Stepper::forecast_step");
}

Tensor Stepper::predict(const Tensor& input, int64_t n_steps, uint64_t rollout_id, int64_t first_sample,
                        const Tensor& later, int64_t member) {
  GS_CHECK(input.defined() && input.dim() == 4, "Stepper::predict: expected input (B, C, H, W), got {}",
           input.meta_str());
  GS_CHECK(n_steps >= 1, "Stepper::predict: expected n_steps >= 1, got {}", n_steps);
  const ChannelLayout l = layout(input.size(1));
  GS_CHECK(l.forcing == 0 || n_steps == 1 ||
               (later.defined() && later.dim() == 5 && later.size(0) == input.size(0) && later.size(1) >= n_steps - 1 &&
                later.size(2) == input.size(1)),
           "Stepper::predict: {} forcing channel(s) need the data after the input, (B, >= {}, C, H, W) = ({}, >= {}, {}, "
           "...), to read the forcing of every step; got {}",
           l.forcing, n_steps - 1, input.size(0), n_steps - 1, input.size(1), later.defined() ? later.meta_str() : "none");
  InferenceModeGuard inference;
  const Shape& s = input.sizes();
  Tensor out = empty({s[0], n_steps, l.model_outputs(), s[2], s[3]}, input.dtype(), input.device());
  Tensor state = fill_missing(narrow(input, 1, 0, l.prognostic));  // data: missing values read as 0
  for (int64_t k = 0; k < n_steps; ++k) {
    // The forcing of the data at the step's input time.
    const Tensor forcing =
        l.forcing > 0 ? narrow(k == 0 ? input : select(later, 1, k - 1), 1, l.prognostic, l.forcing) : Tensor();
    Tensor pred = forecast_step(state, forcing, k, rollout_id, first_sample, member);  // shape checked by run_model
    copy_values(select(out, 1, k), pred);
    state = l.diagnostic == 0 ? pred : narrow(pred, 1, 0, l.prognostic);
    // Where the data at the state's time is missing, the state reads 0 (the mean), as in training.
    if (later.defined() && k < later.size(1)) {
      const Tensor truth = narrow(select(later, 1, k), 1, 0, l.prognostic);
      state = where(present(truth), state, zeros({}, state.dtype(), state.device()));
    }
  }
  return out;
}

StateDict Stepper::training_state() const {
  StateDict out;
  out["stepper.global_step"] = state_scalar_i64(global_step_);
  for (auto& [key, t] : optimizer_->state()) out["optimizer." + key] = t;
  if (schedule_)
    for (auto& [key, t] : schedule_->state()) out["schedule." + key] = t;
  return out;
}

void Stepper::load_training_state(const StateDict& state) {
  std::vector<std::string> unexpected;
  for (auto& [key, t] : state)
    if (key != "stepper.global_step" && key.rfind("optimizer.", 0) != 0 && (!schedule_ || key.rfind("schedule.", 0) != 0))
      unexpected.push_back(key);
  GS_CHECK(unexpected.empty(), "Stepper::load_training_state: unexpected keys [{}]{}", fmt::join(unexpected, ", "),
           schedule_ ? "" : " (this stepper has no learning-rate schedule)");
  auto it = state.find("stepper.global_step");
  GS_CHECK(it != state.end(), "Stepper::load_training_state: missing key 'stepper.global_step'");
  GS_CHECK(it->second.defined() && it->second.numel() == 1 && it->second.dtype() == DType::i64,
           "Stepper::load_training_state: 'stepper.global_step' must be a one-element i64 tensor, got {}",
           it->second.defined() ? it->second.meta_str() : std::string("an undefined tensor"));
  const int64_t step = it->second.item<int64_t>();
  GS_CHECK(step >= 0, "Stepper::load_training_state: 'stepper.global_step' holds {}, expected >= 0", step);
  // Each part validates before it writes. The schedule goes first: its state is a few scalars, so
  // putting it back when the optimizer refuses its part costs nothing (a copy of the optimizer's
  // moments would cost twice the model's size).
  StateDict schedule_before;
  if (schedule_) {
    schedule_before = schedule_->state();
    schedule_->load_state(with_prefix_removed(state, "schedule."));
  }
  try {
    optimizer_->load_state(with_prefix_removed(state, "optimizer."));
  } catch (...) {
    if (schedule_) schedule_->load_state(schedule_before);
    throw;
  }
  global_step_ = step;
}

}  // namespace gs::models
