// Function transforms over gs ops, as torch.func: jvp and vjp, Jacobians by forward mode (jacfwd)
// or reverse mode (jacrev), the Hessian and Hessian-vector products by forward-over-reverse.
//
//   auto [y, jv] = gs::jvp(f, {x}, {v});       // f(x) and J v, one forward pass with tangents
//   Tensor h  = gs::hessian(loss, x);          // x.sizes() + x.sizes()
//   Tensor hv = gs::hvp(loss, x, v);           // H v = jvp(grad(loss), x, v)
//
// Jacobians loop over basis vectors (no vmap): one pass per input element (jacfwd) or per output
// element (jacrev), so they suit small problems and tests; jvp, vjp and hvp cost one pass each.
// Forward mode itself: engine/autograd/forward_ad.h.
#pragma once
#include <functional>
#include <vector>

#include "engine/autograd/gradcheck.h"
#include "engine/tensor.h"

namespace gs {

struct JvpResult {
  std::vector<Tensor> outputs;
  std::vector<Tensor> tangents;  // J v per output; zeros where an output does not depend on v
};
// One tangent per primal, each of its primal's shape and dtype.
JvpResult jvp(const DifferentiableFn& f, const std::vector<Tensor>& primals, const std::vector<Tensor>& tangents);

struct VjpResult {
  std::vector<Tensor> outputs;
  std::vector<Tensor> gradients;  // J^T u per primal; zeros where the outputs do not depend on it
};
// One cotangent per output, each of its output's shape and dtype.
VjpResult vjp(const DifferentiableFn& f, const std::vector<Tensor>& primals, const std::vector<Tensor>& cotangents);

// jacobian[i][j] = d outputs[i] / d inputs[j], of shape outputs[i].sizes() + inputs[j].sizes().
// Real inputs and outputs (f32 / f64).
using Jacobian = std::vector<std::vector<Tensor>>;
Jacobian jacfwd(const DifferentiableFn& f, const std::vector<Tensor>& inputs);
Jacobian jacrev(const DifferentiableFn& f, const std::vector<Tensor>& inputs);

// For a scalar (one-element) function of one real tensor.
using ScalarFn = std::function<Tensor(const Tensor&)>;
// H v, forward-over-reverse: the tangent v carried through the reverse pass of the gradient.
Tensor hvp(const ScalarFn& f, const Tensor& x, const Tensor& v);
// The Hessian (x.sizes() + x.sizes()), one hvp per element of x.
Tensor hessian(const ScalarFn& f, const Tensor& x);

}  // namespace gs
