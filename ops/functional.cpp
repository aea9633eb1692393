#include "ops/functional.h"

#include "engine/autograd/engine.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "ops/shape_ops.h"
#include "ops/view.h"

namespace gs {
namespace {

void check_like(const Tensor& primal, const Tensor& other, const char* fn, const char* what, size_t i) {
  GS_CHECK(primal.defined() && other.defined(), "{}: {} {} is undefined", fn, what, i);
  GS_CHECK(other.sizes() == primal.sizes() && other.dtype() == gradient_dtype(primal.dtype()) &&
               other.device() == primal.device(),
           "{}: {} {} must have the shape, dtype and device of its counterpart {} ({}), got {}", fn, what, i, i,
           primal.meta_str(), other.meta_str());
}

void check_real(const Tensor& t, const char* fn, const char* what, size_t i) {
  GS_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64, "{}: {} {} must be f32 or f64, got {}", fn, what, i,
           t.meta_str());
}

// The k-th basis vector shaped like `like`.
Tensor basis(const Tensor& like, int64_t k) {
  std::vector<double> v(static_cast<size_t>(like.numel()), 0.0);
  v[static_cast<size_t>(k)] = 1.0;
  Tensor e = cast_copy(from_vector(v, like.sizes()), like.dtype());
  return like.device().type == DeviceType::cpu ? e : to_device_copy(e, like.device());
}

Tensor zeros_like_value(const Tensor& t) { return zeros(t.sizes(), gradient_dtype(t.dtype()), t.device()); }

// One Jacobian block from its columns (jacfwd: each of the output's shape, stacked last) or rows
// (jacrev: each of the input's shape, stacked first); both flatten in row-major order.
Tensor assemble(const std::vector<Tensor>& parts, const Shape& out_shape, const Shape& in_shape, bool rows) {
  Shape shape = out_shape;
  shape.insert(shape.end(), in_shape.begin(), in_shape.end());
  return reshape(stack(parts, rows ? 0 : -1), shape);
}

}  // namespace

JvpResult jvp(const DifferentiableFn& f, const std::vector<Tensor>& primals, const std::vector<Tensor>& tangents) {
  GS_CHECK(primals.size() == tangents.size(), "jvp: one tangent per primal expected: got {} primals and {} tangents",
           primals.size(), tangents.size());
  for (size_t i = 0; i < primals.size(); ++i) check_like(primals[i], tangents[i], "jvp", "tangent", i);
  forward_ad::DualLevel level;
  std::vector<Tensor> duals;
  for (size_t i = 0; i < primals.size(); ++i) duals.push_back(forward_ad::make_dual(primals[i], tangents[i]));
  JvpResult r;
  for (const Tensor& y : f(duals)) {
    forward_ad::Dual d = forward_ad::unpack_dual(y);
    r.outputs.push_back(d.primal);
    r.tangents.push_back(d.tangent.defined() ? contiguous_copy(d.tangent, true) : zeros_like_value(y));
  }
  return r;
}

VjpResult vjp(const DifferentiableFn& f, const std::vector<Tensor>& primals, const std::vector<Tensor>& cotangents) {
  std::vector<Tensor> leaves;
  for (const Tensor& p : primals) {
    GS_CHECK(p.defined() && is_differentiable(p.dtype()), "vjp: primals must be floating point or complex, got {}",
             p.defined() ? p.meta_str() : "undefined");
    leaves.push_back(p.detach().set_requires_grad(true));
  }
  VjpResult r;
  {
    GradModeGuard on(true);
    r.outputs = f(leaves);
  }
  GS_CHECK(r.outputs.size() == cotangents.size(), "vjp: one cotangent per output expected: {} outputs, {} cotangents",
           r.outputs.size(), cotangents.size());
  std::vector<Tensor> roots, seeds;
  for (size_t i = 0; i < r.outputs.size(); ++i) {
    check_like(r.outputs[i], cotangents[i], "vjp", "cotangent", i);
    if (r.outputs[i].requires_grad()) roots.push_back(r.outputs[i]), seeds.push_back(cotangents[i]);
  }
  GradOptions options;
  options.allow_unused = true;
  std::vector<Tensor> g = roots.empty() ? std::vector<Tensor>(leaves.size()) : grad(roots, leaves, seeds, options);
  for (size_t j = 0; j < leaves.size(); ++j)
    r.gradients.push_back(g[j].defined() ? g[j] : zeros_like_value(leaves[j]));
  for (auto& o : r.outputs) o = o.detach();
  return r;
}

Jacobian jacfwd(const DifferentiableFn& f, const std::vector<Tensor>& inputs) {
  for (size_t j = 0; j < inputs.size(); ++j) check_real(inputs[j], "jacfwd", "input", j);
  std::vector<Tensor> primals;
  for (const Tensor& x : inputs) primals.push_back(x.detach());
  std::vector<Tensor> outputs;
  {
    NoGradGuard ng;
    outputs = f(primals);
  }
  Jacobian jac(outputs.size(), std::vector<Tensor>(inputs.size()));
  for (size_t j = 0; j < inputs.size(); ++j) {
    std::vector<std::vector<Tensor>> columns(outputs.size());
    for (int64_t k = 0; k < inputs[j].numel(); ++k) {
      std::vector<Tensor> t;
      for (size_t q = 0; q < inputs.size(); ++q) t.push_back(q == j ? basis(primals[q], k) : zeros_like_value(primals[q]));
      JvpResult r = jvp(f, primals, t);
      for (size_t i = 0; i < outputs.size(); ++i) columns[i].push_back(r.tangents[i]);
    }
    for (size_t i = 0; i < outputs.size(); ++i)
      jac[i][j] = columns[i].empty() ? zeros_like_value(outputs[i])
                                     : assemble(columns[i], outputs[i].sizes(), inputs[j].sizes(), false);
  }
  return jac;
}

Jacobian jacrev(const DifferentiableFn& f, const std::vector<Tensor>& inputs) {
  for (size_t j = 0; j < inputs.size(); ++j) check_real(inputs[j], "jacrev", "input", j);
  std::vector<Tensor> outputs;
  {
    NoGradGuard ng;
    std::vector<Tensor> plain;
    for (const Tensor& x : inputs) plain.push_back(x.detach());
    outputs = f(plain);
  }
  Jacobian jac(outputs.size(), std::vector<Tensor>(inputs.size()));
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_real(outputs[i], "jacrev", "output", i);
    std::vector<std::vector<Tensor>> rows(inputs.size());
    for (int64_t k = 0; k < outputs[i].numel(); ++k) {
      std::vector<Tensor> u;
      for (size_t q = 0; q < outputs.size(); ++q) u.push_back(q == i ? basis(outputs[q], k) : zeros_like_value(outputs[q]));
      VjpResult r = vjp(f, inputs, u);
      for (size_t j = 0; j < inputs.size(); ++j) rows[j].push_back(r.gradients[j]);
    }
    for (size_t j = 0; j < inputs.size(); ++j)
      jac[i][j] = rows[j].empty() ? zeros_like_value(outputs[i]) : assemble(rows[j], outputs[i].sizes(), inputs[j].sizes(), true);
  }
  return jac;
}

Tensor hvp(const ScalarFn& f, const Tensor& x, const Tensor& v) {
  check_real(x, "hvp", "input", 0);
  check_like(x, v, "hvp", "vector", 0);
  forward_ad::DualLevel level;
  GradModeGuard on(true);
  Tensor leaf = x.detach().set_requires_grad(true);
  Tensor dual = forward_ad::make_dual(leaf, v);
  Tensor y = f(dual);
  GS_CHECK(y.defined() && y.numel() == 1, "hvp: the function must return one element, got {}",
           y.defined() ? y.meta_str() : "undefined");
  if (!y.requires_grad()) return zeros_like_value(x);  // f does not depend on x (torch.func: zeros)
  GradOptions options;
  options.create_graph = true;  // the reverse pass's ops carry v's tangent forward
  options.allow_unused = true;
  std::vector<Tensor> g = grad({y}, {leaf}, {}, options);
  Tensor hv = g[0].defined() ? forward_ad::tangent_of(g[0]) : Tensor();
  return hv.defined() ? contiguous_copy(hv, true) : zeros_like_value(x);
}

Tensor hessian(const ScalarFn& f, const Tensor& x) {
  check_real(x, "hessian", "input", 0);
  std::vector<Tensor> columns;
  for (int64_t k = 0; k < x.numel(); ++k) columns.push_back(hvp(f, x, basis(x.detach(), k)));
  Shape both = x.sizes();
  both.insert(both.end(), x.sizes().begin(), x.sizes().end());
  if (columns.empty()) return zeros(both, x.dtype(), x.device());
  return assemble(columns, x.sizes(), x.sizes(), false);
}

}  // namespace gs
