// The backward engine: a graph root fans the output gradients out; nodes run in reverse creation
// order once every gradient flowing into them has arrived (dependency counting); gradients meeting
// at one slot are summed. A pass (BackwardPass) discovers the graph, selects the nodes that run,
// counts dependencies, runs the ready nodes and finishes; its CUDA stream bookkeeping lives in
// BackwardStreams (backward_streams.h).
#include "engine/autograd/engine.h"

#include <algorithm>

#include <cmath>
#include <atomic>
#include <deque>
#include <queue>
#include <tuple>

#include "engine/autograd/anomaly.h"
#include "engine/autograd/backward_streams.h"
#include "engine/autograd/grad_arith.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/factory.h"

namespace gs {
namespace {

thread_local std::vector<std::vector<std::function<void()>>*> t_callback_stack;

// Holds the gradients for the roots and hands them out as its outputs.
class GraphRoot : public Node {
 public:
  explicit GraphRoot(std::vector<Tensor> grads) : Node("GraphRoot"), grads_(std::move(grads)) {}
  std::vector<Tensor> apply(std::vector<Tensor>) override { return grads_; }

 private:
  std::vector<Tensor> grads_;
};

// Raised through a gradient whose producer cannot be differentiated again.
class NotDifferentiableAgain : public Node {
 public:
  explicit NotDifferentiableAgain(std::string producer) : Node("NotDifferentiableAgain"), producer_(std::move(producer)) {}
  std::vector<Tensor> apply(std::vector<Tensor>) override {
    fail("the backward of {} is not differentiable (it is once-differentiable), so gradients of its gradients "
         "cannot be computed; drop create_graph or use a differentiable formulation",
         producer_);
  }

 private:
  std::string producer_;
};

// Device tensors are read through a copy to the host (to_vector): anomaly mode is a debugging
// mode, and the check must see every gradient wherever it lives.
bool has_non_finite(const Tensor& t) {
  bool bad = false;
  dispatch_float_complex(t.dtype(), "anomaly check", [&]<typename T>() {
    for (const T& v : t.to_vector<T>()) {
      if constexpr (is_complex_v<T>) {
        if (!std::isfinite(v.real()) || !std::isfinite(v.imag())) bad = true;
      } else {
        if (!std::isfinite(v)) bad = true;
      }
    }
  });
  return bad;
}

// Checks the gradient `g` that `node` produced for its input `i`; reduces it if it was broadcast.
Tensor validate_gradient(const Node& node, size_t i, Tensor g) {
  const TensorMeta& want = node.input_meta.at(i);
  if (g.sizes() != want.sizes) {
    GS_CHECK(is_expandable_to(want.sizes, g.sizes()),
             "backward of {} returned a gradient of shape {} for input {}, expected {}", node.describe(),
             shape_str(g.sizes()), i, shape_str(want.sizes));
    g = gradient_arithmetic().sum_to(g, want.sizes);
  }
  GS_CHECK(g.dtype() == want.dtype, "backward of {} returned a {} gradient for input {}, expected {}",
           node.describe(), dtype_name(g.dtype()), i, dtype_name(want.dtype));
  GS_CHECK(g.device() == want.device, "backward of {} returned a gradient on {} for input {}, expected {}",
           node.describe(), g.device(), i, want.device);
  return g;
}

struct NodeTask {
  Node* node;
  bool operator<(const NodeTask& o) const {
    if (node->runs_when_ready != o.node->runs_when_ready) return o.node->runs_when_ready;
    return node->sequence_nr() < o.node->sequence_nr();
  }
};

// Targets of grad(): for each captured (node, slot), the index into the result vector.
struct Captures {
  std::vector<std::tuple<std::shared_ptr<Node>, uint32_t, size_t>> targets;  // owning: keeps lazily made accumulators alive
  std::vector<Tensor> grads;
};

std::atomic<uint64_t> g_next_pass{1};
// Passes running on this thread, outermost first. A backward can run inside another one (a hook
// or a backward rule that calls backward()/grad(), e.g. reentrant activation checkpointing); the
// inner pass may reach nodes of the outer one (a parameter's accumulator), whose scratch state it
// must not clobber.
thread_local std::vector<uint64_t> t_running_passes;

// Registers a pass as running and, on exit (also by exception), gives the nodes it shares with
// enclosing passes their state back.
struct PassScope {
  explicit PassScope(uint64_t pass) { t_running_passes.push_back(pass); }
  ~PassScope() {
    for (auto& [node, state] : stashed) node->pass_state = std::move(state);
    t_running_passes.pop_back();
  }
  // Called before `n` is reset for this pass.
  void stash_if_outer(Node* n) {
    uint64_t owner = n->pass_state.pass;
    if (owner == 0) return;
    for (uint64_t p : t_running_passes)
      if (p == owner && p != t_running_passes.back()) {
        stashed.emplace_back(n, std::move(n->pass_state));
        return;
      }
  }
  std::vector<std::pair<Node*, Node::PassState>> stashed;
};

// Where defer_gradients() puts its request: the rule running on this thread, if any.
thread_local std::optional<DeferredGradients>* t_deferral = nullptr;
struct DeferralScope {
  explicit DeferralScope(std::optional<DeferredGradients>& slot) : saved(t_deferral) { t_deferral = &slot; }
  ~DeferralScope() { t_deferral = saved; }
  std::optional<DeferredGradients>* saved;
};

// One run of the engine over the graph below `root`, in the phases execute() calls in order.
class BackwardPass {
 public:
  BackwardPass(const std::shared_ptr<Node>& root, bool retain_graph, bool create_graph, Captures* captures)
      : root_(root), retain_graph_(retain_graph), create_graph_(create_graph), captures_(captures),
        pass_(g_next_pass++), scope_(pass_) {}

  // 1. Discover the graph; reset each node's scratch state. For backward() every node runs, so
  //    its dependency count is its in-degree: both are set here, and steps 2 and 3 have nothing
  //    to do (each is a walk over every node, which on a long tape means a cache miss per node).
  void discover_graph() {
    const bool all_run = !captures_;
    nodes_.push_back(root_.get());
    root_->pass_state = {};
    root_->pass_state.pass = pass_;
    root_->pass_state.runs = all_run;
    for (size_t k = 0; k < nodes_.size(); ++k)
      for (auto& e : nodes_[k]->next_edges) {
        if (!e.valid()) continue;
        Node* c = e.fn.get();
        Node::PassState& state = c->pass_state;
        if (!in_pass(c)) {
          scope_.stash_if_outer(c);
          state = {};
          state.pass = pass_;
          state.runs = all_run;
          nodes_.push_back(c);
        }
        state.in_degree++;
        if (all_run) state.dependencies++;
      }
  }

  // 2. Which nodes run: all (backward), or those leading to a captured slot (grad). Kahn's
  //    algorithm gives a topological order (parents first); walking it backwards decides each
  //    node after all of its children. Sequence numbers cannot be used for this: leaf
  //    accumulators are created lazily, after the nodes that feed them.
  void select_nodes_to_run() {
    if (!captures_) return;  // every node runs (discover_graph)
    for (auto& [n, slot, idx] : captures_->targets)
      if (in_pass(n.get())) n->pass_state.captured = true;
    std::vector<Node*> topo{root_.get()};
    for (size_t k = 0; k < topo.size(); ++k)
      for (auto& e : topo[k]->next_edges)
        if (e.valid() && --e.fn->pass_state.in_degree == 0) topo.push_back(e.fn.get());
    for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
      Node* n = *it;
      // A gradient made by a once-differentiable rule leads nowhere (its guard has no edges), yet
      // differentiating it must raise the guard's error, not "input was not used".
      if (dynamic_cast<NotDifferentiableAgain*>(n)) {
        n->pass_state.runs = true;
        continue;
      }
      for (auto& e : n->next_edges)
        if (e.valid() && (e.fn->pass_state.runs || e.fn->pass_state.captured)) {
          n->pass_state.runs = true;
          break;
        }
    }
    root_->pass_state.runs = true;
  }

  // How many gradients each node waits for before it is ready.
  void count_dependencies() {
    if (!captures_) return;  // counted by discover_graph
    for (Node* n : nodes_)
      if (n->pass_state.runs)
        for (auto& e : n->next_edges)
          if (e.valid() && active(e.fn.get())) e.fn->pass_state.dependencies++;
  }

  // 3. Run: ready nodes, highest sequence number first.
  //    A rule that deferred its gradients (defer_gradients) has them handed on once nothing else
  //    is ready, in the order the rules ran.
  void run_ready_nodes() {
    ready_.push({root_.get()});
    while (!ready_.empty() || !deferred_.empty()) {
      if (ready_.empty()) {
        auto [node, d] = std::move(deferred_.front());
        deferred_.pop_front();
        hand_on(*node, d.finish());
        continue;
      }
      Node* n = ready_.top().node;
      ready_.pop();
      {
        // The node's rule, and the sums of the gradients it hands on, run on its stream.
        std::optional<cuda::StreamGuard> on_stream;
        if (const std::optional<cuda::Stream> stream = streams_.enter(*n)) on_stream.emplace(*stream);
        std::vector<Tensor> grads = take_gradients(*n);
        if (!n->pass_state.runs) continue;
        std::optional<DeferredGradients> deferred;
        std::vector<Tensor> outs = run_rule(*n, std::move(grads), deferred);
        if (deferred) {
          deferred_.emplace_back(n, std::move(*deferred));
        } else {
          hand_on(*n, std::move(outs));
        }
      }
      for (auto& [node, d] : deferred_)
        if (d.progress) d.progress();
    }
  }

  // 4. Finish.
  void finish() {
    // Gradients left in buffers of nodes that never became ready (none in a consistent graph).
    for (Node* n : nodes_) n->pass_state.buffer.clear();
    streams_.hand_back_to_caller();
  }

 private:
  bool in_pass(const Node* n) const { return n->pass_state.pass == pass_; }
  static bool active(const Node* n) { return n->pass_state.runs || n->pass_state.captured; }

  // The gradients that arrived for n's forward outputs (undefined where none did), after n's
  // tensor hooks; where n holds a slot that grad() captures, they are added to its result there.
  std::vector<Tensor> take_gradients(Node& n) {
    std::vector<Tensor> grads = std::move(n.pass_state.buffer);
    grads.resize(n.output_meta.size());
    for (uint32_t s = 0; s < grads.size(); ++s) grads[s] = n.run_tensor_hooks(s, std::move(grads[s]));
    if (n.pass_state.captured)
      for (auto& [target, slot, idx] : captures_->targets) {
        if (target.get() != &n || !grads[slot].defined()) continue;
        Tensor& dst = captures_->grads[idx];
        dst = dst.defined() ? gradient_arithmetic().add(dst, grads[slot]) : grads[slot];
      }
    return grads;
  }

  // n's backward rule, with zeros for the gradients that did not arrive; nothing when none did.
  std::vector<Tensor> run_rule(Node& n, std::vector<Tensor> grads, std::optional<DeferredGradients>& deferred) {
    bool any = &n == root_.get();
    for (auto& g : grads) any |= g.defined();
    if (!any) return {};
    for (uint32_t s = 0; s < grads.size(); ++s)
      if (!grads[s].defined() && n.materialize_grads) {
        const auto& m = n.output_meta[s];
        grads[s] = zeros(m.sizes, m.dtype, m.device);
      }
    std::vector<Tensor> outs;
    try {
      // A once-differentiable rule runs without recording, even under create_graph: otherwise
      // the ops it happens to use (on saved inputs, say) would give its outputs a history, a
      // double backward would silently follow it, and the refusing guard below would be moot.
      GradModeGuard rule_mode(create_graph_ && !n.once_differentiable);
      DeferralScope scope(deferred);
      outs = n.apply(std::move(grads));
    } catch (const Error& e) {
      // Name the failing node once: errors raised by the node's own checks (saved tensors) name it already.
      const std::string node = n.describe();
      if (&n == root_.get() || std::string_view(e.what()).find(node) != std::string_view::npos) throw;
      throw Error(fmt::format("in backward of {}: {}", node, e.what()));
    }
    if (!retain_graph_) n.release_saved();
    return outs;
  }

  // Sends each gradient n's rule returned along its edge into the consumer's buffer; a consumer
  // that has all of its gradients becomes ready. The gradients are moved on, not copied.
  void hand_on(Node& n, std::vector<Tensor> outs) {
    GS_CHECK(outs.empty() || outs.size() == n.next_edges.size(),
             "backward of {} returned {} gradients, expected {} (one per input)", n.describe(), outs.size(),
             n.next_edges.size());
    for (size_t i = 0; i < n.next_edges.size(); ++i) {
      const Edge& e = n.next_edges[i];
      if (!e.valid() || !active(e.fn.get())) continue;
      if (i < outs.size() && outs[i].defined())
        accumulate(*e.fn, e.output_nr, checked_gradient(n, i, std::move(outs[i])));
      if (--e.fn->pass_state.dependencies == 0) ready_.push({e.fn.get()});
    }
  }

  // The gradient n made for its input i, as it is handed on: validated (and reduced if it was
  // broadcast), checked for NaN/Inf in anomaly mode, guarded when n's rule is once-differentiable.
  Tensor checked_gradient(const Node& n, size_t i, Tensor out) {
    Tensor g = &n == root_.get() ? std::move(out) : validate_gradient(n, i, std::move(out));
    if (AnomalyMode::check_nan() && has_non_finite(g))
      fail("anomaly mode: backward of {} produced NaN or Inf in the gradient for its input {} ({})", n.describe(),
           i, g.meta_str());
    if (create_graph_ && n.once_differentiable) {
      // Attach a node that refuses to be differentiated.
      auto guard = std::make_shared<NotDifferentiableAgain>(n.describe());
      g = g.detach();
      guard->output_meta.push_back(TensorMeta::of(g));
      auto& m = g.impl()->meta();
      m.requires_grad = true;
      m.grad_fn = guard;
      m.history_version = g.version();
    }
    return g;
  }

  // Gradients meeting at one slot of `consumer` are summed.
  void accumulate(Node& consumer, uint32_t output_nr, Tensor g) {
    auto& buf = consumer.pass_state.buffer;
    buf.resize(consumer.output_meta.size());
    Tensor& slot = buf[output_nr];
    streams_.before_accumulate(g, slot, consumer);
    slot = slot.defined() ? gradient_arithmetic().add(slot, g) : std::move(g);
  }

  const std::shared_ptr<Node>& root_;
  const bool retain_graph_, create_graph_;
  Captures* captures_;
  const uint64_t pass_;
  PassScope scope_;  // first in, last out: gives shared nodes their state back after everything else
  std::vector<Node*> nodes_;
  std::priority_queue<NodeTask> ready_;
  std::deque<std::pair<Node*, DeferredGradients>> deferred_;
  BackwardStreams streams_;
};

void execute(const std::shared_ptr<Node>& root, bool retain_graph, bool create_graph, Captures* captures) {
  BackwardPass pass(root, retain_graph, create_graph, captures);
  pass.discover_graph();
  pass.select_nodes_to_run();
  pass.count_dependencies();
  GradModeGuard mode(create_graph);
  pass.run_ready_nodes();
  pass.finish();
}

std::shared_ptr<Node> make_root(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_outputs,
                                const char* api) {
  GS_CHECK(grad_outputs.empty() || grad_outputs.size() == roots.size(),
           "{}: got {} tensors and {} grad_outputs; expected one grad_output per tensor", api, roots.size(),
           grad_outputs.size());
  std::vector<Tensor> grads;
  std::vector<Edge> edges;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    GS_CHECK(r.defined(), "{}: tensor {} is undefined", api, i);
    GS_CHECK(r.requires_grad(),
             "{}: element {} of tensors does not require grad and does not have a grad_fn ({}). Did you compute "
             "it under no_grad, or forget set_requires_grad() on the inputs?",
             api, i, r.meta_str());
    Tensor g = i < grad_outputs.size() ? grad_outputs[i] : Tensor();
    if (!g.defined()) {
      GS_CHECK(r.numel() == 1,
               "{}: grad can be implicitly created only for outputs with one element; tensor {} is {}. Pass "
               "grad_outputs.",
               api, i, r.meta_str());
      g = ones(r.sizes(), gradient_dtype(r.dtype()), r.device());
    } else {
      GS_CHECK(g.sizes() == r.sizes() && g.dtype() == gradient_dtype(r.dtype()),
               "{}: grad_output {} must match its tensor {} (shape, and dtype {}), got {}", api, i, r.meta_str(),
               dtype_name(gradient_dtype(r.dtype())), g.meta_str());
    }
    grads.push_back(g);
    edges.push_back(gradient_edge(r));
  }
  auto root = std::make_shared<GraphRoot>(std::move(grads));
  root->next_edges = std::move(edges);
  for (auto& r : roots) root->input_meta.push_back(TensorMeta::of(r));
  return root;
}

struct CallbackScope {
  std::vector<std::function<void()>> callbacks;
  CallbackScope() { t_callback_stack.push_back(&callbacks); }
  ~CallbackScope() { t_callback_stack.pop_back(); }
  void run() {
    // Callbacks may queue more callbacks.
    for (size_t i = 0; i < callbacks.size(); ++i) callbacks[i]();
  }
};

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_outputs, bool retain_graph,
              bool create_graph) {
  auto root = make_root(roots, grad_outputs, "backward");
  CallbackScope cbs;
  execute(root, retain_graph || create_graph, create_graph, nullptr);
  cbs.run();
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, GradOptions options) {
  auto root = make_root(outputs, grad_outputs, "grad");
  Captures cap;
  cap.grads.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    GS_CHECK(inputs[i].defined() && inputs[i].requires_grad(),
             "grad: input {} does not require grad ({}); only tensors that require grad can be differentiated "
             "against",
             i, inputs[i].defined() ? inputs[i].meta_str() : "undefined");
    Edge e = gradient_edge(inputs[i]);
    if (e.fn) {
      const std::string why = e.fn->capture_refusal(e.output_nr);
      GS_CHECK(why.empty(), "grad: input {} ({}): {}", i, inputs[i].meta_str(), why);
    }
    cap.targets.emplace_back(e.fn, e.output_nr, i);
  }
  CallbackScope cbs;
  execute(root, options.retain_graph || options.create_graph, options.create_graph, &cap);
  cbs.run();
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!cap.grads[i].defined()) {
      GS_CHECK(options.allow_unused,
               "grad: input {} ({}) was not used to compute the outputs (or no gradient reached it); pass "
               "allow_unused=true to get an undefined gradient for it",
               i, inputs[i].meta_str());
    } else if (!options.create_graph) {
      cap.grads[i] = cap.grads[i].detach();
    }
  }
  return cap.grads;
}

void defer_gradients(DeferredGradients deferred) {
  GS_CHECK(t_deferral != nullptr, "defer_gradients: can only be called from a backward rule the engine is running");
  GS_CHECK(deferred.finish, "defer_gradients: expected a finish function");
  GS_CHECK(!t_deferral->has_value(), "defer_gradients: this rule has already deferred its gradients");
  *t_deferral = std::move(deferred);
}

void queue_backward_callback(std::function<void()> fn) {
  GS_CHECK(!t_callback_stack.empty(), "queue_backward_callback: can only be called while backward is running");
  t_callback_stack.back()->push_back(std::move(fn));
}

void Tensor::backward(const Tensor& grad_output, bool retain_graph, bool create_graph) const {
  gs::backward({*this}, {grad_output}, retain_graph, create_graph);
}

}  // namespace gs
