// The gradient reducer: after the last backward pass of an optimizer step, every parameter's
// gradient equals the one-process gradient of the global batch, on every rank.
//
// What is summed where follows each parameter's Distribution (distribution.h):
//   replicated            summed over the spatial group, averaged over the data group (one
//                         all-reduce over the world, then / data size);
//   sharded over h        summed over data x w (the ranks holding the same shard), / data size;
//   sharded over w        summed over data x h, / data size;
//   sharded over h and w  averaged over data.
// The loss convention behind it: each spatial rank's loss is its part of the global loss (a
// reduce_replicated of local sums counts each grid point once), so a replicated parameter's local
// gradient is a partial that must be summed; each data replica's loss is the mean over its batch,
// so replicas are averaged.
//
// Mechanics (PyTorch DDP's, on gradsphere's hooks): post-accumulate hooks mark gradients ready;
// gradients go into buckets of one (group, dtype), launched as non-blocking all-reduces as soon as
// a bucket is full, strictly in bucket order (every rank issues the same collectives in the same
// order), overlapped with the rest of backward and waited for in an end-of-backward callback. The
// first reduced pass records the order in which gradients became ready; rank 0's order is then
// broadcast and the buckets are rebuilt to follow it. A parameter that got no gradient in the pass
// contributes zeros (a flag per parameter says whether any rank had one: if none did, .grad stays
// undefined, as in one process).
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

struct ReducerOptions {
  size_t bucket_bytes = 25u << 20;  // as DDP's bucket_cap_mb = 25
};

struct ReducerStats {
  int64_t passes = 0;             // reduced backward passes
  int64_t buckets_launched = 0;   // over all passes
  int64_t bytes_reduced = 0;      // payload over all passes
  int64_t launched_in_backward = 0;  // buckets started before backward ended (overlap)
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
