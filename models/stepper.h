// The stepper: ACE's training step for an autoregressive emulator. train_on_batch rolls the model
// forward n steps from batch.input, each prediction fed back as the next input, scores every step
// with the area-weighted MSE against batch.targets, backpropagates the weighted sum, and applies the
// optimizer (after optional clipping) and the learning-rate schedule. predict() is the same rollout
// without a tape.
//
// Variable roles (models/data/variables.h; StepperOptions::layout): the data's channels are
// prognostic | forcing | diagnostic. Step k feeds the model the prognostic state and the forcing of
// the step's input time t_k read from the data (ACE's convention: for k = 0 the batch input's, then
// targets[k - 1]'s); the model predicts the prognostic and diagnostic channels at t_{k+1}, both are
// scored against targets[k], and only the prognostic part is fed back. Missing values in the data
// (NaN after normalisation) are read by the model as 0 (the mean) and left out of the loss
// (step_loss.h); a fed-back prognostic value where the data at its time is missing is set to 0 too.
//
// optimize_last_step_only follows ACE (fme/ace/stepper, TrainStepper._accumulate_loss): the steps
// before the last run under no_grad, so the last step's input is a constant and only the last
// step's loss is backpropagated; the earlier losses are still reported.
// detach_between_steps follows ACE's gradient-accumulation mode: each step's loss is backpropagated
// on its own and the state is detached before it is fed back (memory of one step; no gradient
// through the rollout).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/reducer.h"
#include "engine/random.h"
#include "engine/tensor.h"
#include "models/data/dataset.h"
#include "models/data/variables.h"
#include "models/ensemble_loss.h"
#include "models/step_loss.h"
#include "models/lr_schedule.h"
#include "models/module.h"
#include "models/optim.h"

namespace gs::models {

// training.activation_checkpointing (engine/autograd/checkpoint.h): none; every block of the
// network replayed in backward; or, as ACE's after_n_forward_steps, whole rollout steps k >= after.
struct ActivationCheckpointing {
  enum class Mode { none, blocks, rollout_steps_after };
  Mode mode = Mode::none;
  int64_t after = 0;
};

struct StepperOptions {
  std::vector<double> step_weights = {};  // one per rollout step; empty: every step weight 1
  bool optimize_last_step_only = false;
  bool detach_between_steps = false;
  // The batch is split along B into this many micro-batches (the first B % k get one more sample);
  // micro-batch i's loss is scaled by b_i / B, so the accumulated gradient is the whole batch's.
  int64_t micro_batches = 1;
  double clip_grad_norm = 0;            // > 0: clip the global gradient norm to this
  uint64_t seed = 0;                    // noise keys (stepper_noise_key)
  // The data's channel roles; total() == 0: every channel prognostic (in == out).
  ChannelLayout layout{};
  // fme's StepperConfig.residual_prediction: the model predicts the change of the prognostic
  // channels, which the stepper adds to their input (normalised units); diagnostics are predicted
  // as they are. (SfnoOptions::residual_prediction is torch-harmonics' in-network residual.)
  bool residual_prediction = false;
  // Per output channel (prognostic, then diagnostic): the factor the normalised prediction and
  // target are multiplied by before the squared error (step_loss.h); empty: 1 for every channel.
  std::vector<double> loss_scale = {};
  // Stochastic ensemble training (ensemble_loss.h): every sample is rolled out this many times, each
  // member with its own noise (stepper_noise_key's member) and its own fed-back state, and `loss`
  // scores the members together. 1 member and the MSE alone: the deterministic stepper.
  int64_t ensemble_members = 1;
  LossTerms loss{};
  // A non-finite loss or gradient norm never reaches the parameters. true: throw gs::Error naming
  // the step; false: return a TrainResult with applied == false and the reason.
  bool throw_on_nonfinite = true;
  ActivationCheckpointing activation_checkpointing{};
};

struct TrainResult {
  int64_t step = 0;                 // the stepper's global step this batch was (counted before it)
  std::vector<double> step_losses;  // per rollout step: area-weighted MSE of the whole batch, unweighted
  double loss = 0;                  // the objective that was backpropagated: sum of w_k * step_losses[k]
                                    // over the optimised steps (only the last with optimize_last_step_only)
  double grad_norm = 0;             // global norm before clipping (NaN when the loss was already non-finite)
  double lr = 0;                    // the learning rate the optimizer step used
  bool applied = true;              // false: a non-finite loss or norm; nothing was changed
  std::string report;               // why not applied
};

// The noise key of one forward call during training: a deterministic function of
// (seed, global step, rollout step, ensemble member), so a resumed run draws the noise the
// uninterrupted run would have drawn (member 0's key is the one a deterministic run draws). Every micro-batch and data-parallel replica uses the step's key with the global index
// of its first sample (ForwardContext::first_sample), so a split batch draws the whole batch's noise.
RandomKey stepper_noise_key(uint64_t seed, int64_t global_step, int64_t rollout_step, int64_t member = 0);
// The key predict() uses for step k of rollout `rollout_id`: never equal to a training key.
RandomKey stepper_predict_key(uint64_t seed, uint64_t rollout_id, int64_t rollout_step, int64_t member = 0);

// The predicted channels (output_channel_indices) of data (..., C, H, W): what the model's output is
// scored against.
Tensor output_channels(const Tensor& data, const ChannelLayout& l);

class Stepper {
 public:
  // area_weights: (H) non-negative quadrature / cos-lat weights of the grid (normalised inside the
  // loss). The schedule is optional; when given, it sets the optimizer's lr before every step.
  Stepper(std::shared_ptr<Model> model, std::shared_ptr<Optimizer> optimizer, std::vector<double> area_weights,
          StepperOptions options = {}, std::shared_ptr<LrSchedule> schedule = nullptr);

  // One optimizer step on `batch` ({input (B, C, H, W), targets (B, n, C, H, W)}, normalised).
  TrainResult train_on_batch(const Batch& batch);
  // The gradient part of train_on_batch: clears every .grad of the model, rolls out, backpropagates
  // and fills step_losses, loss and grad_norm; changes no weight and no counter. applied is false
  // when the loss or the norm is non-finite (never throws for that).
  TrainResult compute_gradients(const Batch& batch);

  // Rollout of n_steps without a tape (inference mode): input (B, C, H, W), the data's channels at
  // the first time -> (B, n_steps, P + D, H, W), every step's prognostic and diagnostic channels.
  // `later` (B, >= n_steps - 1, C, H, W), the data at the times after the input, gives the forcing
  // of steps 1 .. n_steps - 1 (and masks the fed-back state where it has missing values); it may be
  // undefined when the data has no forcing channel. Keys: stepper_predict_key(seed, rollout_id, k),
  // noise from global sample first_sample (-1: data_rank * B, for replicas that predict equal
  // shares of a global batch).
  // `member`: the ensemble member whose noise to draw (stepper_predict_key's member; 0 for a
  // deterministic forecast).
  Tensor predict(const Tensor& input, int64_t n_steps, uint64_t rollout_id = 0, int64_t first_sample = -1,
                 const Tensor& later = {}, int64_t member = 0);
  // One forecast step in inference mode: the model's prediction (B, P + D, H, W) from the
  // prognostic state (B, P, H, W) and the forcing at its time (B, F, H, W; undefined when F = 0),
  // with predict()'s keys for rollout step `step`. Missing values of the forcing (data) are read as
  // 0; the state is taken as it is (a state read from data: fill_missing it first; a fed-back
  // prediction that is not finite must stay so, to be seen).
  Tensor forecast_step(const Tensor& prognostic, const Tensor& forcing, int64_t step, uint64_t rollout_id,
                       int64_t first_sample, int64_t member = 0);
  // The channel layout for data of `channels` channels (the options' layout, checked against it).
  ChannelLayout layout(int64_t channels) const;

  int64_t global_step() const { return global_step_; }
  // "stepper.global_step", "optimizer.<key>" and "schedule.<key>": everything but the model's
  // weights (Module::state_dict) that a bitwise resume needs.
  StateDict training_state() const;
  // Validates the whole state before changing anything.
  void load_training_state(const StateDict& state);

  // Data-parallel and spatially parallel training over `grid` (on a grid that splits the sphere the
  // model and the batches are this rank's tiles, and the losses are the whole sphere's):
  // gradients go through a GradientReducer (one reduction per optimizer step: the stepper tells it
  // which backward pass is the step's last), the reported losses are averaged over the data group,
  // the gradient norm (clipping, reports) is the global one, a non-finite loss on any rank skips
  // the step on every rank, and with the replica checker on (GS_CHECK_REPLICAS=1) the parameters
  // are compared across their groups after every optimizer step. On a grid with an ensemble axis
  // (E > 1) the ensemble members are split over it (split_block: uneven splits allowed, at least
  // one member per rank): each ensemble rank rolls out its members and backpropagates its part of
  // the loss (ensemble_step_loss), and the reducer sums the parts over the ensemble ranks. Each rank passes its own share of
  // the global batch to train_on_batch; shares must be equal (the reducer averages replicas): unequal
  // ones are refused on every rank with an error naming the sizes.
  void set_distributed(const dist::ProcessGrid& grid, dist::ReducerOptions options = {});
  const dist::GradientReducer* reducer() const { return reducer_.get(); }

  Model& model() { return *model_; }
  Optimizer& optimizer() { return *optimizer_; }
  LrSchedule* schedule() { return schedule_.get(); }
  const StepperOptions& options() const { return o_; }

 private:
  void check_batch(const Batch& batch) const;
  const Tensor& area_weights(DType dtype, Device device);
  // Rolls micro-batch `mb` (B_mb samples) forward, backpropagates its share, adds its losses.
  // `masks`: per rollout step the global batch's mask weights (empty: no missing values).
  void run_micro_batch(const Tensor& input, const Tensor& targets, int64_t mb, int64_t first_sample, bool last_mb,
                       double share, const std::vector<Tensor>& masks, double global_batch, TrainResult& r);
  // The model's input at rollout step k from the prognostic state and the data (step_input and
  // targets as in the batch), and the output channels of a state of the data.
  Tensor model_input(const Tensor& state, const Tensor& data_at_input_time, const ChannelLayout& l) const;
  // The model's prediction from its input x (P + F channels) with the stepper's residual, checked
  // to be (B, P + D, H, W) in x's dtype; `what` names the caller in the error.
  Tensor run_model(const Tensor& x, const ForwardContext& ctx, const ChannelLayout& l, const char* what);
  StepLossSpec loss_spec(DType dtype, Device device) const;
  // When the batch has missing values on any rank (every rank takes the same decision): per rollout
  // step, the global batch's mask weights (step_loss.h), summed over the data replicas; else empty.
  std::vector<Tensor> mask_weights(const Batch& batch);
  void before_backward(bool last) const;

  std::shared_ptr<Model> model_;
  std::shared_ptr<Optimizer> optimizer_;
  std::shared_ptr<LrSchedule> schedule_;
  std::vector<double> area_weights_;
  Tensor area_f32_, area_f64_;
  StepperOptions o_;
  int64_t global_step_ = 0;
  // Set by set_distributed.
  dist::ProcessGrid grid_;
  std::unique_ptr<dist::GradientReducer> reducer_;
  std::vector<dist::ReducedParameter> reduced_params_;
};

}  // namespace gs::models
