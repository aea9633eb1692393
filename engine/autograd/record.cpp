#include "engine/autograd/record.h"

#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_arith.h"
#include "engine/autograd/grad_mode.h"
#include "engine/object_pool.h"

namespace gs {

namespace {

// Where `view` sits in its base's storage, with the dtypes of the gradients that the relation routes
// (f32 for bf16 storage: one element for one, so the geometry is the same).
ViewRelation relation_of(const Tensor& view, const Tensor& base) {
  return {base.sizes(), base.strides(), base.offset(), gradient_dtype(base.dtype()),
          view.sizes(), view.strides(), view.offset(), gradient_dtype(view.dtype())};
}

// PyTorch's view semantics: a view whose storage changed since its autograd state was set (its
// base gained history through an in-place op, or was rebased by one, or an optimizer stepped the
// leaf it views) gets its history regenerated from the base's current one on its next use: a node
// whose rule sends the view's gradient to the base's positions. Without it, a view taken while its
// base was a plain tensor would silently stay a constant after the base gained history.
// Skipped for detach() aliases, for views made while not recording (as torch's no-grad views), and
// when the base's own history is stale (the use then fails with the error of check_history_current).
void refresh_view_history(const Tensor& t) {
  TensorImpl* impl = t.impl();
  if (!impl || !impl->view_base || impl->detached_alias || !impl->view_made_recording) return;
  const uint64_t now = t.version();
  const bool has_history = impl->autograd && impl->autograd->grad_fn;
  if ((has_history ? impl->autograd->history_version : impl->view_version) == now) return;
  Tensor base(impl->view_base);
  if (!base.requires_grad()) return;
  if (!base.is_leaf() && base.impl()->meta().history_version != now) return;
  const ViewRelation r = relation_of(t, base);
  auto node = std::make_shared<FunctionNode>(
      "view_of_base", [r](BackwardContext&, const std::vector<Tensor>& g) {
        return std::vector<Tensor>{gradient_arithmetic().view_to_base(g[0], r)};
      });
  Tensor view = t;
  std::shared_ptr<Node> old_fn = has_history ? impl->autograd->grad_fn : nullptr;
  connect_node(node, {base}, {&view}, {}, {});
  impl->view_version = now;
  if (old_fn && old_fn->remove_retained_grad(t.impl_ptr())) node->add_retained_grad(0, t.impl_ptr());
}

bool any_requires_grad_after_refresh(ArgList<Tensor> inputs) {
  if (!recording_enabled()) return false;
  bool any = false;
  for (const Tensor& t : inputs) {
    if (!t.defined()) continue;
    refresh_view_history(t);
    any |= t.requires_grad();
  }
  return any;
}

}  // namespace

// Recording is also needed when an input carries a tangent (forward AD): the node gives the
// outputs theirs, even with grad mode off (as torch: no_grad does not stop forward AD).
bool should_record(const std::vector<Tensor>& inputs) {
  return any_requires_grad_after_refresh(inputs) || (forward_ad::active() && forward_ad::any_tangent(inputs));
}
bool should_record(std::initializer_list<TensorRef> inputs) {
  const ArgList<Tensor> list(inputs);
  return any_requires_grad_after_refresh(list) || (forward_ad::active() && forward_ad::any_tangent(list.vec()));
}

bool needs_gradient(const Tensor& t) {
  return t.defined() && (t.requires_grad() || (forward_ad::active() && forward_ad::tangent_of(t).defined()));
}

namespace {

// A non-leaf whose storage changed since its history was recorded would silently get the
// gradient of its old value; refuse to build on it.
void check_history_current(const Tensor& t, const std::string& op) {
  if (!t.defined() || t.is_leaf() || !t.requires_grad()) return;
  auto& m = t.impl()->meta();
  GS_CHECK(m.history_version == t.version(),
           "{}: an input ({}) was modified in place outside autograd's record (its storage went from version {} "
           "to {} without a recorded in-place op, e.g. a write through another view, a detached alias or under "
           "no_grad), so its gradient history no longer matches its value. Compute it again, or clone() it "
           "before modifying.",
           op, t.meta_str(), m.history_version, t.version());
}

SavedRole saved_role(const Tensor& t, ArgList<Tensor> inputs) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].is_same(t)) return SavedRole::input(i);
  return {};
}

}  // namespace

namespace {

enum class Tangents { propagate, inplace, none };

bool any_requires_grad(ArgList<Tensor> inputs) {
  for (const auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

// attach = false: the node exists only to give the outputs their tangents (inputs carry tangents
// but none requires grad, or grad mode is off): the outputs get no history.
void connect_node_impl(const std::shared_ptr<Node>& node, ArgList<Tensor> inputs, ArgList<Tensor*> outputs,
                       ArgList<Tensor> saved, ArgList<size_t> saved_outputs, Tangents tangents, bool attach) {
  node->next_edges.reserve(inputs.size());
  node->input_meta.reserve(inputs.size());
  node->output_meta.reserve(outputs.size());
  node->saved.reserve(saved.size() + saved_outputs.size());
  for (const auto& in : inputs) {
    check_history_current(in, node->name());
    node->next_edges.push_back(gradient_edge(in));
    node->input_meta.push_back(in.defined() ? TensorMeta::of(in) : TensorMeta{});
  }
  for (const auto& s : saved) node->saved.emplace_back(s, false, saved_role(s, inputs));
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = *outputs[i];
    node->output_meta.push_back(TensorMeta::of(out));
    if (!node->forward_stream && out.device().type == DeviceType::cuda)
      node->forward_stream = cuda::current_stream(out.device().index);
    if (!carries_gradient(out.dtype()) || !attach) continue;  // masks, indices: no gradient flows
    auto& m = out.impl()->meta();
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = i;
    m.history_version = out.version();
  }
  for (size_t idx : saved_outputs)
    node->saved.emplace_back(*outputs.at(idx), true, SavedRole::output(idx));
  if (tangents != Tangents::none && forward_ad::active())
    forward_ad::propagate_tangents(node, inputs.vec(), outputs.vec(), tangents == Tangents::inplace);
}

}  // namespace

template <typename T>
const T& ArgList<T>::at(size_t i) const {
  GS_CHECK(i < size_, "internal: argument {} of a list of {}", i, size_);
  return (*this)[i];
}
template class ArgList<Tensor>;
template class ArgList<Tensor*>;
template class ArgList<size_t>;

void connect_node(const std::shared_ptr<Node>& node, ArgList<Tensor> inputs, ArgList<Tensor*> outputs,
                  ArgList<Tensor> saved, ArgList<size_t> saved_outputs) {
  const bool attach = recording_enabled() && any_requires_grad(inputs);
  connect_node_impl(node, inputs, outputs, saved, saved_outputs, Tangents::propagate, attach);
}

std::shared_ptr<Node> record_op(std::string name, ArgList<Tensor> inputs, ArgList<Tensor*> outputs,
                                ArgList<Tensor> saved, ArgList<size_t> saved_outputs, BackwardRule rule) {
  // From the per-thread pool (engine/object_pool.h): a node is made per recorded op.
  auto node = std::allocate_shared<FunctionNode>(PoolAllocator<FunctionNode>(), std::move(name), std::move(rule));
  connect_node(node, inputs, outputs, saved, saved_outputs);
  return node;
}

namespace {

// Why an in-place write on the view `self` cannot be recorded, or "" when it can: finish_inplace
// then rebases the base's history through a copy_slices node, as PyTorch's CopySlices.
std::string view_write_refusal(const Tensor& self, uint64_t version_before_write) {
  const TensorImpl* impl = self.impl();
  Tensor base(impl->view_base);
  if (impl->detached_alias)
    return "it is a detach() alias of a tensor in the graph: the write would bypass autograd";
  if (!impl->view_made_recording)
    return "the view was made under no_grad or inference mode and is modified with grad mode on (PyTorch "
           "refuses this too: the view has no history to rebase)";
  if (base.is_leaf() && base.requires_grad())
    return "it is a view of a leaf tensor that requires grad (PyTorch refuses this too); wrap the update in "
           "gs::NoGradGuard, or clone() the view first";
  if (!base.is_leaf() && base.requires_grad() && base.impl()->autograd->history_version != version_before_write)
    return "its base was modified in place outside autograd's record, so its history no longer matches its value";
  return "";
}

// before_write: the check runs before the write (built-in ops), not after it (mark_dirty, whose
// input's history was refreshed when the custom function took it).
template <typename Others>
void check_inplace_impl(const Tensor& self, const char* op, const Others& others, uint64_t version_before_write,
                        bool before_write) {
  GS_CHECK(self.defined(), "{}: the tensor to modify is undefined", op);
  check_writable(self, op);
  if (!recording_enabled()) return;
  // A view whose base changed since it was taken writes with its base's current history.
  if (before_write) refresh_view_history(self);
  bool others_need_grad = false;
  for (const auto& o : others) others_need_grad |= o.defined() && o.requires_grad();
  GS_CHECK(!(self.is_leaf() && self.requires_grad()),
           "{}: a leaf tensor that requires grad ({}) is being used in an in-place operation. Wrap the update in "
           "gs::NoGradGuard (as optimizers do), or clone() the tensor first.",
           op, self.meta_str());
  // Checked before the write, so a refused op leaves the data and the version untouched.
  if (!self.is_leaf() && self.requires_grad()) {
    const auto& m = self.impl()->meta();
    GS_CHECK(m.history_version == version_before_write,
             "{}: {} was modified in place outside autograd's record before this op (version {} -> {}): "
             "e.g. under no_grad or through another alias, so its history no longer matches its value; "
             "compute it again, or clone() it before modifying.",
             op, self.meta_str(), m.history_version, version_before_write);
  }
  if (self.is_view() && (self.requires_grad() || others_need_grad)) {
    const std::string why = view_write_refusal(self, version_before_write);
    GS_CHECK(why.empty(),
             "{}: in-place write to a view ({}) of a tensor that is part of the autograd graph is refused: {}. "
             "Use an out-of-place op (e.g. cat, where, pad) or clone() the view first.",
             op, self.meta_str(), why);
  }
}

}  // namespace

void rebase_base_history(const Tensor& self) {
  Tensor base(self.impl()->view_base);
  const ViewRelation r = relation_of(self, base);
  auto node = std::make_shared<FunctionNode>("copy_slices", [r](BackwardContext&, const std::vector<Tensor>& g) {
    const auto& a = gradient_arithmetic();
    return std::vector<Tensor>{a.view_complement(g[0], r), a.view_from_base(g[0], r)};
  });
  if (!base.is_leaf() && base.requires_grad()) {
    auto& m = base.impl()->meta();
    m.history_version = base.version();  // checked before the write (view_write_refusal)
  }
  std::shared_ptr<Node> old_fn = base.grad_fn();
  // The base's tangent already changed with the view's: the view's tangent aliases it (forward_ad).
  connect_node_impl(node, {base, self}, {&base}, {}, {}, Tangents::none, true);
  if (old_fn && old_fn->remove_retained_grad(base.impl_ptr())) node->add_retained_grad(0, base.impl_ptr());
}

void check_inplace(const Tensor& self, const char* op, std::initializer_list<Tensor> others) {
  GS_CHECK(self.defined(), "{}: the tensor to modify is undefined", op);
  check_inplace_impl(self, op, others, self.version(), true);
}

void check_inplace(const Tensor& self, const char* op, const std::vector<Tensor>& others,
                   uint64_t version_before_write) {
  check_inplace_impl(self, op, others, version_before_write, false);
}

void finish_inplace(Tensor& self, const char* op, const std::vector<Tensor>& other_inputs, BackwardRule rule,
                    const std::vector<Tensor>& saved) {
  bump_version(self);
  std::vector<Tensor> inputs;
  inputs.reserve(other_inputs.size() + 1);
  inputs.push_back(self);  // its current edge: the history before this write
  for (const auto& o : other_inputs) inputs.push_back(o);
  if (!should_record(inputs)) {
    // A non-leaf written under no_grad keeps its old grad_fn; check_history_current catches later use.
    return;
  }
  auto node = std::make_shared<FunctionNode>(op, std::move(rule));
  if (!(recording_enabled() && any_requires_grad(inputs))) {
    // Only tangents to update (forward AD); the history stays as it is.
    connect_node_impl(node, inputs, {&self}, saved, {}, Tangents::inplace, false);
    return;
  }
  std::shared_ptr<Node> old_fn = self.grad_fn();
  // Edges are taken from `self` before its grad_fn is replaced. Its history version must be taken
  // from before the write, so compare against version - 1.
  if (!self.is_leaf() && self.requires_grad()) {
    auto& m = self.impl()->meta();
    GS_CHECK(m.history_version + 1 == self.version(),
             "{}: {} was modified in place outside autograd's record before this op (version {} -> {})", op,
             self.meta_str(), m.history_version, self.version() - 1);
    m.history_version = self.version();
  }
  connect_node_impl(node, inputs, {&self}, saved, {}, Tangents::inplace, true);
  if (old_fn && old_fn->remove_retained_grad(self.impl_ptr())) node->add_retained_grad(0, self.impl_ptr());
  if (self.is_view()) rebase_base_history(self);
}

}  // namespace gs
