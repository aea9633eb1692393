// masked_fill (where(mask, value, x): its gradients are where's, the 0-dim value's summed over the
// mask by the engine's broadcast reduction) and masked_select (a read at the mask's true
// positions, ops/index_map.h).
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/index_map.h"
#include "ops/indexing.h"
#include "ops/kernels.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {
namespace {

using V = std::vector<Tensor>;

void check_mask(const Tensor& x, const Tensor& mask, const char* op) {
  kernels::check_defined(x, op);
  kernels::check_defined(mask, op, "the mask");
  GS_CHECK(mask.dtype() == DType::b8, "{}: expected a bool mask, got {} (make one with a comparison, e.g. gt(x, 0))",
           op, mask.meta_str());
  kernels::check_same_device(x, mask, op);
}

void check_value(const Tensor& x, const Tensor& value, const char* op) {
  kernels::check_defined(value, op, "the value");
  GS_CHECK(value.dim() == 0, "{}: expected a 0-dim value tensor, got {} (a tensor value fills every masked element)",
           op, value.meta_str());
  kernels::check_same_dtype(x, value, op);
  kernels::check_same_device(x, value, op);
}

}  // namespace

Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value) {
  check_mask(x, mask, "masked_fill");
  check_value(x, value, "masked_fill");
  broadcast_shapes(x.sizes(), mask.sizes(), "masked_fill");
  return where(mask, value, x);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  kernels::check_defined(x, "masked_fill");
  return masked_fill(x, mask, full({}, value, x.dtype(), x.device()));
}

Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Tensor& value) {
  check_mask(x, mask, "masked_fill_");
  check_value(x, value, "masked_fill_");
  GS_CHECK(is_expandable_to(mask.sizes(), x.sizes()),
           "masked_fill_: the mask of shape {} cannot be broadcast to the modified tensor's shape {} (an in-place op "
           "never changes the shape of the tensor it writes)",
           shape_str(mask.sizes()), shape_str(x.sizes()));
  kernels::check_no_self_overlap(x, "masked_fill_");
  check_inplace(x, "masked_fill_", {value});
  const Tensor v = x.storage().get() == value.storage().get() ? clone(value) : value;
  {
    forward_ad::PrimalOnlyGuard values_only;
    copy_values(x, where(mask, v.detach(), x.detach()));
  }
  finish_inplace(x, "masked_fill_", {v}, [mask](BackwardContext& ctx, const V& g) {
    const Tensor zero = zeros({}, g[0].dtype(), g[0].device());
    // The value's gradient has x's shape here; the engine sums it to the 0-dim value.
    return V{ctx.needs_input_grad(0) ? where(mask, zero, g[0]) : Tensor(),
             ctx.needs_input_grad(1) ? where(mask, g[0], zero) : Tensor()};
  });
  return x;
}

Tensor& masked_fill_(Tensor& x, const Tensor& mask, double value) {
  kernels::check_defined(x, "masked_fill_");
  return masked_fill_(x, mask, full({}, value, x.dtype(), x.device()));
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  check_mask(x, mask, "masked_select");
  const Shape shape = broadcast_shapes(x.sizes(), mask.sizes(), "masked_select");
  const Tensor m = contiguous_copy(to_device_copy(mask, Device::cpu()).detach());
  const Shape mstrides = kernels::expanded_strides(m, shape);
  std::vector<int64_t> pos;
  const bool* pm = m.data<bool>();
  const int64_t n = numel_of(shape), nd = static_cast<int64_t>(shape.size());
  Shape at(nd, 0);
  for (int64_t q = 0; q < n; ++q) {
    int64_t off = 0;
    for (int64_t d = 0; d < nd; ++d) off += at[d] * mstrides[d];
    if (pm[off]) pos.push_back(q);
    for (int64_t d = nd - 1; d >= 0 && ++at[d] == shape[d]; --d) at[d] = 0;
  }
  const int64_t count = static_cast<int64_t>(pos.size());
  const Tensor xb = x.sizes() == shape ? x : expand(x, shape);
  return indexing::take_at(xb, indexing::make_map(shape, {count}, std::move(pos)),
                           indexing::Names{"masked_select", "masked_scatter"});
}

namespace {

Tensor sample_mask(const std::vector<bool>& values, const Shape& shape) { return from_vector(values, shape); }

const OpRegistrar registrar{
    {"masked_fill",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"row mask, tensor value, non-contiguous",
            {sample_leaf_transposed({3, 4}, sub_key(k, 1)), sample_mask({true, false, true, true}, {4}),
             sample_leaf({}, sub_key(k, 2))}},
           {"mask wider than x, complex",
            {sample_leaf({3}, sub_key(k, 3), DType::c128), sample_mask({true, false, false, false, true, true}, {2, 3}),
             sample_leaf({}, sub_key(k, 4), DType::c128)}}};
     },
     [](const V& x) { return V{masked_fill(x[0], x[1], x[2]), masked_fill(x[0], x[1], 0.25)}; }},
    {"masked_fill_",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"broadcast mask, non-contiguous",
            {sample_leaf_transposed({3, 4}, sub_key(k, 5)), sample_mask({false, true, true}, {3, 1}),
             sample_leaf({}, sub_key(k, 6))}}};
     },
     [](const V& x) {
       Tensor y = mul(x[0], x[0]), z = clone(x[0]);
       masked_fill_(y, x[1], x[2]);
       masked_fill_(z, x[1], -2.0);
       return V{y, z};
     }},
    {"masked_select",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"same shape, non-contiguous",
            {sample_leaf_transposed({2, 3}, sub_key(k, 7)),
             sample_mask({true, false, true, true, false, true}, {2, 3})}},
           {"x broadcast by the mask",
            {sample_leaf({3}, sub_key(k, 8)), sample_mask({true, true, false, false, true, true}, {2, 3})}},
           {"complex, mask broadcast",
            {sample_leaf({2, 3}, sub_key(k, 9), DType::c128), sample_mask({false, true, true}, {3})}}};
     },
     [](const V& x) { return V{masked_select(x[0], x[1])}; }},
};

}  // namespace
}  // namespace gs
