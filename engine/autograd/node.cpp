#include "engine/autograd/node.h"

#include <algorithm>
#include <atomic>

#include "engine/autograd/anomaly.h"
#include "engine/autograd/grad_arith.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/saved_hooks.h"
#include "engine/factory.h"

namespace gs {
namespace {
std::atomic<uint64_t> g_next_sequence_nr{0};
GradientArithmetic g_arith;
}  // namespace

void register_gradient_arithmetic(const GradientArithmetic& g) { g_arith = g; }
const GradientArithmetic& gradient_arithmetic() {
  GS_CHECK(g_arith.add && g_arith.sum_to, "internal: gradient arithmetic not registered (is ops/ linked?)");
  return g_arith;
}

namespace {

// A copy of gradient `g` with its own storage. Under grad mode (create_graph) it keeps g's
// history; the engine knows no clone op, so it adds zeros through the registered arithmetic.
Tensor copy_gradient(const Tensor& g) {
  if (GradMode::enabled() && g.requires_grad()) return gradient_arithmetic().add(g, zeros_like(g));
  return contiguous_copy(g, true);
}

}  // namespace

std::string TensorMeta::str() const { return fmt::format("{} {}", dtype_name(dtype), shape_str(sizes)); }

// ---- SavedTensor
std::string SavedRole::str() const {
  switch (kind) {
    case Kind::input: return fmt::format("input {}", index);
    case Kind::output: return fmt::format("output {}", index);
    case Kind::computed: break;
  }
  return "a tensor computed in forward";
}

SavedTensor::SavedTensor(const Tensor& t, bool is_output, SavedRole role) : is_output_(is_output), role_(role) {
  if (!t.defined()) return;
  was_defined_ = true;
  saved_version_ = t.version();
  requires_grad_ = t.requires_grad();
  output_nr_ = t.output_nr();
  if (const SavedTensorHookPair* hooks = current_saved_tensor_hooks()) {
    // The hook sees an alias without history and without a link to `t` (detach() would keep t as
    // its view base: a saved output would then hold its own node, a reference cycle).
    auto hooked = std::make_shared<Hooked>();
    hooked->packed = hooks->pack(Tensor(std::make_shared<TensorImpl>(t.storage(), t.sizes(), t.strides(),
                                                                     t.offset(), t.dtype())));
    hooked->unpack_hook = hooks->unpack;
    hooked->watched_storage = t.storage();
    hooked->packed_meta = {t.sizes(), t.dtype(), t.device()};
    hooked_ = std::move(hooked);
    if (requires_grad_ && !is_output) history_ = gradient_edge(t);
    return;
  }
  if (is_output) {
    // Keep the data, drop the grad_fn: the node owns this saved tensor and the grad_fn is the node.
    data_ = Tensor(std::make_shared<TensorImpl>(t.storage(), t.sizes(), t.strides(), t.offset(), t.dtype()));
  } else {
    data_ = t;
    // A non-leaf input's history as it was when saved (PyTorch's SavedVariable keeps its grad_fn):
    // the tensor itself may become a leaf again without a write (a parameter routed through the
    // gradient reducer's node for one forward pass), and a double backward must still go where
    // the forward went.
    if (requires_grad_ && t.grad_fn()) history_ = {t.grad_fn(), t.output_nr()};
  }
}

void SavedTensor::check_version(uint64_t now, const Node& owner) const {
  if (now == saved_version_) return;
  fail("one of the tensors needed for gradient computation has been modified by an in-place operation: "
       "{} of {} ({}, {}) was saved at version {} and is now at version {}. Something wrote to it (or to a "
       "view sharing its storage) between forward and backward. {}",
       role(), owner.describe(), dtype_name(data_.defined() ? data_.dtype() : hooked_->packed_meta.dtype),
       shape_str(data_.defined() ? data_.sizes() : hooked_->packed_meta.sizes), saved_version_, now,
       AnomalyMode::enabled()
           ? "Look for in-place writes (add_, copy_, optimizer steps, buffer broadcasts) after that node ran."
           : "Enable anomaly mode (gs::AnomalyModeGuard) to record where each node was created, and look for "
             "in-place writes (add_, copy_, optimizer steps, buffer broadcasts) after it ran.");
}

Tensor SavedTensor::unpack_hooked(Node& owner) const {
  // A storage that is gone can no longer be written: only a live one is checked.
  const std::shared_ptr<const Hooked> keep = hooked_;  // alive even if the hook releases this tensor
  const Hooked& h = *keep;
  if (auto storage = h.watched_storage.lock()) check_version(storage->version(), owner);
  Tensor u;
  try {
    u = h.unpack_hook(h.packed);
  } catch (const std::bad_any_cast&) {
    fail("saved-tensor hooks: the unpack hook could not take what the pack hook returned for {} of {} (a "
         "std::any holding another type than the unpack hook casts to); pack and unpack must agree",
         role(), owner.describe());
  }
  const TensorMeta& packed_meta = h.packed_meta;
  GS_CHECK(u.defined() && u.sizes() == packed_meta.sizes && u.dtype() == packed_meta.dtype &&
               u.device() == packed_meta.device,
           "saved-tensor hooks: the unpack hook returned {} for {} of {}, expected the packed tensor's shape, dtype "
           "and device: {} {} on {}",
           u.defined() ? u.meta_str() : "an undefined tensor", role(), owner.describe(), dtype_name(packed_meta.dtype),
           shape_str(packed_meta.sizes), packed_meta.device.str());
  if (!requires_grad_) return u.detach();
  // The saved tensor's history: the owner for an output, the input's grad_fn or leaf accumulator.
  auto impl = std::make_shared<TensorImpl>(u.storage(), u.sizes(), u.strides(), u.offset(), u.dtype());
  auto& m = impl->meta();
  m.requires_grad = true;
  m.grad_fn = is_output_ ? owner.shared_from_this() : history_.fn;
  m.output_nr = is_output_ ? output_nr_ : history_.output_nr;
  m.history_version = u.version();
  return Tensor(impl);
}

Tensor SavedTensor::unpack(Node& owner) const {
  if (!was_defined_) return Tensor();
  GS_CHECK(!released_,
           "Trying to backward through the graph a second time (or to read saved tensors after they were freed): "
           "{} of {} was released when backward first ran through it. Pass retain_graph=true to the first "
           "backward() or grad() call if you need to run backward through the same graph again.",
           role(), owner.describe());
  if (hooked_) return unpack_hooked(owner);
  check_version(data_.version(), owner);
  if (!requires_grad_) return data_;
  if (!is_output_) {
    if (!history_.fn || (data_.grad_fn() == history_.fn && data_.output_nr() == history_.output_nr)) return data_;
    // Its history changed since it was saved (the version did not): an alias with the saved one.
    auto impl = std::make_shared<TensorImpl>(data_.storage(), data_.sizes(), data_.strides(), data_.offset(),
                                             data_.dtype());
    auto& m = impl->meta();
    if (data_.impl()->autograd) {  // forward AD: the input's tangent
      m.fw_grad = data_.impl()->autograd->fw_grad;
      m.fw_level = data_.impl()->autograd->fw_level;
    }
    m.requires_grad = true;
    m.grad_fn = history_.fn;
    m.output_nr = history_.output_nr;
    m.history_version = saved_version_;
    return Tensor(impl);
  }
  // Re-attach the owner as grad_fn so gradients of gradients flow through this output.
  auto impl = std::make_shared<TensorImpl>(data_.storage(), data_.sizes(), data_.strides(), data_.offset(),
                                           data_.dtype());
  auto& m = impl->meta();
  if (data_.impl()->autograd) {  // the output's tangent (forward_ad.cpp gave it to the saved handle)
    m.fw_grad = data_.impl()->autograd->fw_grad;
    m.fw_level = data_.impl()->autograd->fw_level;
  }
  m.requires_grad = true;
  m.grad_fn = owner.shared_from_this();
  m.output_nr = output_nr_;
  m.history_version = saved_version_;
  return Tensor(impl);
}

// ---- Node
Node::Node(std::string name) : name_(std::move(name)), sequence_nr_(g_next_sequence_nr++) {
  if (AnomalyMode::enabled()) extras().scope = current_anomaly_scope();
}

const std::string& Node::scope() const {
  static const std::string none;
  return extras_ ? extras_->scope : none;
}

std::string Node::describe() const {
  std::string s = fmt::format("'{}' (node #{}", name_, sequence_nr_);
  if (!scope().empty()) s += fmt::format(", created in scope '{}'", scope());
  return s + ")";
}

Node::~Node() {
  // Children whose last owner is this node are queued and destroyed by the outermost destructor
  // in a loop, instead of recursively.
  thread_local std::vector<std::shared_ptr<Node>> pending;
  thread_local bool draining = false;
  // Take every reference this node holds to the nodes below it before deciding which of them it
  // held last: a child is usually referenced twice from here, by an edge and by the grad_fn of a
  // saved input (mul(h, 1.0) saves h), and the same tensor may be saved twice (mul(h, h)). Only
  // grad_fns of saved tensors that nothing outside this node can see are taken.
  // Inline for the usual few children (a heap vector per destroyed node was a visible share of the
  // tape's cost), and local, so each destructor's list is its own.
  InlineVector<std::shared_ptr<Node>, 8> children;
  for (auto& e : next_edges)
    if (e.fn) children.push_back(std::move(e.fn));
  for (auto& s : saved)
    if (auto h = s.take_history_fn()) children.push_back(std::move(h));
  for (auto& s : saved) {
    const Tensor& t = s.peek();
    if (!t.defined() || !t.impl()->autograd || !t.impl()->autograd->grad_fn) continue;
    long holders = 0;
    for (auto& o : saved) holders += o.peek().impl() == t.impl();
    if (t.impl_ptr().use_count() == holders) children.push_back(std::move(t.impl()->autograd->grad_fn));
  }
  for (auto& c : children) {
    if (c.use_count() == 1) pending.push_back(std::move(c));
    else c.reset();  // another reference remains (maybe later in `children`): only a decrement
  }
  if (draining) return;
  draining = true;
  while (!pending.empty()) {
    std::shared_ptr<Node> n = std::move(pending.back());
    pending.pop_back();
    n.reset();
  }
  draining = false;
}

void Node::release_saved() {
  for (auto& s : saved) s.release();
}

Tensor Node::run_tensor_hooks(uint32_t slot, Tensor grad) {
  if (!extras_) return grad;
  for (auto& [s, hook] : extras_->pre_hooks) {
    if (s != slot || !grad.defined()) continue;
    Tensor r = hook(grad);
    if (r.defined()) {
      GS_CHECK(r.sizes() == grad.sizes() && r.dtype() == grad.dtype(),
               "a hook on output {} of {} returned a gradient of {} {}, expected {}", slot, describe(),
               dtype_name(r.dtype()), shape_str(r.sizes()), grad.meta_str());
      grad = r;
    }
  }
  for (auto& [s, weak] : extras_->retained) {
    if (s != slot || !grad.defined()) continue;
    if (auto t = weak.lock()) {
      auto& m = t->meta();
      // A copy, as for leaves: the gradient flows on and may be the caller's grad_output.
      m.grad = m.grad.defined() ? gradient_arithmetic().add(m.grad, grad) : copy_gradient(grad);
    }
  }
  return grad;
}

void Node::add_tensor_pre_hook(uint32_t slot, TensorHook hook) { extras().pre_hooks.emplace_back(slot, std::move(hook)); }

void Node::add_retained_grad(uint32_t slot, const std::shared_ptr<TensorImpl>& t) {
  for (auto& [s, w] : extras().retained)
    if (s == slot && w.lock() == t) return;
  extras().retained.emplace_back(slot, t);
}

bool Node::remove_retained_grad(const std::shared_ptr<TensorImpl>& t) {
  if (!extras_) return false;
  auto& retained = extras_->retained;
  auto it = std::find_if(retained.begin(), retained.end(), [&](const auto& r) { return r.second.lock() == t; });
  if (it == retained.end()) return false;
  retained.erase(it);
  return true;
}

// ---- BackwardContext
Tensor BackwardContext::saved(size_t i) const {
  GS_CHECK(i < node_.saved.size(), "internal: {} asked for saved tensor {} of {}", node_.describe(), i,
           node_.saved.size());
  return node_.saved[i].unpack(node_);
}

// ---- FunctionNode
std::vector<Tensor> FunctionNode::apply(std::vector<Tensor> grads) {
  BackwardContext ctx(*this);
  return rule_(ctx, grads);
}

void FunctionNode::release_saved() { Node::release_saved(); }

// ---- AccumulateGrad
AccumulateGrad::AccumulateGrad(const std::shared_ptr<TensorImpl>& leaf) : Node("AccumulateGrad"), leaf_(leaf) {
  output_meta.push_back({leaf->sizes, leaf->dtype, leaf->storage->device()});
}

Tensor AccumulateGrad::run_tensor_hooks(uint32_t slot, Tensor grad) {
  auto leaf = leaf_.lock();
  if (!leaf || !leaf->autograd) return grad;
  for (auto& hook : leaf->autograd->leaf_hooks) {
    if (!grad.defined()) break;
    Tensor r = hook(grad);
    if (r.defined()) {
      GS_CHECK(r.sizes() == grad.sizes() && r.dtype() == grad.dtype(),
               "a hook on a leaf returned a gradient of {} {}, expected {}", dtype_name(r.dtype()),
               shape_str(r.sizes()), grad.meta_str());
      grad = r;
    }
  }
  return grad;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor> grads) {
  auto leaf = leaf_.lock();
  Tensor g = grads.at(0);
  if (!leaf || !g.defined()) return {};
  auto& m = leaf->meta();
  if (!m.grad.defined()) {
    // Take the incoming gradient as .grad; copy it unless nobody else can see its storage, so a
    // later in-place update of .grad never writes into another tensor (the caller's grad_output,
    // or another leaf's .grad: add() hands one gradient to both inputs). Also with create_graph.
    bool sole = g.impl_ptr().use_count() <= 2 && g.storage().use_count() == 1 && g.is_contiguous();
    if (sole && GradMode::enabled()) {
      m.grad = g;
    } else if (sole) {
      m.grad = g.detach();
      m.grad.impl()->view_base.reset();
    } else {
      m.grad = copy_gradient(g);
    }
  } else if (GradMode::enabled() || m.grad.requires_grad()) {
    m.grad = gradient_arithmetic().add(m.grad, g);  // create_graph: keep the history
  } else {
    m.grad = gradient_arithmetic().add(m.grad, g).detach();
  }
  Tensor leaf_tensor(leaf);
  for (auto& hook : m.post_accumulate_hooks) hook(leaf_tensor);
  return {};
}

Edge gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  if (t.grad_fn()) return {t.grad_fn(), t.output_nr()};
  auto& m = t.impl()->meta();
  auto acc = m.grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    m.grad_accumulator = acc;
  }
  return {acc, 0};
}

}  // namespace gs
