// Optimizers (SGD, Adam, AdamW) and global-norm gradient clipping, with PyTorch's update rules.
// A step is an in-place write under no_grad: every written parameter's version counter bumps
// (DESIGN.md), so a graph that saved a parameter before the step refuses to backward through it.
// State is a StateDict keyed by parameter name, so a checkpoint resumes bit for bit.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "models/module.h"

namespace gs::models {

// Names a bare parameter list "0", "1", ... (PyTorch's integer ids) for optimizer state keys.
std::vector<NamedParameter> unnamed_parameters(const std::vector<Tensor>& params);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string type_name() const = 0;

  // One update of every parameter that has a .grad; the others are skipped (their step count
  // does not advance, as PyTorch's per-parameter "step"). Runs under no_grad.
  void step();
  // Drops every parameter's .grad (PyTorch's set_to_none=True).
  void zero_grad();

  double lr() const { return lr_; }
  void set_lr(double lr);
  const std::vector<NamedParameter>& params() const { return params_; }
  // Updates applied to parameter i so far.
  int64_t step_count(size_t i) const;

  // A snapshot (copies, not aliases): "lr" (f64, 0-dim), and per parameter "step.<name>" (i64, 0-dim)
  // plus "<buffer>.<name>" for each state buffer of the algorithm (buffer_names()).
  StateDict state() const;
  // Checks every key, shape and dtype before writing anything: a mismatched state (another model,
  // another algorithm, amsgrad on / off) throws, listing missing and unexpected keys, and leaves the
  // optimizer untouched.
  void load_state(const StateDict& state);
  const std::vector<std::string>& buffer_names() const { return buffer_names_; }

 protected:
  // Every parameter must be a distinct leaf with a floating or complex dtype, and have a unique
  // non-empty name. One zero-filled buffer of the parameter's shape, dtype and device per name in
  // `buffer_names`, allocated now, so the state's keys never depend on which steps have happened.
  Optimizer(std::vector<NamedParameter> params, double lr, std::vector<std::string> buffer_names);

  // Writes the update of parameter i. `param` and `grad` are contiguous, same shape and dtype;
  // `bufs` are its state buffers (contiguous); `step` is its step count including this one.
  // A complex tensor is updated as its interleaved real and imaginary parts (torch's view_as_real).
  virtual void update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& bufs, int64_t step) = 0;
  // The same update written with in-place tensor ops on the real views, for parameters on CUDA
  // (ops/composite_path.h: also on the CPU in tests, against update()).
  virtual void update_composite(const Tensor& param, const Tensor& grad, std::vector<Tensor>& bufs,
                                int64_t step) = 0;

 private:
  std::vector<NamedParameter> params_;
  double lr_;
  std::vector<std::string> buffer_names_;
  std::vector<int64_t> steps_;               // per parameter
  std::vector<std::vector<Tensor>> buffers_;  // per parameter, one per buffer name
};

// torch.optim.SGD: d = g + wd p; with momentum, buf = d on the first step, then
// buf = momentum buf + (1 - dampening) d; d = nesterov ? d + momentum buf : buf; p -= lr d.
struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;  // needs momentum > 0 and dampening == 0
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<NamedParameter> params, SGDOptions options);
  std::string type_name() const override { return "SGD"; }
  const SGDOptions& options() const { return o_; }

 protected:
  void update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& bufs, int64_t step) override;
  void update_composite(const Tensor& param, const Tensor& grad, std::vector<Tensor>& bufs, int64_t step) override;

 private:
  SGDOptions o_;
};

// torch.optim.Adam / AdamW at step t: (Adam) g += wd p; (AdamW) p *= 1 - lr wd;
// m = lerp(m, g, 1 - beta1); v = beta2 v + (1 - beta2) g^2; (amsgrad) vmax = max(vmax, v), used for v;
// p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps). One fused loop per parameter.
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<NamedParameter> params, AdamOptions options = {});
  std::string type_name() const override { return decoupled_ ? "AdamW" : "Adam"; }
  const AdamOptions& options() const { return o_; }

 protected:
  Adam(std::vector<NamedParameter> params, AdamOptions options, bool decoupled_weight_decay);
  void update(const Tensor& param, const Tensor& grad, std::vector<Tensor>& bufs, int64_t step) override;
  void update_composite(const Tensor& param, const Tensor& grad, std::vector<Tensor>& bufs, int64_t step) override;

 private:
  AdamOptions o_;
  bool decoupled_;
};

// Decoupled weight decay (Loshchilov & Hutter); torch's default weight_decay for AdamW is 1e-2.
class AdamW : public Adam {
 public:
  AdamW(std::vector<NamedParameter> params, AdamOptions options = AdamOptions{.weight_decay = 1e-2});
};

// Global 2-norm of every defined .grad of `params` (complex: |z|^2 per element), accumulated in f64
// in a fixed order (the same value for any thread count). When the norm exceeds max_norm, every grad
// is scaled in place by grad_clip_factor(norm, max_norm) = max_norm / (norm + 1e-6)
// (engine/autograd/grad_clip.h, torch.nn.utils.clip_grad_norm_). Returns the norm before clipping.
// Non-finite norm (decision): the grads are left untouched and the NaN / Inf norm is returned so the
// caller sees it and skips the step (torch would scale every grad by NaN); with error_if_nonfinite it
// throws instead. max_norm <= 0 is an error (use grad_norm to only measure).
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, bool error_if_nonfinite = false);
// The same norm without clipping.
double grad_norm(const std::vector<Tensor>& params);
// clip_grad_norm's scaling alone, for a caller that has measured the (finite) total norm already
// (the stepper: over the ranks when a reducer sums the gradients).
void clip_grads_to_norm(const std::vector<Tensor>& params, double norm, double max_norm);

}  // namespace gs::models
