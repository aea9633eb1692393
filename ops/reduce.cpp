// var, max, min and logsumexp over dims, for f32 and f64.
//
// max and min have their own kernel and backward rule. var and logsumexp compute their forward
// from differentiable ops (mean, sub, mul, sum, exp, log, max) without recording, and record
// torch's rules, written in differentiable ops so that double backward works.
#include <cmath>
#include <limits>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/record.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/reduce_kernel.h"
#include "ops/reduce_math.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {
namespace {

// "dims [0, -1]", or "all dims" for the empty list.
std::string dims_str(const std::vector<int64_t>& dims) {
  return dims.empty() ? "all dims" : fmt::format("dims {}", dims);
}

// These reductions are defined for real floating tensors only. `hint` says why complex is refused.
void check_real_floating(const Tensor& t, const char* op, const char* hint) {
  kernels::check_defined(t, op);
  if (is_storage_only(t.dtype())) fail_storage_only(op, t.dtype());
  GS_CHECK(is_floating(t.dtype()), "{}: expected an f32 or f64 tensor, got {}{}", op, t.meta_str(),
           is_complex(t.dtype()) ? hint : "");
}

// A reduction plan that reduces at least one element per output: max of nothing has no value,
// and neither var nor logsumexp has a useful one.
kernels::ReductionPlan plan_nonempty(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim,
                                     const char* op) {
  auto plan = kernels::plan_reduction(t, dims, keepdim, op);
  GS_CHECK(plan.reduced_count > 0, "{}: cannot reduce over zero elements (input {} over {})", op,
           shape_str(t.sizes()), dims_str(dims));
  return plan;
}

// The kernel's keepdim result with the returned sizes (a fresh tensor, not a view of a temporary).
Tensor as_result(const Tensor& k, const Shape& sizes) {
  return Tensor(std::make_shared<TensorImpl>(k.storage(), sizes, contiguous_strides(sizes), 0, k.dtype()));
}

// ---- max / min

template <bool kMax>
using ExtremumStep = math::ExtremumStep<kMax>;

// (t.sizes) -> (plan.out_sizes_keepdim)
template <bool kMax>
Tensor extremum_forward(const Tensor& t, const kernels::ReductionPlan& plan, const char* op) {
  Tensor out = empty(plan.out_sizes_keepdim, t.dtype(), t.device());
  if (kernels::on_cuda(t)) {
    kernels::cuda_reduce(kMax ? cuda_kernels::ReduceKind::max : cuda_kernels::ReduceKind::min, t, plan, out, 1.0, op);
    return out;
  }
  kernels::check_cpu(t, op);
  dispatch_float(t.dtype(), op, [&]<typename T>() {
    const T init = kMax ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::infinity();
    kernels::reduce_loop<T, T, T>(t, plan, out, init, ExtremumStep<kMax>{}, [](T acc) { return acc; });
  });
  return out;
}

// g: (out sizes), x: (in sizes), out: (out sizes) -> (in sizes).
// The gradient goes to the elements equal to the extremum, split evenly between ties (torch.amax's
// rule: the subgradient that treats tied elements alike). The mask is a constant; the result is
// built from where/div/sum, so it is differentiable in g and double backward works.
Tensor extremum_backward(const Tensor& g, const Tensor& x, const Tensor& out, const Shape& keepdim_sizes,
                         const std::vector<int64_t>& dims) {
  const Tensor extremum = reshape(out.detach(), keepdim_sizes);
  Tensor hit = eq(x.detach(), extremum);                                                // (in) bool
  Tensor ties = sum(where(hit, scalar_like(g, 1.0), scalar_like(g, 0.0)), dims, true);  // (keepdim)
  Tensor grad = where(hit, div(reshape(g, keepdim_sizes), ties), scalar_like(g, 0.0));  // (in)
  // A slice whose extremum is NaN (it holds a NaN) matches no element: its whole gradient is NaN,
  // as torch.amax's, rather than a silent 0.
  return where(ne(extremum, extremum), scalar_like(g, std::numeric_limits<double>::quiet_NaN()), grad);
}

template <bool kMax>
Tensor extremum(const Tensor& t, const std::vector<int64_t>& dims, bool keepdim, const char* op) {
  check_real_floating(t, op, " (complex numbers have no ordering; reduce abs() or the real part instead)");
  auto plan = plan_nonempty(t, dims, keepdim, op);
  Tensor out = as_result(extremum_forward<kMax>(t, plan, op), plan.out_sizes);
  if (should_record({t})) {
    Shape kd = plan.out_sizes_keepdim;
    record_op(op, {t}, {&out}, /*saved*/ {t}, /*saved outputs*/ {0},
              [kd, dims](BackwardContext& ctx, const std::vector<Tensor>& g) {
                return std::vector<Tensor>{extremum_backward(g[0], ctx.saved(0), ctx.saved(1), kd, dims)};
              });
  }
  return out;
}

}  // namespace

Tensor max(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  return extremum<true>(t, dims, keepdim, "max");
}

Tensor min(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  return extremum<false>(t, dims, keepdim, "min");
}

// ---- var: the two-pass formula sum((x - mean)^2) / (N - correction), which keeps its precision
// when the mean is large compared with the spread (the one-pass E[x^2] - E[x]^2 does not).
// N - correction < 1 is an error rather than torch's inf/NaN: no silent wrong answers.
namespace {
// x - mean(x) over the reduced dims, computed as (x - K) - mean(x - K) with K each slice's first
// element (detached: the identity holds for every K; 0 where that is not finite). Equal values give exactly 0 even where
// their mean rounds (six copies of 3.9e299 have a mean one ulp off, whose square overflowed to
// inf), and a large common offset cancels before the mean is taken.
Tensor centered_in_slices(const Tensor& x, const std::vector<int64_t>& dims, const std::vector<bool>& reduced) {
  Tensor first = x.detach();
  for (int64_t d = 0; d < x.dim(); ++d)
    if (reduced[static_cast<size_t>(d)]) first = narrow(first, d, 0, 1);
  first = where(isfinite(first), first, scalar_like(first, 0.0));  // an infinite K would make NaN
  Tensor shifted = sub(x, first);
  return sub(shifted, mean(shifted, dims, true));
}
}  // namespace

Tensor var(const Tensor& t, std::vector<int64_t> dims, int64_t correction, bool keepdim) {
  check_real_floating(t, "var", " (the variance of complex tensors is not implemented)");
  auto plan = plan_nonempty(t, dims, keepdim, "var");
  int64_t dof = plan.reduced_count - correction;
  GS_CHECK(dof > 0,
           "var: {} elements per output (input {} over {}) with correction {} leave {} degrees of freedom; "
           "need at least 1",
           plan.reduced_count, shape_str(t.sizes()), dims_str(dims), correction, dof);
  Tensor out;
  {
    forward_ad::PrimalOnlyGuard forward_only;
    Tensor centered = centered_in_slices(t, dims, plan.reduced);                       // (in)
    out = div(sum(mul(centered, centered), dims, keepdim), static_cast<double>(dof));  // (out)
  }
  if (should_record({t})) {
    Shape kd = plan.out_sizes_keepdim;
    record_op("var", {t}, {&out}, {t}, {}, [kd, dims, dof, reduced = plan.reduced](BackwardContext& ctx,
                                                                                   const std::vector<Tensor>& g) {
      // torch's rule, 2 (x - mean) / dof. The mean's own term, -2 sum(x - mean) / (N dof), is 0
      // and left out: with an infinite element it would make every gradient of the slice NaN.
      // Written in differentiable ops (x - mean recomputed from x), so double backward is exact.
      const Tensor centered = centered_in_slices(ctx.saved(0), dims, reduced);
      return std::vector<Tensor>{mul(reshape(g[0], kd), mul(centered, 2.0 / static_cast<double>(dof)))};
    });
  }
  return out;
}

// ---- logsumexp: m + log(sum(exp(x - m))) holds for any m; m = max(x) keeps exp() from
// overflowing. The forward is not recorded; the rule is torch's, g exp(x - lse).
Tensor logsumexp(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  check_real_floating(t, "logsumexp", " (complex logsumexp is not implemented)");
  auto plan = plan_nonempty(t, dims, keepdim, "logsumexp");
  Tensor out;
  {
    forward_ad::PrimalOnlyGuard forward_only;
    Tensor shift = max(t, dims, true);  // (keepdim)
    // A slice that is all -inf (or holds +inf) has no finite max; shift it by 0 so x - m stays
    // free of inf - inf = NaN and the result is -inf (or +inf), as it should be.
    shift = where(isfinite(shift), shift, scalar_like(shift, 0.0));
    Tensor lse = add(log(sum(exp(sub(t, shift)), dims, true)), shift);  // (keepdim)
    out = keepdim ? lse : kernels::own_result(reshape(lse, plan.out_sizes));
  }
  if (should_record({t})) {
    Shape kd = plan.out_sizes_keepdim;
    record_op("logsumexp", {t}, {&out}, {t}, {0}, [kd](BackwardContext& ctx, const std::vector<Tensor>& g) {
      // torch's rule, g exp(x - lse): a finite element beside +inf gets exp(-inf) = 0 (the
      // normalised exp(x - m) / sum would give inf / inf = NaN there).
      Tensor lse = reshape(ctx.saved(1), kd);
      return std::vector<Tensor>{mul(reshape(g[0], kd), exp(sub(ctx.saved(0), lse)))};
    });
  }
  return out;
}

namespace {
using V = std::vector<Tensor>;

// Random normal samples: ties have probability zero, so max/min are differentiable there.
std::vector<OpSample> reduce_samples(RandomKey k) {
  return {{"odd 3-d", {sample_leaf({3, 4, 5}, sub_key(k, 1))}},
          {"non-contiguous", {sample_leaf_transposed({5, 3}, sub_key(k, 2))}},
          {"0-dim", {sample_leaf({}, sub_key(k, 3))}}};
}

// All dims, the last dim, and the first dim kept; with 3 or more dims also two dims at once and
// the middle dim, dropped and kept.
template <typename Reduce>
V sampled_reductions(const Tensor& x, Reduce r) {
  if (x.dim() == 0) return V{r(x, std::vector<int64_t>{}, false), r(x, std::vector<int64_t>{-1}, true)};
  V out{r(x, std::vector<int64_t>{}, false), r(x, std::vector<int64_t>{-1}, false),
        r(x, std::vector<int64_t>{0}, true)};
  if (x.dim() >= 3) {
    out.push_back(r(x, std::vector<int64_t>{0, -1}, false));
    out.push_back(r(x, std::vector<int64_t>{1}, false));
    out.push_back(r(x, std::vector<int64_t>{1}, true));
  }
  return out;
}

const OpRegistrar registrar{
    {"max", reduce_samples,
     [](const V& x) { return sampled_reductions(x[0], [](auto& t, auto d, bool kd) { return max(t, d, kd); }); }},
    {"min", reduce_samples,
     [](const V& x) { return sampled_reductions(x[0], [](auto& t, auto d, bool kd) { return min(t, d, kd); }); }},
    {"logsumexp", reduce_samples,
     [](const V& x) {
       return sampled_reductions(x[0], [](auto& t, auto d, bool kd) { return logsumexp(t, d, kd); });
     }},
    {"var",
     [](RandomKey k) {
       return std::vector<OpSample>{{"odd 3-d", {sample_leaf({3, 4, 5}, sub_key(k, 4))}},
                                    {"non-contiguous", {sample_leaf_transposed({5, 3}, sub_key(k, 5))}}};
     },
     [](const V& x) { return V{var(x[0]), var(x[0], {-1}), var(x[0], {0}, 0, true), var(x[0], {}, 0, true)}; }},
};
}  // namespace

}  // namespace gs
