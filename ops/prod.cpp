// prod over dims, for f32 and f64. The reduced dims are moved last and flattened into one line
// per output; the product is the line's cumprod's last element (ops/scan.cpp: f32 multiplied in
// f64, and a CUDA kernel). The rule is torch's prod_backward, in differentiable ops.
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/reduce_kernel.h"
#include "ops/reduce_more.h"
#include "ops/shape_ops.h"
#include "ops/view.h"

namespace gs {
namespace {

// Where the reduced dims go: t permuted by `perm` (kept dims first, in order) has `permuted`
// sizes; flattening the reduced dims makes (kept..., length).
struct Lines {
  std::vector<int64_t> perm, inverse;
  Shape permuted, kept;
  int64_t length = 1;
};

Lines lines_of(const Tensor& t, const kernels::ReductionPlan& plan) {
  Lines l;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (!plan.reduced[d]) l.perm.push_back(d), l.kept.push_back(t.size(d));
  for (int64_t d = 0; d < t.dim(); ++d)
    if (plan.reduced[d]) l.perm.push_back(d), l.length *= t.size(d);
  l.inverse.resize(l.perm.size());
  for (size_t i = 0; i < l.perm.size(); ++i) l.inverse[l.perm[i]] = static_cast<int64_t>(i), l.permuted.push_back(t.size(l.perm[i]));
  return l;
}

// (t.sizes) -> (kept..., length), differentiable.
Tensor to_lines(const Tensor& t, const Lines& l) {
  Shape s = l.kept;
  s.push_back(l.length);
  return reshape(permute(t, l.perm), s);
}
// (kept..., length) -> (t.sizes).
Tensor from_lines(const Tensor& lines, const Lines& l) { return permute(reshape(lines, l.permuted), l.inverse); }

bool any_zero(const Tensor& x) { return !all_true(logical_not(eq(x.detach(), 0.0))); }

// torch's prod_backward. g and out with the keepdim sizes. Without a zero in x: g * out / x
// (its derivative runs through out). With one: prod_safe_zeros_backward, g times the products
// of the elements before and after each, exclusive cumprods from both ends.
Tensor prod_backward(const Tensor& g, const Tensor& x, const Tensor& out, const Lines& l) {
  if (x.dim() == 0) return g;
  if (!any_zero(x)) return mul(g, div(out, x));
  if (l.length == 1) return expand(g, x.sizes());
  const Tensor xl = to_lines(x, l);
  Shape one = l.kept;
  one.push_back(1);
  const Tensor ones = full(one, 1.0, x.dtype(), x.device());
  const Tensor before = cumprod(cat({ones, narrow(xl, -1, 0, l.length - 1)}, -1), -1);
  const Tensor after = cumprod(cat({narrow(xl, -1, 1, l.length - 1), ones}, -1), -1, /*reverse*/ true);
  return from_lines(mul(reshape(g, one), mul(before, after)), l);
}

}  // namespace

Tensor prod(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  kernels::check_defined(t, "prod");
  if (is_storage_only(t.dtype())) fail_storage_only("prod", t.dtype());
  GS_CHECK(is_floating(t.dtype()), "prod: expected an f32 or f64 tensor, got {}", t.meta_str());
  const auto plan = kernels::plan_reduction(t, dims, keepdim, "prod");
  const Lines l = lines_of(t, plan);
  Tensor out;
  {
    forward_ad::PrimalOnlyGuard forward_only;
    out = l.length == 0 ? full(plan.out_sizes, 1.0, t.dtype(), t.device())  // the empty product
                        : kernels::own_result(reshape(narrow(cumprod(to_lines(t, l), -1), -1, l.length - 1, 1),
                                                      plan.out_sizes));
  }
  if (should_record({t})) {
    const Shape kd = plan.out_sizes_keepdim;
    record_op("prod", {t}, {&out}, {t}, {0}, [kd, l](BackwardContext& ctx, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{prod_backward(reshape(g[0], kd), ctx.saved(0), reshape(ctx.saved(1), kd), l)};
    });
  }
  return out;
}

}  // namespace gs
