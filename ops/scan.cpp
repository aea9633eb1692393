// cumsum and cumprod along one dim, for f32 and f64: one kernel (ops/reduce_math.h, scan_line)
// on the CPU and on CUDA (ops/reduce_more_cuda.cu), forward or from the end. Their rules are
// written with scans and other differentiable ops, so derivatives of every order work.
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/line_loop.h"
#include "ops/reduce_math.h"
#include "ops/reduce_more.h"
#include "ops/reduce_more_cuda.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {
namespace {

using cuda_kernels::ScanKind;

// (t.sizes) -> (t.sizes), contiguous: the running sum or product along dim d.
Tensor scan_kernel(const Tensor& t, int64_t d, ScanKind kind, bool reverse, const char* op) {
  const Tensor x = contiguous_copy(t);
  Tensor out = empty(t.sizes(), t.dtype(), t.device());
  const kernels::LineShape s = kernels::lines_along(t.sizes(), d);
  if (kernels::on_cuda(t)) {
    kernels::launch_cuda(op, "scan", t, [&](void* stream) {
      return GS_CUDA_CALL(cuda_kernels::scan(kind, t.dtype(), out.raw_data(), x.raw_data(), s.outer, s.n, s.inner,
                                             reverse, stream));
    });
    return out;
  }
  kernels::check_cpu(t, op);
  dispatch_float(t.dtype(), op, [&]<typename T>() {
    using A = std::conditional_t<std::is_same_v<T, float>, double, T>;
    const T* px = x.data<T>();
    T* po = out.data<T>();
    kernels::for_each_line(s, [&](int64_t, int64_t base) {
      if (kind == ScanKind::sum) math::scan_line(px + base, po + base, s.n, s.inner, reverse, A(0), math::SumStep{});
      else math::scan_line(px + base, po + base, s.n, s.inner, reverse, A(1), math::ProdStep{});
    });
  });
  return out;
}

int64_t checked_dim(const Tensor& t, int64_t dim, const char* op) {
  kernels::check_defined(t, op);
  if (is_storage_only(t.dtype())) fail_storage_only(op, t.dtype());
  GS_CHECK(is_floating(t.dtype()), "{}: expected an f32 or f64 tensor, got {}", op, t.meta_str());
  return wrap_dim(dim, t.dim(), op);
}

bool any_zero(const Tensor& x) { return !all_true(logical_not(eq(x.detach(), 0.0))); }

// The gradient of cumprod where x holds a zero, when no derivative of it will be taken (torch's
// O(n) case): before the first zero (in scan order) it is the zero-free rule; at the first zero
// u = x with that zero replaced by 1 gives the products that skip it; after it every product
// holds the first zero, so 0.
Tensor cumprod_grad_zeros_once(const Tensor& g, const Tensor& x, const Tensor& out, int64_t d, bool reverse) {
  const Tensor is_zero = eq(x, 0.0);
  const Tensor zeros_so_far = cumsum(where(is_zero, scalar_like(x, 1.0), scalar_like(x, 0.0)), d, reverse);
  const Tensor before = eq(zeros_so_far, 0.0);
  const Tensor first = logical_and(is_zero, eq(zeros_so_far, 1.0));
  const Tensor u = where(first, scalar_like(x, 1.0), x);
  const Tensor at_before = div(cumsum(mul(out, g), d, !reverse), where(before, x, scalar_like(x, 1.0)));
  const Tensor at_first = cumsum(mul(g, cumprod(u, d, reverse)), d, !reverse);
  return where(before, at_before, where(first, at_first, scalar_like(x, 0.0)));
}

// The same when its derivatives are wanted (torch's O(n^2) case, free of value-dependent masks):
// row k of X2 is x with x_k replaced by 1, so cumprod(X2)[k, j] is the product up to j without
// x_k, and grad_k sums g_j of it over the j that follow k in scan order.
Tensor cumprod_grad_zeros_differentiable(const Tensor& g, const Tensor& x, int64_t d, bool reverse) {
  const int64_t n = x.size(d);
  const Tensor xt = transpose(x, d, -1), gt = transpose(g, d, -1);  // (..., n)
  const Tensor k = to(reshape(arange(n), {n, 1}), x.device()), j = to(reshape(arange(n), {1, n}), x.device());
  const Tensor x2 = where(eq(k, j), scalar_like(x, 1.0), unsqueeze(xt, -2));  // (..., n_k, n_i)
  const Tensor follows = reverse ? le(j, k) : ge(j, k);                          // (n_k, n_j)
  const Tensor terms = where(follows, mul(unsqueeze(gt, -2), cumprod(x2, -1, reverse)), scalar_like(x, 0.0));
  return contiguous(transpose(sum(terms, {-1}), d, -1));
}

// torch's cumprod_backward: without zeros sum_{j >= k} g_j y_j / x_k (from the end: j <= k).
Tensor cumprod_backward(const Tensor& g, const Tensor& x, const Tensor& out, int64_t d, bool reverse) {
  if (x.dim() == 0 || x.size(d) <= 1) return g;
  if (!any_zero(x)) return div(cumsum(mul(out, g), d, !reverse), x);
  return GradMode::enabled() ? cumprod_grad_zeros_differentiable(g, x, d, reverse)
                             : cumprod_grad_zeros_once(g, x, out, d, reverse);
}

}  // namespace

Tensor cumsum(const Tensor& t, int64_t dim, bool reverse) {
  const int64_t d = checked_dim(t, dim, "cumsum");
  Tensor out = scan_kernel(t, d, ScanKind::sum, reverse, "cumsum");
  if (should_record({t})) {
    record_op("cumsum", {t}, {&out}, {}, {}, [d, reverse](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{cumsum(g[0], d, !reverse)};
    });
  }
  return out;
}

Tensor cumprod(const Tensor& t, int64_t dim, bool reverse) {
  const int64_t d = checked_dim(t, dim, "cumprod");
  Tensor out = scan_kernel(t, d, ScanKind::prod, reverse, "cumprod");
  if (should_record({t})) {
    record_op("cumprod", {t}, {&out}, {t}, {0}, [d, reverse](BackwardContext& ctx, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{cumprod_backward(g[0], ctx.saved(0), ctx.saved(1), d, reverse)};
    });
  }
  return out;
}

namespace {
using V = std::vector<Tensor>;

// Zeros placed by hand: lines with one zero, with two, and without, so torch's rules at zeros
// (cumprod's and prod's) are checked against finite differences (polynomials: exact enough).
Tensor with_zeros(RandomKey k) {
  Tensor x = randn({3, 4}, k, DType::f64);
  std::vector<double> v = x.to_vector<double>();
  v[1] = 0.0, v[6] = 0.0, v[7] = 0.0;
  return from_vector(v, {3, 4}).set_requires_grad(true);
}

const OpRegistrar registrar{
    {"cumsum",
     [](RandomKey k) {
       return std::vector<OpSample>{{"3-d", {sample_leaf({2, 3, 4}, sub_key(k, 1))}},
                                    {"non-contiguous", {sample_leaf_transposed({4, 3}, sub_key(k, 2))}},
                                    {"0-dim", {sample_leaf({}, sub_key(k, 3))}}};
     },
     [](const V& x) {
       if (x[0].dim() == 0) return V{cumsum(x[0], 0), cumsum(x[0], -1, true)};
       return V{cumsum(x[0], 0), cumsum(x[0], -1), cumsum(x[0], 1, true)};
     }},
    {"cumprod",
     [](RandomKey k) {
       return std::vector<OpSample>{{"3-d", {sample_leaf({2, 3, 4}, sub_key(k, 4))}},
                                    {"non-contiguous", {sample_leaf_transposed({4, 3}, sub_key(k, 5))}},
                                    {"zeros", {with_zeros(sub_key(k, 6))}}};
     },
     [](const V& x) { return V{cumprod(x[0], 0), cumprod(x[0], -1), cumprod(x[0], 1, true)}; }},
    // ops/prod.cpp: its forward and its rule at zeros are scans.
    {"prod",
     [](RandomKey k) {
       return std::vector<OpSample>{{"odd 3-d", {sample_leaf({2, 3, 4}, sub_key(k, 7))}},
                                    {"non-contiguous", {sample_leaf_transposed({4, 3}, sub_key(k, 8))}},
                                    {"zeros", {with_zeros(sub_key(k, 9))}},
                                    {"0-dim", {sample_leaf({}, sub_key(k, 10))}}};
     },
     [](const V& x) {
       const Tensor& t = x[0];
       if (t.dim() == 0) return V{prod(t), prod(t, {0}, true)};
       V out{prod(t), prod(t, {-1}), prod(t, {0}, true)};
       if (t.dim() >= 3) out.push_back(prod(t, {0, 2})), out.push_back(prod(t, {0, 2}, true));
       return out;
     }},
};
}  // namespace

}  // namespace gs
