#include "engine/autograd/custom_function.h"

#include "engine/autograd/forward_ad.h"
#include "engine/autograd/record.h"

namespace gs {

std::vector<Tensor> FunctionCtx::saved_tensors() const {
  GS_CHECK(node_, "FunctionCtx::saved_tensors() is only available in backward");
  std::vector<Tensor> out;
  for (const auto& s : node_->saved) out.push_back(s.unpack(*node_));
  return out;
}

struct CustomFunctionImpl {
  static std::vector<Tensor> apply(std::string name, CustomForward fwd, CustomBackward bwd,
                                   const std::vector<Tensor>& inputs) {
    auto ctx = std::make_shared<FunctionCtx>();
    bool record = should_record(inputs);
    for (const auto& in : inputs) ctx->needs_input_grad_.push_back(record && needs_gradient(in));
    std::vector<uint64_t> versions_before;
    for (const auto& in : inputs) versions_before.push_back(in.defined() ? in.version() : 0);

    std::vector<Tensor> outputs;
    {
      NoGradGuard no_grad;
      forward_ad::PauseGuard primals_only;  // as torch: forward sees no tangents; backward defines the JVP
      outputs = fwd(*ctx, inputs);
    }
    // Dirty inputs: must be returned, must not be leaves that require grad, and must count as written.
    for (const auto& d : ctx->dirty_) {
      // Count the write first: forward has already changed the data, so even when the checks
      // below refuse it, graphs that saved this tensor must see the new version.
      uint64_t before = d.version();
      for (size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i].is_same(d)) {
          before = versions_before[i];
          if (d.version() == before) bump_version(d);
        }
      bool returned = false;
      for (const auto& o : outputs) returned |= o.is_same(d);
      GS_CHECK(returned, "{}: a tensor passed to mark_dirty() must be returned from forward", name);
      // The other inputs count as the write's operands: a view that needs no grad itself (a
      // detach() alias, a view made under no_grad) is still refused when they need grad.
      if (record) check_inplace(d, name.c_str(), inputs, before);
    }
    // An input returned unchanged gets a fresh alias so it can carry this function's history.
    for (auto& o : outputs) {
      bool is_dirty = false;
      for (const auto& d : ctx->dirty_) is_dirty |= o.is_same(d);
      for (const auto& in : inputs)
        if (o.is_same(in) && !is_dirty) o = alias_with_geometry(in, in.sizes(), in.strides(), in.offset());
    }
    if (!record) return outputs;

    auto node = std::make_shared<FunctionNode>(
        name, [ctx, bwd](BackwardContext& bctx, const std::vector<Tensor>& grads) -> std::vector<Tensor> {
          ctx->node_ = const_cast<Node*>(&bctx.node());
          auto r = bwd(*ctx, grads);
          GS_CHECK(r.size() == ctx->needs_input_grad_.size(),
                   "custom function {}: backward returned {} gradients, expected {} (one per input)",
                   bctx.node().name(), r.size(), ctx->needs_input_grad_.size());
          return r;
        });
    node->once_differentiable = ctx->once_differentiable_;
    std::vector<Tensor*> out_ptrs;
    for (auto& o : outputs) out_ptrs.push_back(&o);
    // A dirty non-leaf's history stays valid: this node records the write.
    std::vector<std::shared_ptr<Node>> dirty_old_fns;
    for (const auto& d : ctx->dirty_) {
      dirty_old_fns.push_back(d.grad_fn());
      if (!d.is_leaf() && d.requires_grad()) d.impl()->meta().history_version = d.version();
    }
    {
      forward_ad::PauseGuard later;  // the derived JVP needs the saved tensors, attached below
      connect_node(node, inputs, out_ptrs, {}, {});
    }
    // retain_grad() follows the dirty tensor to its new history, as for built-in in-place ops; a
    // dirty view's base is rebased through copy_slices, as PyTorch's CopySlices.
    for (size_t k = 0; k < ctx->dirty_.size(); ++k) {
      const Tensor& d = ctx->dirty_[k];
      if (dirty_old_fns[k] && dirty_old_fns[k]->remove_retained_grad(d.impl_ptr()))
        node->add_retained_grad(d.output_nr(), d.impl_ptr());
      if (d.is_view() && d.requires_grad()) rebase_base_history(d);
    }
    // Saved in save_for_backward's order; outputs are saved as outputs (no reference cycle).
    for (const auto& s : ctx->to_save_) {
      SavedRole role;
      bool is_output = false;
      for (size_t k = 0; k < outputs.size() && !is_output; ++k)
        if (outputs[k].is_same(s)) is_output = true, role = SavedRole::output(k);
      for (size_t k = 0; k < inputs.size() && !is_output; ++k)
        if (inputs[k].is_same(s)) role = SavedRole::input(k);
      node->saved.emplace_back(s, is_output, role);
    }
    for (const auto& nd : ctx->non_differentiable_)
      for (auto& o : outputs)
        if (o.is_same(nd) && o.impl()->autograd) {
          o.impl()->autograd->grad_fn.reset();
          o.impl()->autograd->requires_grad = false;
        }
    if (forward_ad::active()) forward_ad::propagate_tangents(node, inputs, out_ptrs, false);
    // The ctx lives in the node: holding outputs there would be a reference cycle.
    ctx->to_save_.clear();
    ctx->dirty_.clear();
    ctx->non_differentiable_.clear();
    return outputs;
  }
};

std::vector<Tensor> apply_custom_function(std::string name, CustomForward fwd, CustomBackward bwd,
                                          const std::vector<Tensor>& inputs) {
  return CustomFunctionImpl::apply(std::move(name), fwd, bwd, inputs);
}

}  // namespace gs
