// The tape reducer (reducer.h, mode tape): parameters enter the forward pass through one recorded
// node per bucket, and the node's backward is the bucket's reduction.
//
// Without create_graph the node starts the bucket's non-blocking all-reduce (in bucket order, as the
// hook reducer does) and defers its gradients (engine.h: defer_gradients), so the all-reduce runs
// while the engine goes on with the rest of backward. Under create_graph the reduction is
// reduce_replicated, a tape op whose backward is copy_to_group: the gradient keeps its history
// through the reduction and is differentiated again like any other.
#include <algorithm>
#include <cmath>
#include <utility>

#include "distributed/collectives.h"
#include "distributed/reducer_state.h"
#include "engine/autograd/anomaly.h"
#include "engine/autograd/engine.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/shape_ops.h"
#include "ops/view.h"

namespace gs::dist {
namespace {

// Forward: the identity on the bucket's parameters. Backward: their reduced gradients.
class ReduceGradientsNode : public Node {
 public:
  ReduceGradientsNode(std::shared_ptr<GradientReducer::State> state, size_t bucket, std::string name)
      : Node(std::move(name)), state_(state), bucket_(bucket) {
    materialize_grads = false;  // a parameter without a gradient keeps .grad undefined
    runs_when_ready = true;     // start the all-reduce as soon as the bucket is full
  }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    return state_->tape_backward(bucket_, std::move(grads));
  }
  std::string capture_refusal(uint32_t slot) const override {
    const ReducedParameter& p = state_->params[static_cast<size_t>(state_->buckets[bucket_].params[slot])];
    return fmt::format(
        "parameter '{}' is routed through the gradient reducer's node while its forward_scope() is open, so grad() "
        "would return this rank's unreduced partial; close the scope first (the parameter is a leaf again, and "
        "grad() returns the reduced gradient)",
        p.name);
  }

 private:
  // Owned: a graph outlives the reducer object that recorded it (a function that builds a reducer
  // per call, as the registry's sample does). No cycle: the state holds no graph.
  std::shared_ptr<GradientReducer::State> state_;
  size_t bucket_;
};

std::string bucket_node_name(const GradientReducer::State& s, size_t bi) {
  const ReducerBucket& b = s.buckets[bi];
  return fmt::format("reduce_gradients[bucket {}: {} parameter{}, {}, sum over '{}']", bi, b.params.size(),
                     b.params.size() == 1 ? "" : "s", dtype_name(b.dtype), s.grid.comm(b.group)->name());
}

}  // namespace

ReducedForward::~ReducedForward() {
  for (Tensor& p : routed_) {
    auto& m = p.impl()->meta();
    m.grad_fn.reset();
    m.output_nr = 0;
  }
}

ReducedForward GradientReducer::forward_scope() {
  ReducedForward scope;
  State& s = *state_;
  if (s.options.mode != ReducerMode::tape || !GradMode::enabled()) return scope;
  for (size_t bi = 0; bi < s.buckets.size(); ++bi) {
    auto node = std::make_shared<ReduceGradientsNode>(state_, bi, bucket_node_name(s, bi));
    for (int k : s.buckets[bi].params) {
      const ReducedParameter& p = s.params[k];
      GS_CHECK(p.tensor.is_leaf(),
               "GradientReducer::forward_scope: parameter '{}' is not a leaf ({}); is another forward scope of this "
               "reducer (or of another reducer of the same parameters) still open?",
               p.name, p.tensor.grad_fn() ? p.tensor.grad_fn()->describe() : "");
      node->next_edges.push_back(gradient_edge(p.tensor));
      node->input_meta.push_back(TensorMeta::of(p.tensor));
      node->output_meta.push_back(TensorMeta::of(p.tensor));
    }
    for (size_t q = 0; q < s.buckets[bi].params.size(); ++q) {
      Tensor p = s.params[s.buckets[bi].params[q]].tensor;
      auto& m = p.impl()->meta();
      m.grad_fn = node;
      m.output_nr = static_cast<uint32_t>(q);
      m.history_version = p.version();
      scope.routed_.push_back(p);
    }
  }
  return scope;
}

namespace {
// Held by the end-of-backward callback: destroyed without having run when the backward pass
// ends by an exception (the engine drops queued callbacks then).
struct PassEnd {
  std::weak_ptr<GradientReducer::State> state;
  bool ran = false;
  ~PassEnd() {
    if (!ran)
      if (auto s = state.lock()) s->abandon_pass();
  }
};
}  // namespace

void GradientReducer::State::open_pass() {
  if (in_pass) return;
  in_pass = true;
  auto end = std::make_shared<PassEnd>();
  end->state = shared_from_this();
  queue_backward_callback([end] {
    end->ran = true;
    if (auto s = end->state.lock()) s->finish_tape();
  });
}

void GradientReducer::State::abandon_pass() noexcept {
  for (auto& b : buckets) {
    if (b.work) {
      try {
        b.work->wait();
      } catch (...) {
        // The error that matters is the one being thrown; this wait's own (a timeout) adds nothing.
      }
      b.work.reset();
    }
    b.flat = Tensor();
  }
  std::fill(stash.begin(), stash.end(), Tensor());
  in_pass = false;
  reduce_next = true;
  reset_pass();
}

std::vector<Tensor> GradientReducer::State::tape_backward(size_t bi, std::vector<Tensor> grads) {
  open_pass();
  ReducerBucket& b = buckets[bi];
  GS_CHECK(!b.arrived && !b.recorded,
           "GradientReducer: the node of bucket {} ran twice in one backward pass (two forward scopes feeding one "
           "backward?)",
           bi);
  // The step's earlier passes, kept here rather than in .grad so that the step is reduced once.
  for (size_t q = 0; q < grads.size(); ++q) {
    Tensor& stashed = stash[static_cast<size_t>(b.params[q])];
    if (!stashed.defined()) continue;
    grads[q] = grads[q].defined() ? add(stashed, grads[q]) : stashed;
    stashed = Tensor();
  }
  if (!reduce_next) {
    for (size_t q = 0; q < grads.size(); ++q) stash[static_cast<size_t>(b.params[q])] = grads[q];
    return {};
  }
  if (GradMode::enabled()) {
    // create_graph: reduce_replicated keeps the reduction on the tape. The flags ride along as
    // constants (they have no gradient).
    std::vector<Tensor> parts;
    std::vector<double> flags;
    for (size_t q = 0; q < grads.size(); ++q) {
      const Tensor& t = params[b.params[q]].tensor;
      parts.push_back(grads[q].defined() ? reshape(grads[q], {t.numel()}) : zeros({t.numel()}, t.dtype(), t.device()));
      flags.push_back(grads[q].defined() ? 1.0 : 0.0);
    }
    const Tensor flag_part = reshape(from_vector(flags), {static_cast<int64_t>(flags.size())});
    parts.push_back(cast_copy(to_device_copy(flag_part, params[b.params[0]].tensor.device()), b.dtype));
    const Tensor reduced = reduce_replicated(cat(parts), grid.comm(b.group));
    b.recorded = true;
    stats.recorded_reductions++;
    if (!rebuilt) observed_buckets.push_back(static_cast<int>(bi));
    const int64_t n = static_cast<int64_t>(grads.size());
    std::vector<double> any;
    {
      forward_ad::PrimalOnlyGuard ng;
      any = cast_copy(narrow(reduced, 0, b.elems, n), DType::f64).to_vector<double>();
    }
    std::vector<Tensor> out;
    int64_t off = 0;
    for (int64_t q = 0; q < n; ++q) {
      const Tensor& t = params[b.params[q]].tensor;
      out.push_back(any[q] < 0.5 ? Tensor() : reshape(narrow(reduced, 0, off, t.numel()), t.sizes()));
      off += t.numel();
    }
    launch_ready_in_order(true);  // keeps the strict order for buckets that run asynchronously later
    check_reduced(bi, out);
    return out;
  }
  fill(bi, grads);
  b.arrived = true;
  if (!rebuilt) observed_buckets.push_back(static_cast<int>(bi));
  launch_ready_in_order(true);
  std::weak_ptr<State> weak = shared_from_this();
  defer_gradients({.finish =
                       [weak, bi] {
                         auto s = weak.lock();
                         GS_CHECK(s != nullptr, "GradientReducer: destroyed during its backward pass");
                         // Nothing else is ready: buckets whose node will not run this pass go now,
                         // as zeros, so every rank issues the same all-reduces in the same order.
                         s->flush_unreached();
                         std::vector<Tensor> reduced = s->take_reduced(bi);
                         s->check_reduced(bi, reduced);
                         return reduced;
                       },
                   .progress =
                       [weak] {
                         if (auto s = weak.lock()) s->progress();
                       }});
  return {};
}

void GradientReducer::State::flush_unreached() {
  for (size_t pos = next_launch; pos < launch_order.size(); ++pos) {
    const size_t bi = static_cast<size_t>(launch_order[pos]);
    ReducerBucket& b = buckets[bi];
    if (b.arrived || b.recorded) continue;
    std::vector<Tensor> grads;
    for (int k : b.params) grads.push_back(std::exchange(stash[static_cast<size_t>(k)], Tensor()));
    fill(bi, grads);
    b.flushed = true;
  }
  launch_ready_in_order(false);
}

void GradientReducer::State::check_came_through_node(int k) const {
  if (dead) return;
  const ReducerBucket& b = buckets[static_cast<size_t>(bucket_of[static_cast<size_t>(k)])];
  GS_CHECK(reduce_next && (b.arrived || b.recorded),
           "GradientReducer (tape mode): parameter '{}' got a gradient that did not pass through its bucket's "
           "reduction node, so it was not reduced over '{}'. Run the forward pass inside reducer.forward_scope(), or "
           "build the reducer with ReducerOptions::mode = ReducerMode::hooks",
           params[static_cast<size_t>(k)].name, grid.comm(b.group)->name());
}

void GradientReducer::State::finish_tape() {
  in_pass = false;
  if (!reduce_next) {
    reduce_next = true;
    return;
  }
  flush_unreached();
  for (size_t bi = 0; bi < buckets.size(); ++bi)
    if (buckets[bi].flushed) store_reduced(bi, take_reduced(bi));
  end_pass_bookkeeping();
  if (!rebuilt) reorder_buckets_from_rank0();
}

void GradientReducer::State::reorder_buckets_from_rank0() {
  std::vector<int64_t> order(observed_buckets.begin(), observed_buckets.end());
  std::vector<char> seen(buckets.size(), 0);
  for (int b : observed_buckets) seen[static_cast<size_t>(b)] = 1;
  for (size_t b = 0; b < buckets.size(); ++b)
    if (!seen[b]) order.push_back(static_cast<int64_t>(b));
  Tensor t = from_vector(order);
  grid.comm(Group::world)->broadcast(t, 0);
  launch_order.clear();
  for (int64_t b : t.to_vector<int64_t>()) launch_order.push_back(static_cast<int>(b));
  rebuilt = true;
}

}  // namespace gs::dist
