// sum, mean and sum_to. Sums accumulate f32 in double (and c64 in c128) so long reductions keep
// their precision.
#include "engine/autograd/record.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/reduce_kernel.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {

namespace kernels {

ReductionPlan plan_reduction(const Tensor& t, std::vector<int64_t> dims, bool keepdim, const char* op) {
  check_defined(t, op);
  ReductionPlan plan;
  plan.reduced.assign(t.dim(), dims.empty());
  for (auto d : dims) {
    int64_t w = wrap_dim(d, t.dim(), op);
    if (t.dim() == 0) continue;
    GS_CHECK(!plan.reduced[w], "{}: dim {} appears twice in the reduction dims", op, d);
    plan.reduced[w] = true;
  }
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (plan.reduced[d]) {
      plan.reduced_count *= t.sizes()[d];
      plan.out_sizes_keepdim.push_back(1);
      if (keepdim) plan.out_sizes.push_back(1);
    } else {
      plan.out_sizes_keepdim.push_back(t.sizes()[d]);
      plan.out_sizes.push_back(t.sizes()[d]);
    }
  }
  return plan;
}

}  // namespace kernels

namespace {

template <typename T>
using wide_t = std::conditional_t<std::is_same_v<T, float>, double,
                                  std::conditional_t<std::is_same_v<T, c64>, c128, T>>;

struct SumStep {
  template <typename A, typename X>
  A operator()(A acc, X x) const { return acc + static_cast<A>(x); }
  template <typename A>
  A combine(A a, A b) const { return a + b; }
};

Tensor sum_kernel(const Tensor& t, const kernels::ReductionPlan& plan, double scale, const char* op) {
  kernels::check_cpu(t, op);
  Tensor out = empty(plan.out_sizes_keepdim, t.dtype(), t.device());
  dispatch_float_complex(t.dtype(), op, [&]<typename T>() {
    using A = wide_t<T>;
    kernels::reduce_loop<T, T, A>(t, plan, out, A(0), SumStep{},
                                  [scale](A acc) { return static_cast<T>(acc * static_cast<real_t<A>>(scale)); });
  });
  return out;
}

// The kernel's keepdim result, reshaped to the returned sizes (a fresh tensor, not a view).
Tensor as_result(const Tensor& k, const Shape& sizes) {
  return Tensor(std::make_shared<TensorImpl>(k.storage(), sizes, contiguous_strides(sizes), 0, k.dtype()));
}

// The gradient of a reduction: g (reduced shape) broadcast back over the input's shape.
Tensor expand_back(const Tensor& g, const Shape& keepdim_sizes, const Shape& in_sizes) {
  return expand(reshape(g, keepdim_sizes), in_sizes);
}

}  // namespace

Tensor sum(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  auto plan = kernels::plan_reduction(t, dims, keepdim, "sum");
  Tensor out = as_result(sum_kernel(t, plan, 1.0, "sum"), plan.out_sizes);
  if (should_record({t})) {
    Shape kd = plan.out_sizes_keepdim, in = t.sizes();
    record_op("sum", {t}, {&out}, {}, {}, [kd, in](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{expand_back(g[0], kd, in)};
    });
  }
  return out;
}

Tensor mean(const Tensor& t, std::vector<int64_t> dims, bool keepdim) {
  auto plan = kernels::plan_reduction(t, dims, keepdim, "mean");
  GS_CHECK(plan.reduced_count > 0, "mean: cannot average over zero elements (input {})", shape_str(t.sizes()));
  double scale = 1.0 / static_cast<double>(plan.reduced_count);
  Tensor out = as_result(sum_kernel(t, plan, scale, "mean"), plan.out_sizes);
  if (should_record({t})) {
    Shape kd = plan.out_sizes_keepdim, in = t.sizes();
    record_op("mean", {t}, {&out}, {}, {}, [kd, in, scale](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{expand_back(mul(g[0], scale), kd, in)};
    });
  }
  return out;
}

Tensor sum_to(const Tensor& t, const Shape& shape) {
  kernels::check_defined(t, "sum_to");
  if (t.sizes() == shape) return t;
  GS_CHECK(is_expandable_to(shape, t.sizes()), "sum_to: {} cannot be reduced to {} (it is not a broadcast of it)",
           shape_str(t.sizes()), shape_str(shape));
  std::vector<int64_t> dims;
  int64_t lead = t.dim() - static_cast<int64_t>(shape.size());
  for (int64_t d = 0; d < t.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && t.sizes()[d] != 1)) dims.push_back(d);
  if (dims.empty()) return reshape(t, shape);  // unreachable: shape == t's sizes was returned above
  return kernels::own_result(reshape(sum(t, dims, true), shape));
}

namespace {
using V = std::vector<Tensor>;
const OpRegistrar registrar{
    {"sum",
     [](RandomKey k) {
       return std::vector<OpSample>{{"dims", {sample_leaf({2, 3, 4}, {k.seed, 1})}},
                                    {"non-contiguous complex", {sample_leaf_transposed({3, 2}, {k.seed, 2}, DType::c128)}}};
     },
     [](const V& x) { return V{sum(x[0]), sum(x[0], {-1}), sum(x[0], {0}, true)}; }},
    {"mean",
     [](RandomKey k) { return std::vector<OpSample>{{"dims", {sample_leaf({2, 3, 4}, {k.seed, 3})}}}; },
     [](const V& x) { return V{mean(x[0]), mean(x[0], {0, 2}), mean(x[0], {1}, true)}; }},
    {"sum_to",
     [](RandomKey k) { return std::vector<OpSample>{{"broadcast dims", {sample_leaf({2, 3, 4}, {k.seed, 4})}}}; },
     [](const V& x) { return V{sum_to(x[0], {3, 1}), sum_to(x[0], {1, 1, 4})}; }},
};
}  // namespace

}  // namespace gs
