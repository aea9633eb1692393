#include "engine/autograd/forward_ad.h"

#include <atomic>
#include <map>
#include <set>

#include "engine/autograd/engine.h"
#include "engine/autograd/grad_arith.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"

namespace gs::forward_ad {
namespace {

std::atomic<uint64_t> g_next_level{1};
std::atomic<uint64_t> g_level{0};  // 0: no level open
thread_local int t_paused = 0;
RuleCounts g_counts;

std::map<std::string, JvpRule>& written_rules() {
  static std::map<std::string, JvpRule> r;
  return r;
}
std::set<std::string>& diagonal_ops() {
  static std::set<std::string> s;
  return s;
}
Tensor (*g_real_dot)(const Tensor&, const Tensor&) = nullptr;

// Whether `impl` has an entry at the current level (a tangent, or an explicit "none": the primal
// of unpack_dual, which must not see its base's tangent).
bool has_own_entry(const TensorImpl* impl) {
  const uint64_t level = g_level.load(std::memory_order_relaxed);
  return level != 0 && impl && impl->autograd && impl->autograd->fw_level == level;
}
Tensor own_tangent(const TensorImpl* impl) { return has_own_entry(impl) ? impl->autograd->fw_grad : Tensor(); }

void set_own_tangent(const Tensor& t, const Tensor& tangent) {
  auto& m = t.impl()->meta();
  m.fw_grad = tangent;
  m.fw_level = g_level.load(std::memory_order_relaxed);
}

// The invariant that lets a view's tangent alias its base's: the tangent has the primal's strides
// and offset in a storage at least as large, so any view of the primal's storage has the same
// view of the tangent's.
bool parallel(const Tensor& tangent, const Tensor& primal) {
  return tangent.strides() == primal.strides() && tangent.offset() == primal.offset() &&
         tangent.storage()->nbytes() >= primal.storage()->nbytes() && tangent.device() == primal.device();
}

// `placed` (equal in value to `value`) given `value`'s reverse-mode history: a handle on placed's
// storage whose grad_fn is value's (or its leaf accumulator). Lets a tangent keep both the parallel
// layout its views alias and the history reverse-over-forward differentiates.
Tensor with_history(const Tensor& placed, const Tensor& value) {
  if (!value.requires_grad()) return placed;
  auto impl = std::make_shared<TensorImpl>(placed.storage(), placed.sizes(), placed.strides(), placed.offset(),
                                           placed.dtype());
  const Edge e = gradient_edge(value);
  auto& m = impl->meta();
  m.requires_grad = true;
  m.grad_fn = e.fn;
  m.output_nr = e.output_nr;
  m.history_version = placed.version();
  return Tensor(impl);
}

// `tangent`'s values laid out as `primal` (parallel), copied when they are not already, with the
// tangent's history.
Tensor laid_out_like(const Tensor& primal, const Tensor& tangent) {
  if (parallel(tangent, primal)) return tangent;
  const int64_t storage_elems = static_cast<int64_t>(primal.storage()->nbytes() / dtype_size(primal.dtype()));
  Tensor buffer = zeros({storage_elems}, tangent.dtype(), primal.device());
  Tensor placed = alias_with_geometry(buffer, primal.sizes(), primal.strides(), primal.offset());
  copy_values(placed, tangent);
  return with_history(placed, tangent);
}

// Where `view`'s elements sit in `base`'s (both tangents' geometry, gradient dtypes).
ViewRelation tangent_relation(const Tensor& view, const Tensor& base) {
  return {base.sizes(), base.strides(), base.offset(), base.dtype(),
          view.sizes(), view.strides(), view.offset(), view.dtype()};
}

// The tangent of `view` from the tangent of the tensor whose storage it shares (element for
// element: a bf16 view's tangent is the f32 view at the same element positions).
// A base tangent with history gives a view with history (reverse mode sees a view op).
Tensor view_of_tangent(const Tensor& base_tangent, const Tensor& view) {
  Tensor v = alias_with_geometry(base_tangent, view.sizes(), view.strides(), view.offset(), gradient_dtype(view.dtype()));
  if (!base_tangent.requires_grad() || !recording_enabled()) return v;
  const ViewRelation r = tangent_relation(v, base_tangent);
  auto node = std::make_shared<FunctionNode>("tangent_view", [r](BackwardContext&, const std::vector<Tensor>& g) {
    return std::vector<Tensor>{gradient_arithmetic().view_to_base(g[0], r)};
  });
  PauseGuard pause;
  connect_node(node, {base_tangent}, {&v}, {}, {});
  return v;
}

bool same_storage(const Tensor& a, const Tensor& b) {
  return a.defined() && b.defined() && a.storage().get() == b.storage().get();
}

void check_tangent(const Tensor& primal, const Tensor& tangent, const std::string& what) {
  GS_CHECK(tangent.sizes() == primal.sizes() && tangent.dtype() == gradient_dtype(primal.dtype()) &&
               tangent.device() == primal.device(),
           "{}: the tangent must match its primal {} (shape, dtype, device), got {}", what, primal.meta_str(),
           tangent.meta_str());
}

// A node that only makes an edge valid, so a rule computes the gradient of an input that needs
// none in reverse mode but has a tangent (the rule skips inputs whose edge is invalid).
class TangentProbe : public Node {
 public:
  TangentProbe() : Node("tangent_probe") {}
  std::vector<Tensor> apply(std::vector<Tensor>) override { return {}; }
};

// Runs the node's VJP rule on `grads` with every input that has a tangent marked as needing its
// gradient. Returns one gradient per input, reduced to the input's shape.
std::vector<Tensor> run_rule(Node& node, const std::vector<Tensor>& tangents, std::vector<Tensor> grads) {
  static const std::shared_ptr<Node> probe = std::make_shared<TangentProbe>();
  std::vector<Edge> edges = node.next_edges;
  for (size_t i = 0; i < tangents.size(); ++i)
    if (tangents[i].defined() && !node.next_edges[i].valid()) node.next_edges[i] = Edge{probe, 0};
  std::vector<Tensor> g;
  try {
    g = node.apply(std::move(grads));
  } catch (...) {
    node.next_edges = edges;
    throw;
  }
  node.next_edges = edges;
  g.resize(tangents.size());
  for (size_t i = 0; i < g.size(); ++i)
    if (g[i].defined() && g[i].sizes() != node.input_meta[i].sizes)
      g[i] = gradient_arithmetic().sum_to(g[i], node.input_meta[i].sizes);
  return g;
}

Tensor zeros_of(const TensorMeta& m) { return zeros(m.sizes, m.dtype, m.device); }

// J t from the VJP rule: J t = d/du <J^T u, t> at any u (the rule is linear in u).
std::vector<Tensor> derived_jvp(Node& node, const std::vector<Tensor>& tangents, bool differentiable) {
  GS_CHECK(g_real_dot, "forward AD: no pairing registered (ops/jvp_rules.cpp registers it at start-up)");
  GS_CHECK(!node.once_differentiable,
           "forward AD: {} has no JVP rule: its backward is once_differentiable, so the JVP cannot be derived "
           "from it. Give it a differentiable backward, or keep it out of forward-mode AD.",
           node.describe());
  GradModeGuard grad_on(true);
  const bool inference = InferenceMode::enabled();  // recording must be on for the double VJP
  InferenceMode::set_enabled(false);
  struct Restore {
    bool on;
    ~Restore() { InferenceMode::set_enabled(on); }
  } restore{inference};
  std::vector<Tensor> u(node.output_meta.size());
  for (size_t j = 0; j < u.size(); ++j) {
    u[j] = zeros_of(node.output_meta[j]);
    if (carries_gradient(node.output_meta[j].dtype)) u[j].set_requires_grad(true);
  }
  std::vector<Tensor> g = run_rule(node, tangents, u);
  Tensor pairing;
  for (size_t i = 0; i < g.size(); ++i) {
    if (!g[i].defined() || !tangents[i].defined()) continue;
    Tensor term = g_real_dot(g[i], tangents[i]);
    pairing = pairing.defined() ? gradient_arithmetic().add(pairing, term) : term;
  }
  std::vector<Tensor> out(u.size());
  if (!pairing.defined() || !pairing.requires_grad()) return out;  // the outputs do not depend on t
  std::vector<Tensor> wrt;
  std::vector<size_t> slot;
  for (size_t j = 0; j < u.size(); ++j)
    if (u[j].requires_grad()) wrt.push_back(u[j]), slot.push_back(j);
  GradOptions options;
  options.allow_unused = true;
  options.create_graph = differentiable;
  std::vector<Tensor> r = grad({pairing}, wrt, {}, options);
  for (size_t k = 0; k < r.size(); ++k) out[slot[k]] = r[k];
  return out;
}

// Writes an in-place op's new tangent into `self`'s tangent storage, so views that alias it see
// the values. With history (reverse-over-forward, or forward-over-reverse of a primal that
// requires grad), self's tangent takes the new value's history, and a base whose tangent the view
// aliases gets a copy_slices-like history (outside the view its old one, inside the value's).
void write_tangent_inplace(const Tensor& self, const Tensor& value) {
  Tensor current = tangent_of(self);
  const bool view = self.is_view() && !self.impl()->detached_alias;
  if (!current.defined() || !parallel(current, self)) {
    if (!view) {
      set_own_tangent(self, laid_out_like(self, value));
      return;
    }
    // A view gaining a tangent gives its base one (zero outside the view), as PyTorch.
    Tensor base = self.view_base();
    if (!own_tangent(base.impl()).defined())
      set_own_tangent(base, laid_out_like(base, zeros(base.sizes(), gradient_dtype(base.dtype()), base.device())));
    current = view_of_tangent(own_tangent(base.impl()), self);
  }
  copy_values(current, value);
  set_own_tangent(self, with_history(current, value));
  if (!view || !value.requires_grad() || !recording_enabled()) return;
  Tensor base = self.view_base();
  Tensor base_tangent = own_tangent(base.impl());
  if (!base_tangent.defined() || !base_tangent.storage() || base_tangent.storage().get() != current.storage().get())
    return;
  const ViewRelation r = tangent_relation(current, base_tangent);
  auto node = std::make_shared<FunctionNode>("tangent_copy_slices", [r](BackwardContext&, const std::vector<Tensor>& g) {
    const auto& a = gradient_arithmetic();
    return std::vector<Tensor>{a.view_complement(g[0], r), a.view_from_base(g[0], r)};
  });
  Tensor rebased = alias_with_geometry(base_tangent, base_tangent.sizes(), base_tangent.strides(), base_tangent.offset());
  {
    PauseGuard pause;
    connect_node(node, {base_tangent, value}, {&rebased}, {}, {});
  }
  set_own_tangent(base, rebased);
}

// Saved outputs are stored as separate handles (node.h): give them the output's tangent, so a
// backward run inside the level (forward-over-reverse) sees it. Its values only: a tangent with
// history (reverse-over-forward) can reach this node through that history, and the node holding it
// would be a reference cycle.
void share_with_saved_outputs(Node& node, uint32_t output_nr, const Tensor& tangent) {
  if (!tangent.defined()) return;
  const Tensor values =
      tangent.requires_grad()
          ? Tensor(std::make_shared<TensorImpl>(tangent.storage(), tangent.sizes(), tangent.strides(),
                                                tangent.offset(), tangent.dtype()))
          : tangent;
  for (auto& s : node.saved)
    if (s.is_output() && s.output_nr() == output_nr && s.peek().defined()) {
      auto& m = s.peek().impl()->meta();
      m.fw_grad = values;
      m.fw_level = g_level.load(std::memory_order_relaxed);
    }
}

// `t`'s values and reverse-mode history in a handle of its own. A written rule reads outputs
// through these: a differentiable tangent that saved the output itself would be held by that
// output (its fw_grad), a reference cycle.
Tensor history_alias(const Tensor& t) {
  auto impl = std::make_shared<TensorImpl>(t.storage(), t.sizes(), t.strides(), t.offset(), t.dtype());
  if (t.requires_grad() && !t.is_leaf()) {
    auto& m = impl->meta();
    m.requires_grad = true;
    m.grad_fn = t.grad_fn();
    m.output_nr = t.output_nr();
    m.history_version = t.version();
  }
  return Tensor(impl);
}

// Reverse mode sees `alias` as `source` itself.
void connect_identity(const char* name, const Tensor& source, Tensor& alias) {
  auto node = std::make_shared<FunctionNode>(
      name, [](BackwardContext&, const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  PauseGuard pause;  // the tangent is set by the caller
  connect_node(node, {source}, {&alias}, {}, {});
}

}  // namespace

DualLevel::DualLevel() {
  GS_CHECK(g_level.load() == 0,
           "forward_ad::DualLevel: a dual level is already open; levels do not nest in gradsphere (jacfwd of "
           "jacfwd is not supported: use hessian(), forward-over-reverse, or reverse-over-reverse).");
  g_level = g_next_level++;
}
DualLevel::~DualLevel() { g_level = 0; }

bool active() { return g_level.load(std::memory_order_relaxed) != 0 && t_paused == 0; }

PauseGuard::PauseGuard() { ++t_paused; }
PauseGuard::~PauseGuard() { --t_paused; }

Tensor tangent_of(const Tensor& t) {
  if (!t.defined() || g_level.load(std::memory_order_relaxed) == 0) return Tensor();
  if (has_own_entry(t.impl()) || !t.is_view() || t.impl()->detached_alias) return own_tangent(t.impl());
  Tensor base = t.view_base();
  Tensor base_tangent = own_tangent(base.impl());
  if (!base_tangent.defined() || !parallel(base_tangent, base)) return Tensor();
  return view_of_tangent(base_tangent, t);
}

Tensor make_dual(const Tensor& primal, const Tensor& tangent) {
  GS_CHECK(g_level.load() != 0, "make_dual: no dual level is open; create a gs::forward_ad::DualLevel first");
  GS_CHECK(primal.defined() && tangent.defined(), "make_dual: the primal and the tangent must be defined");
  GS_CHECK(is_differentiable(primal.dtype()),
           "make_dual: the primal must be floating point or complex (f32, f64, c64, c128), got {}{}",
           primal.meta_str(),
           is_storage_only(primal.dtype()) ? " (bf16 is a storage dtype: cast to f32 first)" : "");
  check_tangent(primal, tangent, "make_dual");
  // An alias: storage and version counter are the primal's; reverse mode sees it as the primal
  // itself (an identity node), as torch's make_dual.
  Tensor dual = alias_with_geometry(primal, primal.sizes(), primal.strides(), primal.offset());
  if (primal.requires_grad() && recording_enabled()) connect_identity("make_dual", primal, dual);
  set_own_tangent(dual, laid_out_like(dual, tangent));
  return dual;
}

Dual unpack_dual(const Tensor& t) {
  if (!t.defined()) return {};
  Tensor tangent = tangent_of(t);
  // The primal: a view that shares t's storage and reverse-mode history, without the tangent.
  Tensor primal = t;
  if (tangent.defined()) {
    primal = alias_with_geometry(t, t.sizes(), t.strides(), t.offset());
    if (t.requires_grad() && recording_enabled()) connect_identity("unpack_dual", t, primal);
    set_own_tangent(primal, Tensor());  // an explicit "none": not its base's tangent either
  }
  return {primal, tangent};
}

RuleCounts rule_counts() { return g_counts; }
void reset_rule_counts() { g_counts = {}; }

std::string rule_kind(const std::string& node_name) {
  if (written_rules().count(node_name)) return "written";
  if (diagonal_ops().count(node_name)) return "diagonal";
  return "derived";
}

void register_jvp_rule(const std::string& node_name, JvpRule rule) { written_rules()[node_name] = std::move(rule); }
void register_diagonal_jvp(const std::string& node_name) { diagonal_ops().insert(node_name); }
void register_real_dot(Tensor (*real_dot)(const Tensor&, const Tensor&)) { g_real_dot = real_dot; }

bool any_tangent(const std::vector<Tensor>& inputs) {
  if (!active()) return false;
  for (const auto& t : inputs)
    if (tangent_of(t).defined()) return true;
  return false;
}

void propagate_tangents(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
                        const std::vector<Tensor*>& outputs, bool inplace) {
  if (!active()) return;
  std::vector<Tensor> tangents(inputs.size());
  bool any = false, differentiable = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !is_differentiable(gradient_dtype(inputs[i].dtype()))) continue;
    tangents[i] = tangent_of(inputs[i]);
    any |= tangents[i].defined();
    differentiable |= tangents[i].defined() && (tangents[i].requires_grad() || inputs[i].requires_grad());
  }
  if (!any) return;
  differentiable &= recording_enabled();

  // Views: the same view of the input's tangent.
  std::vector<bool> done(outputs.size(), false);
  bool all_done = true;
  for (size_t j = 0; j < outputs.size(); ++j) {
    const Tensor& out = *outputs[j];
    if (!carries_gradient(out.dtype())) {
      done[j] = true;
      continue;
    }
    if (!inplace)
      for (size_t i = 0; i < inputs.size() && !done[j]; ++i)
        if (tangents[i].defined() && same_storage(out, inputs[i]) && parallel(tangents[i], inputs[i])) {
          set_own_tangent(out, view_of_tangent(tangents[i], out));
          share_with_saved_outputs(*node, static_cast<uint32_t>(j), own_tangent(out.impl()));
          done[j] = true;
          ++g_counts.view;
        }
    all_done &= done[j];
  }
  if (all_done) return;

  std::vector<Tensor> result;
  const std::string kind = inplace ? (diagonal_ops().count(node->name()) ? "diagonal" : "derived")
                                   : rule_kind(node->name());
  {
    PauseGuard pause;
    if (kind == "written") {
      std::vector<Tensor> outs;
      for (auto* o : outputs) outs.push_back(history_alias(*o));
      GradModeGuard mode(differentiable);
      result = written_rules().at(node->name())(inputs, outs, tangents);
    } else if (kind == "diagonal" && inputs.size() == 1 && outputs.size() == 1 &&
               !is_complex(inputs[0].dtype()) && inputs[0].sizes() == outputs[0]->sizes()) {
      GradModeGuard mode(differentiable);
      result = run_rule(*node, tangents, {tangents[0]});
      result.resize(1);
    } else {
      result = derived_jvp(*node, tangents, differentiable);
    }
  }
  result.resize(outputs.size());
  for (size_t j = 0; j < outputs.size(); ++j) {
    if (done[j]) continue;
    Tensor& out = *outputs[j];
    Tensor t = result[j].defined() ? result[j] : zeros(out.sizes(), gradient_dtype(out.dtype()), out.device());
    check_tangent(out, t, "forward AD: the JVP rule of " + node->describe());
    if (inplace) write_tangent_inplace(out, t);
    else set_own_tangent(out, laid_out_like(out, t));
    share_with_saved_outputs(*node, static_cast<uint32_t>(j), own_tangent(out.impl()));
    ++(kind == "written" ? g_counts.written : kind == "diagonal" ? g_counts.diagonal : g_counts.derived);
  }
}

}  // namespace gs::forward_ad
