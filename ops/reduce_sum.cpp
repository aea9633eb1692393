// sum, mean and sum_to. Sums accumulate f32 in double (and c64 in c128) so long reductions keep
// their precision.
#include "engine/autograd/record.h"
#include "engine/strided_index.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/reduce_kernel.h"
#include "ops/reduce_math.h"
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

void cuda_reduce(cuda_kernels::ReduceKind kind, const Tensor& t, const ReductionPlan& plan, const Tensor& out, double scale,
                 const char* op) {
  Shape outer_sizes, outer_strides, inner_sizes, inner_strides;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (plan.reduced[d]) inner_sizes.push_back(t.sizes()[d]), inner_strides.push_back(t.strides()[d]);
    else outer_sizes.push_back(t.sizes()[d]), outer_strides.push_back(t.strides()[d]);
  }
  const auto outer = make_strided_loop<1>(outer_sizes, {&outer_strides});
  const auto inner = make_strided_loop<1>(inner_sizes, {&inner_strides});
  const auto split = cuda_kernels::plan_reduce_split(kind, t.dtype(), outer.numel, inner.numel);
  launch_cuda(op, "reduce", t, [&](void* stream) {
    // Scratch for split outputs' partials, from the caching allocator (freed when it goes out of
    // scope: stream order makes it safe to reuse after the kernels that read it).
    const Tensor scratch = split.splits > 1 ? empty({(split.scratch_bytes + 7) / 8}, DType::f64, t.device()) : Tensor();
    return GS_CUDA_CALL(cuda_kernels::reduce(kind, t.dtype(), out.raw_data(), t.raw_data(), outer, inner, scale, split,
                                             scratch.defined() ? scratch.raw_data() : nullptr, stream));
  });
}

}  // namespace kernels

namespace {

template <typename T>
using wide_t = std::conditional_t<std::is_same_v<T, float>, double,
                                  std::conditional_t<std::is_same_v<T, c64>, c128, T>>;

using math::SumStep;

Tensor sum_kernel(const Tensor& t, const kernels::ReductionPlan& plan, double scale, const char* op) {
  kernels::check_float_complex(t, op);
  Tensor out = empty(plan.out_sizes_keepdim, t.dtype(), t.device());
  if (kernels::on_cuda(t)) {
    kernels::cuda_reduce(cuda_kernels::ReduceKind::sum, t, plan, out, scale, op);
    return out;
  }
  kernels::check_cpu(t, op);
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
