#include "engine/autograd/gradcheck.h"

#include <algorithm>
#include <cmath>

#include "engine/autograd/engine.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"

namespace gs {
namespace {

using Matrix = std::vector<std::vector<double>>;  // [input real index][output real index]

int real_width(DType d) { return is_complex(d) ? 2 : 1; }

std::vector<double> realify(const Tensor& t) {
  std::vector<double> out;
  if (is_complex(t.dtype())) {
    for (auto v : t.to_vector<c128>()) out.push_back(v.real()), out.push_back(v.imag());
  } else {
    for (auto v : t.to_vector<double>()) out.push_back(v);
  }
  return out;
}

std::vector<Tensor> differentiable_outputs(const std::vector<Tensor>& outs) {
  std::vector<Tensor> r;
  for (const auto& o : outs)
    if (o.defined() && is_differentiable(o.dtype())) r.push_back(o);
  return r;
}

std::vector<double> flat_outputs(const std::vector<Tensor>& outs) {
  std::vector<double> flat;
  for (const auto& o : differentiable_outputs(outs)) {
    auto v = realify(o);
    flat.insert(flat.end(), v.begin(), v.end());
  }
  return flat;
}

// A copy of t in t's memory order (LeafLayout::as_input).
Tensor copy_keeping_layout(const Tensor& t) {
  if (t.is_contiguous()) return contiguous_copy(t, true);
  // Lay the copy out densely in the order of t's strides (largest first), then view it back.
  std::vector<int64_t> order(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return t.stride(a) > t.stride(b); });
  Shape dense_sizes;
  for (auto d : order) dense_sizes.push_back(t.size(d));
  Shape dense_strides = contiguous_strides(dense_sizes), strides(t.dim());
  for (int64_t k = 0; k < t.dim(); ++k) strides[order[k]] = dense_strides[k];
  Tensor dense = empty(dense_sizes, t.dtype(), t.device());
  Tensor out(std::make_shared<TensorImpl>(dense.storage(), t.sizes(), strides, 0, t.dtype()));
  copy_values(out, t);
  return out;
}

// Memory offset (in elements, from the first element) of logical row-major element j.
int64_t element_offset(const Tensor& t, int64_t j) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    off += (j % t.size(d)) * t.stride(d);
    j /= t.size(d);
  }
  return off;
}

Matrix numerical_jacobian(const DifferentiableFn& f, const std::vector<Tensor>& inputs, double eps,
                          size_t n_out) {
  Matrix J;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    int w = real_width(inputs[i].dtype());
    for (int64_t j = 0; j < inputs[i].numel(); ++j) {
      for (int c = 0; c < w; ++c) {
        auto eval = [&](double delta) {
          auto xs = fresh_leaves(inputs);
          int64_t at = element_offset(xs[i], j);
          if (w == 2) xs[i].data<c128>()[at] += c == 0 ? c128(delta, 0) : c128(0, delta);
          else xs[i].data<double>()[at] += delta;
          return flat_outputs(f(xs));
        };
        auto plus = eval(eps), minus = eval(-eps);
        GS_CHECK(plus.size() == n_out, "gradcheck: the function returned {} output values after a perturbation, "
                 "expected {}", plus.size(), n_out);
        std::vector<double> row(n_out);
        for (size_t k = 0; k < n_out; ++k) row[k] = (plus[k] - minus[k]) / (2 * eps);
        J.push_back(std::move(row));
      }
    }
  }
  return J;
}

Matrix analytical_jacobian(const DifferentiableFn& f, const std::vector<Tensor>& inputs, size_t n_out) {
  auto xs = fresh_leaves(inputs);
  std::vector<Tensor> diff_inputs;
  for (const auto& x : xs)
    if (x.defined() && x.requires_grad()) diff_inputs.push_back(x);
  size_t n_in = 0;
  for (const auto& x : diff_inputs) n_in += x.numel() * real_width(x.dtype());
  Matrix J(n_in, std::vector<double>(n_out, 0.0));
  auto outs = differentiable_outputs(f(xs));
  size_t col = 0;
  for (size_t o = 0; o < outs.size(); ++o) {
    int w = real_width(outs[o].dtype());
    if (!outs[o].requires_grad()) {
      col += outs[o].numel() * w;
      continue;
    }
    for (int64_t k = 0; k < outs[o].numel(); ++k) {
      for (int c = 0; c < w; ++c, ++col) {
        std::vector<Tensor> gos, roots;
        for (const auto& t : outs)
          if (t.requires_grad()) roots.push_back(t), gos.push_back(zeros_like(t));
        size_t slot = 0;
        for (size_t q = 0; q < o; ++q) slot += outs[q].requires_grad();
        // d(Re y_k) pairs with grad_output 1; d(Im y_k) with grad_output i (PyTorch's convention).
        if (w == 2) gos[slot].data<c128>()[k] = c == 0 ? c128(1, 0) : c128(0, 1);
        else gos[slot].data<double>()[k] = 1.0;
        auto g = grad(roots, diff_inputs, gos, {.retain_graph = true, .allow_unused = true});
        size_t row = 0;
        for (size_t i = 0; i < diff_inputs.size(); ++i) {
          int wi = real_width(diff_inputs[i].dtype());
          if (g[i].defined()) {
            auto v = realify(g[i]);
            for (size_t r = 0; r < v.size(); ++r) J[row + r][col] = v[r];
          }
          row += diff_inputs[i].numel() * wi;
        }
      }
    }
  }
  return J;
}

std::string locate(const std::vector<Tensor>& inputs, size_t row) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    size_t n = inputs[i].numel() * real_width(inputs[i].dtype());
    if (row < n) {
      int w = real_width(inputs[i].dtype());
      return fmt::format("input {} element {}{}", i, row / w, w == 2 ? (row % 2 ? " (imag)" : " (real)") : "");
    }
    row -= n;
  }
  return "?";
}

}  // namespace

std::vector<Tensor> fresh_leaves(const std::vector<Tensor>& inputs, LeafLayout layout) {
  std::vector<Tensor> r;
  for (const auto& t : inputs) {
    if (!t.defined()) {
      r.push_back(t);
      continue;
    }
    Tensor c = layout == LeafLayout::as_input ? copy_keeping_layout(t) : contiguous_copy(t, true);
    if (t.requires_grad()) c.set_requires_grad(true);
    r.push_back(c);
  }
  return r;
}

GradcheckReport gradcheck(const DifferentiableFn& f, const std::vector<Tensor>& inputs,
                          const GradcheckOptions& opt) {
  GradcheckReport rep;
  bool any = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    any = true;
    GS_CHECK(inputs[i].dtype() == DType::f64 || inputs[i].dtype() == DType::c128,
             "gradcheck: input {} is {}; finite differences need f64 or c128 inputs", i, inputs[i].meta_str());
  }
  GS_CHECK(any, "gradcheck: no input requires grad, so there is nothing to check");
  GradModeGuard on(true);
  size_t n_out = flat_outputs(f(fresh_leaves(inputs))).size();
  Matrix num = numerical_jacobian(f, inputs, opt.eps, n_out);
  Matrix ana = analytical_jacobian(f, inputs, n_out);
  for (size_t r = 0; r < num.size(); ++r) {
    for (size_t k = 0; k < n_out; ++k) {
      double a = ana[r][k], n = num[r][k], err = std::abs(a - n);
      rep.max_abs_error = std::max(rep.max_abs_error, err);
      if (std::abs(n) >= 1e-6) rep.max_rel_error = std::max(rep.max_rel_error, err / std::abs(n));
      if (!(err <= opt.atol + opt.rtol * std::abs(n)) && rep.ok) {
        rep.ok = false;
        rep.failure = fmt::format("Jacobian mismatch for {} and output value {}: analytical {:.10g}, numerical "
                                  "{:.10g} (|diff| {:.3g} > atol {} + rtol {} * |numerical|)",
                                  locate(inputs, r), k, a, n, err, opt.atol, opt.rtol);
      }
    }
  }
  // Reentrancy: backward must give the same Jacobian twice.
  Matrix again = analytical_jacobian(f, inputs, n_out);
  for (size_t r = 0; r < ana.size() && rep.ok; ++r)
    for (size_t k = 0; k < n_out; ++k)
      if (std::abs(again[r][k] - ana[r][k]) > opt.nondet_tol) {
        rep.ok = false;
        rep.failure = fmt::format("backward is not reentrant: two runs gave {:.17g} and {:.17g} for {} and output "
                                  "value {}", ana[r][k], again[r][k], locate(inputs, r), k);
        break;
      }
  // Zero output gradients must give zero (or no) input gradients.
  if (rep.ok) {
    auto xs = fresh_leaves(inputs);
    std::vector<Tensor> diff;
    for (auto& x : xs)
      if (x.defined() && x.requires_grad()) diff.push_back(x);
    std::vector<Tensor> roots, gos;
    for (auto& o : differentiable_outputs(f(xs)))
      if (o.requires_grad()) roots.push_back(o), gos.push_back(zeros_like(o));
    if (!roots.empty()) {
      auto g = grad(roots, diff, gos, {.allow_unused = true});
      for (size_t i = 0; i < g.size() && rep.ok; ++i) {
        if (!g[i].defined()) continue;
        for (double v : realify(g[i]))
          if (v != 0.0) {
            rep.ok = false;
            rep.failure = fmt::format("zero output gradients gave a non-zero gradient ({}) for differentiable input "
                                      "{}", v, i);
            break;
          }
      }
    }
  }
  return rep;
}

GradcheckReport gradgradcheck(const DifferentiableFn& f, const std::vector<Tensor>& inputs,
                              const GradcheckOptions& opt) {
  GradModeGuard on(true);
  auto outs = differentiable_outputs(f(fresh_leaves(inputs)));
  std::vector<Tensor> all = inputs;
  size_t n_in = inputs.size();
  uint64_t stream = opt.key.stream;
  size_t n_v = 0;
  for (const auto& o : outs) {
    if (!o.requires_grad()) continue;
    Tensor v = randn(o.sizes(), {opt.key.seed, stream++}, o.dtype());
    v.set_requires_grad(true);
    all.push_back(v);
    ++n_v;
  }
  GS_CHECK(n_v > 0, "gradgradcheck: no output requires grad");
  DifferentiableFn g = [&f, n_in](const std::vector<Tensor>& xs) {
    std::vector<Tensor> in(xs.begin(), xs.begin() + static_cast<std::ptrdiff_t>(n_in));
    std::vector<Tensor> vs(xs.begin() + static_cast<std::ptrdiff_t>(n_in), xs.end());
    std::vector<Tensor> diff;
    for (const auto& x : in)
      if (x.defined() && x.requires_grad()) diff.push_back(x);
    std::vector<Tensor> roots;
    for (const auto& o : differentiable_outputs(f(in)))
      if (o.requires_grad()) roots.push_back(o);
    GS_CHECK(roots.size() == vs.size(), "gradgradcheck: the function's outputs changed between calls");
    auto gs_ = grad(roots, diff, vs, {.create_graph = true, .allow_unused = true});
    for (size_t i = 0; i < gs_.size(); ++i)
      if (!gs_[i].defined()) gs_[i] = zeros_like(diff[i]);
    return gs_;
  };
  return gradcheck(g, all, opt);
}


namespace {

// Deterministic values in [-1, 1) (splitmix64), for jvpcheck's tangent.
double unit_value(uint64_t seed, uint64_t i) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (i + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) / 4503599627370496.0 - 1.0;
}

// The tangents of f's differentiable outputs (zeros where an output has none), realified.
std::vector<double> forward_tangents(const DifferentiableFn& f, const std::vector<Tensor>& inputs,
                                     const std::vector<Tensor>& tangents, bool with_reverse) {
  forward_ad::DualLevel level;
  auto xs = fresh_leaves(inputs);
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!tangents[i].defined()) continue;
    Tensor primal = with_reverse ? xs[i] : xs[i].detach();
    xs[i] = forward_ad::make_dual(primal, tangents[i]);
  }
  std::vector<double> flat;
  for (const auto& o : differentiable_outputs(f(xs))) {
    Tensor t = forward_ad::tangent_of(o);
    auto v = t.defined() ? realify(contiguous_copy(t, true)) : std::vector<double>(o.numel() * real_width(o.dtype()), 0.0);
    flat.insert(flat.end(), v.begin(), v.end());
  }
  return flat;
}

}  // namespace

GradcheckReport jvpcheck(const DifferentiableFn& f, const std::vector<Tensor>& inputs, const GradcheckOptions& opt) {
  GradcheckReport rep;
  GradModeGuard on(true);
  // The tangent: one value per real component of the inputs that require grad.
  std::vector<Tensor> tangents(inputs.size());
  std::vector<double> t_flat;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
    GS_CHECK(inputs[i].dtype() == DType::f64 || inputs[i].dtype() == DType::c128,
             "jvpcheck: input {} is {}; finite differences need f64 or c128 inputs", i, inputs[i].meta_str());
    const int64_t n = inputs[i].numel();
    if (is_complex(inputs[i].dtype())) {
      std::vector<c128> v(n);
      for (int64_t k = 0; k < n; ++k) {
        v[k] = c128(unit_value(opt.key.seed, t_flat.size()), unit_value(opt.key.seed, t_flat.size() + 1));
        t_flat.push_back(v[k].real()), t_flat.push_back(v[k].imag());
      }
      tangents[i] = from_vector(v, inputs[i].sizes());
    } else {
      std::vector<double> v(n);
      for (int64_t k = 0; k < n; ++k) t_flat.push_back(v[k] = unit_value(opt.key.seed, t_flat.size()));
      tangents[i] = from_vector(v, inputs[i].sizes());
    }
  }
  GS_CHECK(!t_flat.empty(), "jvpcheck: no input requires grad, so there is nothing to check");
  const size_t n_out = flat_outputs(f(fresh_leaves(inputs))).size();
  const auto before = forward_ad::rule_counts();
  const std::vector<double> jt = forward_tangents(f, inputs, tangents, true);
  const auto after = forward_ad::rule_counts();
  rep.detail = fmt::format("view {}, written {}, diagonal {}, derived {}", after.view - before.view,
                           after.written - before.written, after.diagonal - before.diagonal,
                           after.derived - before.derived);
  GS_CHECK(jt.size() == n_out, "jvpcheck: {} tangent values for {} output values", jt.size(), n_out);
  const std::vector<double> jt_plain = forward_tangents(f, inputs, tangents, false);
  const Matrix num = numerical_jacobian(f, inputs, opt.eps, n_out);
  const Matrix ana = analytical_jacobian(f, inputs, n_out);
  for (size_t k = 0; k < n_out && rep.ok; ++k) {
    double by_num = 0, by_ana = 0, scale = 0;
    for (size_t r = 0; r < t_flat.size(); ++r) {
      by_num += t_flat[r] * num[r][k];
      by_ana += t_flat[r] * ana[r][k];
      scale += std::abs(t_flat[r] * ana[r][k]);
    }
    const double err = std::abs(jt[k] - by_num);
    rep.max_abs_error = std::max(rep.max_abs_error, err);
    if (std::abs(by_num) >= 1e-6) rep.max_rel_error = std::max(rep.max_rel_error, err / std::abs(by_num));
    if (!(err <= opt.atol + opt.rtol * std::abs(by_num))) {
      rep.ok = false;
      rep.failure = fmt::format("JVP mismatch at output value {}: forward mode {:.10g}, central differences {:.10g} "
                                "(|diff| {:.3g} > atol {} + rtol {} * |numerical|)",
                                k, jt[k], by_num, err, opt.atol, opt.rtol);
    } else if (!(std::abs(jt[k] - by_ana) <= 1e-9 * (1.0 + scale))) {
      rep.ok = false;
      rep.failure = fmt::format("JVP and VJP disagree at output value {}: forward mode {:.17g}, the reverse-mode "
                                "Jacobian times the tangent {:.17g} (transpose identity)",
                                k, jt[k], by_ana);
    } else if (!(std::abs(jt[k] - jt_plain[k]) <= 1e-12 * (1.0 + std::abs(jt[k])))) {
      rep.ok = false;
      rep.failure = fmt::format("the tangent depends on whether the inputs require grad, at output value {}: {:.17g} "
                                "with, {:.17g} without",
                                k, jt[k], jt_plain[k]);
    }
  }
  return rep;
}

}  // namespace gs
