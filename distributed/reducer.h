// The gradient reducer: after the last backward pass of an optimizer step, every parameter's
// gradient equals the one-process gradient of the global batch, on every rank.
//
// What is summed where follows each parameter's Distribution (distribution.h):
//   replicated            summed over the spatial and data groups (the world);
//   sharded over h        summed over data x w (the ranks holding the same shard);
//   sharded over w        summed over data x h;
//   sharded over h and w  summed over data (and the ensemble axis: the `replicas` group).
// The loss convention behind it: each spatial rank's loss is its part of the global loss (a
// reduce_replicated of local sums counts each grid point once), so a replicated parameter's local
// gradient is a partial that must be summed.
//
// Two mechanisms (ReducerOptions::mode; distributed/README.md says why both stay):
//
// tape (the default): parameters enter each forward pass through recorded nodes, one per bucket
// (forward_scope()), whose forward is the identity and whose backward is reduce_replicated over the
// parameter's group: copy_to_group's conjugate pair (collectives.h), bucketed. The reduction is then
// an op like any other: it shows in the DOT export, carries anomaly names, and is differentiated
// under create_graph, so gradient penalties and Hessian-vector products of the global loss work
// across ranks. Data replicas follow the spatial convention: a replica backpropagates its part of
// the global loss, its mean times 1 / D (loss_scale()); the gradient is then the mean over data, and
// the sum convention holds at every order (an average inside the backward would be off by D in a
// second derivative: distributed/NOTES.md).
//
// hooks: PyTorch DDP's mechanism on gradsphere's post-accumulate hooks, outside the tape; each
// replica backpropagates its own mean (loss_scale() = 1) and the reducer averages the replicas.
//
// Mechanics common to both: gradients go into buckets of one (group, dtype), launched as
// non-blocking all-reduces as soon as a bucket is full, strictly in bucket order (every rank issues
// the same collectives in the same order), overlapped with the rest of backward and waited for at
// its end. A parameter that got no gradient in the pass contributes zeros (a flag per parameter
// says whether any rank had one: if none did, .grad stays undefined, as in one process). With
// micro-batches (prepare_for_backward) the step is reduced once, after its last backward pass.
// Bucket order: reverse registration order (DDP's first guess: backward reaches the last layers
// first); the hook reducer then rebuilds its buckets in the ready order rank 0 observed in its first
// pass (the tape reducer's nodes exist before the pass, so it keeps the first guess).
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "distributed/distribution.h"
#include "distributed/process_grid.h"
#include "engine/tensor.h"

namespace gs::dist {

struct ReducedParameter {
  std::string name;
  Tensor tensor;  // a leaf that requires grad
  Distribution distribution;
};

enum class ReducerMode { tape, hooks };

struct ReducerOptions {
  size_t bucket_bytes = 25u << 20;  // as DDP's bucket_cap_mb = 25
  ReducerMode mode = ReducerMode::tape;
};

// Routes the reducer's parameters through its bucket nodes while it lives (tape mode; inert in
// hook mode and under no_grad). Parameters are not leaves inside it: their grad_fn is their bucket
// node, which hands the reduced gradient on to their .grad.
class ReducedForward {
 public:
  ReducedForward() = default;
  ReducedForward(ReducedForward&& o) noexcept : routed_(std::move(o.routed_)) {}
  ReducedForward& operator=(ReducedForward&&) = delete;
  ~ReducedForward();

 private:
  friend class GradientReducer;
  std::vector<Tensor> routed_;
};

struct ReducerStats {
  int64_t passes = 0;             // reduced backward passes
  int64_t buckets_launched = 0;   // over all passes
  int64_t bytes_reduced = 0;      // payload over all passes
  int64_t launched_in_backward = 0;  // buckets started before backward ended (overlap)
  int64_t recorded_reductions = 0;   // tape mode under create_graph: reductions kept on the tape
};

class GradientReducer {
 public:
  GradientReducer(ProcessGrid grid, std::vector<ReducedParameter> params, ReducerOptions options = {});
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Gradient accumulation: call before each backward of an optimizer step; `last` says whether
  // this pass is the step's last (only then are gradients reduced, once, over the accumulated
  // .grad). Without a call, every backward pass is reduced.
  void prepare_for_backward(bool last);
  // Forgets what the step's earlier passes left waiting for its last one (the tape reducer keeps
  // them, not .grad): call it when a step is abandoned before its last backward (a non-finite loss
  // skipped it), or at the start of every step, as the stepper does.
  void discard_pending();
  // Tape mode: call around each forward pass whose backward is reduced (nesting is an error).
  [[nodiscard]] ReducedForward forward_scope();
  // What a data replica multiplies its mean loss by before backward: 1 / D in tape mode, 1 in hook
  // mode (which averages the replicas itself).
  double loss_scale() const;
  ReducerMode mode() const;
  // Number of parameters per bucket, in launch order (for tests and bench).
  std::vector<std::vector<std::string>> bucket_layout() const;
  const ReducerStats& stats() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// The global gradient 2-norm of `params` after reduction: replicated gradients counted once,
// sharded ones summed over their shards (the one-process norm). f64, in a fixed order.
double global_grad_norm(const ProcessGrid& grid, const std::vector<ReducedParameter>& params);
// clip_grad_norm (models/optim.h) with the global norm; returns the norm before clipping. A
// non-finite norm leaves the gradients untouched, on every rank alike.
double clip_global_grad_norm(const ProcessGrid& grid, const std::vector<ReducedParameter>& params, double max_norm);

// A loss term that every spatial rank computes identically from replicated parameters (a weight
// penalty) would enter the reduced gradient once per spatial rank. This marks it: the forward is
// the identity, the backward passes the gradient on spatial rank 0 only (zeros elsewhere), so the
// reducer's sum counts it exactly once. Differentiable again.
Tensor replicated_loss_term(const Tensor& term, const ProcessGrid& grid);
// replicated_loss_term's backward: g on spatial rank 0, zeros on the other ranks of the spatial
// group. Differentiable again.
Tensor spatial_root_only(const Tensor& g, const ProcessGrid& grid);

// Compares every replicated parameter (and its .grad, when defined) across the world and every
// sharded one across the ranks that hold the same shard; the first difference is an error naming
// the parameter (the replica checker after an optimizer step).
void check_parameters_replicated(const ProcessGrid& grid, const std::vector<ReducedParameter>& params);

// The group over which a parameter of distribution d is replicated (its gradient's reduction group).
Group reduction_group(const Distribution& d);

}  // namespace gs::dist
