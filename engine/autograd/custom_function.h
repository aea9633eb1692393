// User-defined differentiable functions, in the style of torch.autograd.Function: write a forward
// and a backward, and the result is a tape op like any built-in one (it composes with create_graph,
// hooks and no-grad; tools/examples/custom_function.cpp runs one through gradcheck).
//
//   struct Cube {
//     static std::vector<Tensor> forward(FunctionCtx& ctx, const std::vector<Tensor>& in) {
//       ctx.save_for_backward({in[0]});
//       return {...};
//     }
//     static std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& grads) {...}
//   };
//   auto out = apply_function<Cube>("cube", {x});
//
// forward runs without recording. If it modified an input in place it calls ctx.mark_dirty(t)
// and returns t among its outputs; that tensor's history then goes through this function.
#pragma once
#include <any>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/node.h"

namespace gs {

class FunctionCtx {
 public:
  void save_for_backward(std::vector<Tensor> tensors) { to_save_ = std::move(tensors); }
  // The saved tensors, version-checked (valid in backward only).
  std::vector<Tensor> saved_tensors() const;
  void mark_dirty(const Tensor& t) { dirty_.push_back(t); }
  void mark_non_differentiable(const Tensor& t) { non_differentiable_.push_back(t); }
  // Marks backward as not differentiable again (create_graph through it then errors).
  void set_once_differentiable() { once_differentiable_ = true; }
  bool needs_input_grad(size_t i) const { return needs_input_grad_.at(i); }
  // Non-tensor state for backward: ctx.attrs["dim"] = 2;
  std::map<std::string, std::any> attrs;

 private:
  friend struct CustomFunctionImpl;
  std::vector<Tensor> to_save_, dirty_, non_differentiable_;
  std::vector<bool> needs_input_grad_;
  bool once_differentiable_ = false;
  Node* node_ = nullptr;
};

using CustomForward = std::vector<Tensor> (*)(FunctionCtx&, const std::vector<Tensor>&);
using CustomBackward = std::vector<Tensor> (*)(FunctionCtx&, const std::vector<Tensor>&);

std::vector<Tensor> apply_custom_function(std::string name, CustomForward fwd, CustomBackward bwd,
                                          const std::vector<Tensor>& inputs);

template <typename F>
std::vector<Tensor> apply_function(std::string name, const std::vector<Tensor>& inputs) {
  return apply_custom_function(std::move(name), &F::forward, &F::backward, inputs);
}

}  // namespace gs
