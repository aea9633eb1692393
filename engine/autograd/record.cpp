#include "engine/autograd/record.h"

#include "engine/autograd/grad_mode.h"

namespace gs {

bool should_record(const std::vector<Tensor>& inputs) {
  if (!recording_enabled()) return false;
  for (const auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

bool should_record(std::initializer_list<Tensor> inputs) {
  if (!recording_enabled()) return false;
  for (const auto& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
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

std::string saved_role(const Tensor& t, const std::vector<Tensor>& inputs) {
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].is_same(t)) return fmt::format("input {}", i);
  return "a tensor computed in forward";
}

}  // namespace

void connect_node(const std::shared_ptr<Node>& node, const std::vector<Tensor>& inputs,
                  const std::vector<Tensor*>& outputs, const std::vector<Tensor>& saved,
                  const std::vector<size_t>& saved_outputs) {
  node->next_edges.reserve(inputs.size());
  for (const auto& in : inputs) {
    check_history_current(in, node->name());
    node->next_edges.push_back(gradient_edge(in));
    node->input_meta.push_back(in.defined() ? TensorMeta::of(in) : TensorMeta{});
  }
  for (const auto& s : saved) node->saved.emplace_back(s, false, saved_role(s, inputs));
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = *outputs[i];
    node->output_meta.push_back(TensorMeta::of(out));
    if (!is_differentiable(out.dtype())) continue;  // masks, indices: no gradient flows
    auto& m = out.impl()->meta();
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = i;
    m.history_version = out.version();
  }
  for (size_t idx : saved_outputs)
    node->saved.emplace_back(*outputs.at(idx), true, fmt::format("output {}", idx));
}

std::shared_ptr<Node> record_op(std::string name, const std::vector<Tensor>& inputs,
                                const std::vector<Tensor*>& outputs, const std::vector<Tensor>& saved,
                                const std::vector<size_t>& saved_outputs, BackwardRule rule) {
  auto node = std::make_shared<FunctionNode>(std::move(name), std::move(rule));
  connect_node(node, inputs, outputs, saved, saved_outputs);
  return node;
}

void check_inplace(const Tensor& self, const char* op, std::initializer_list<Tensor> others) {
  GS_CHECK(self.defined(), "{}: the tensor to modify is undefined", op);
  check_inplace(self, op, others, self.version());
}

void check_inplace(const Tensor& self, const char* op, std::initializer_list<Tensor> others,
                   uint64_t version_before_write) {
  GS_CHECK(self.defined(), "{}: the tensor to modify is undefined", op);
  check_writable(self, op);
  if (!recording_enabled()) return;
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
    Tensor base = self.view_base();
    bool base_in_graph = base.defined() && base.requires_grad();
    GS_CHECK(!(self.requires_grad() || base_in_graph || others_need_grad),
             "{}: in-place write to a view ({}) of a tensor that is part of the autograd graph. gradsphere does "
             "not rewrite the base's history for view writes, so this would give wrong gradients; use an "
             "out-of-place op (e.g. cat, where, pad) or clone() the view first.",
             op, self.meta_str());
  }
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
  connect_node(node, inputs, {&self}, saved, {});
  if (old_fn && old_fn->remove_retained_grad(self.impl_ptr())) node->add_retained_grad(0, self.impl_ptr());
}

}  // namespace gs
