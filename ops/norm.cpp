// std and the vector norms (p = 1, 2, inf), for f32 and f64, as compositions of var, sum, max and
// elementwise ops (so they run wherever those do), each with torch's rule where the composition's
// chain rule would differ: std and the 2-norm at 0 (0, not 0 * inf), the inf-norm beside a NaN.
#include <cmath>
#include <limits>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/record.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/reduce_kernel.h"
#include "ops/reduce_more.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {
namespace {

kernels::ReductionPlan checked_plan(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  kernels::check_defined(t, op);
  if (is_storage_only(t.dtype())) fail_storage_only(op, t.dtype());
  GS_CHECK(is_floating(t.dtype()), "{}: expected an f32 or f64 tensor, got {}", op, t.meta_str());
  return kernels::plan_reduction(t, dims, keepdim, op);
}

Tensor as_float(const Tensor& mask, const Tensor& like) {
  return where(mask, scalar_like(like, 1.0), scalar_like(like, 0.0));
}

// sgn(x) * (g / count) * mask, with mask the elements whose magnitude is the norm, or NaN: the
// gradient of amax(|x|) that torch's norm_backward gives (a NaN's slice keeps finite zeros).
Tensor inf_norm_backward(const Tensor& g, const Tensor& x, const Tensor& norm, const std::vector<int64_t>& dims) {
  const Tensor magnitude = abs(x.detach());
  const Tensor mask = logical_not(
      logical_and(logical_not(eq(magnitude, norm.detach())), logical_not(ne(magnitude, magnitude))));
  const Tensor maskf = as_float(mask, x);
  return mul(sign(x), mul(div(g, sum(maskf, dims, true)), maskf));
}

}  // namespace

Tensor std(const Tensor& t, std::vector<int64_t> dims, int64_t correction, bool keepdim) {
  const auto plan = checked_plan(t, dims, keepdim, "std");
  GS_CHECK(plan.reduced_count - correction > 0,
           "std: {} elements per output (input {} over {}) with correction {} leave {} degrees of freedom; need at "
           "least 1",
           plan.reduced_count, shape_str(t.sizes()), dims.empty() ? "all dims" : fmt::format("dims {}", dims),
           correction, plan.reduced_count - correction);
  // var records its own rule; this node is the square root with torch's gradient at 0:
  // g / (2 std), or 0 where std = 0 (masked, so a NaN or inf in g does not leak through 0 * inf).
  const Tensor v = var(t, dims, correction, keepdim);
  Tensor out;
  {
    forward_ad::PrimalOnlyGuard forward_only;
    out = sqrt(v);
  }
  if (should_record({v})) {
    record_op("std", {v}, {&out}, {}, {0}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      const Tensor& s = ctx.saved(0);
      return std::vector<Tensor>{where(eq(s, 0.0), scalar_like(s, 0.0), div(g[0], mul(s, 2.0)))};
    });
  }
  return out;
}

Tensor norm(const Tensor& t, double p, std::vector<int64_t> dims, bool keepdim) {
  const auto plan = checked_plan(t, dims, keepdim, "norm");
  const bool inf = p == std::numeric_limits<double>::infinity();
  GS_CHECK(p == 1.0 || p == 2.0 || inf, "norm: p must be 1, 2 or inf, got {}", p);
  // The 1-norm's rule is abs's, sign(x) g (0 at 0), exactly torch's.
  if (p == 1.0) return sum(abs(t), dims, keepdim);
  GS_CHECK(!inf || plan.reduced_count > 0, "norm: the inf-norm of zero elements is undefined (input {})",
           shape_str(t.sizes()));
  Tensor out;
  {
    forward_ad::PrimalOnlyGuard forward_only;
    out = inf ? max(abs(t), dims, keepdim) : sqrt(sum(mul(t, t), dims, keepdim));  // torch's: no rescaling
  }
  if (should_record({t})) {
    const Shape kd = plan.out_sizes_keepdim;
    record_op("norm", {t}, {&out}, {t}, {0}, [kd, dims, inf](BackwardContext& ctx, const std::vector<Tensor>& g) {
      const Tensor& x = ctx.saved(0);
      const Tensor n = reshape(ctx.saved(1), kd), gk = reshape(g[0], kd);
      if (inf) return std::vector<Tensor>{inf_norm_backward(gk, x, n, dims)};
      // torch's: g * (x / norm), with 0 at the zero vector (masked_fill: where, not a product).
      return std::vector<Tensor>{mul(gk, where(eq(n, 0.0), scalar_like(x, 0.0), div(x, n)))};
    });
  }
  return out;
}

namespace {
using V = std::vector<Tensor>;

// All dims, the last kept, the first two dropped.
template <typename F>
V three_reductions(const Tensor& x, F f) {
  return V{f(x, std::vector<int64_t>{}, false), f(x, std::vector<int64_t>{-1}, true), f(x, std::vector<int64_t>{0, 1}, false)};
}

std::vector<OpSample> norm_samples(RandomKey k) {
  return {{"3-d", {sample_leaf({2, 3, 4}, sub_key(k, 1))}},
          {"non-contiguous", {sample_leaf_transposed({4, 3}, sub_key(k, 2))}}};
}

const OpRegistrar registrar{
    {"std", norm_samples,
     [](const V& x) {
       return V{std(x[0]), std(x[0], {-1}, 0, true), std(x[0], {0, 1}, 1, false)};
     }},
    // Random normal samples: no element ties another's magnitude, so the inf-norm is smooth there.
    {"norm", norm_samples,
     [](const V& x) {
       V out;
       for (double p : {1.0, 2.0, std::numeric_limits<double>::infinity()}) {
         V r = three_reductions(x[0], [p](const Tensor& t, std::vector<int64_t> d, bool kd) { return norm(t, p, d, kd); });
         out.insert(out.end(), r.begin(), r.end());
       }
       return out;
     }},
};
}  // namespace

}  // namespace gs
