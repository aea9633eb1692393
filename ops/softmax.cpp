// softmax and log_softmax along a dim: the forward from max, exp, sum and log (so it runs on every
// device they do) without recording, then torch's rules, in differentiable ops of the saved
// output, so double backward works.
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/softmax.h"

namespace gs {
namespace {

int64_t checked_dim(const Tensor& t, int64_t dim, const char* op) {
  kernels::check_defined(t, op);
  if (is_storage_only(t.dtype())) fail_storage_only(op, t.dtype());
  GS_CHECK(is_floating(t.dtype()), "{}: expected an f32 or f64 tensor, got {}", op, t.meta_str());
  return wrap_dim(dim, t.dim(), op);
}

}  // namespace

Tensor softmax(const Tensor& t, int64_t dim) {
  const std::vector<int64_t> d{checked_dim(t, dim, "softmax")};
  Tensor out;
  {
    forward_ad::PrimalOnlyGuard forward_only;
    if (t.numel() == 0) {  // an empty result, as torch (max over no elements would be an error)
      out = zeros_like(t);
    } else {
      const Tensor e = exp(sub(t, max(t, d, true)));
      out = div(e, sum(e, d, true));
    }
  }
  if (should_record({t})) {
    record_op("softmax", {t}, {&out}, {}, {0}, [d](BackwardContext& ctx, const std::vector<Tensor>& g) {
      if (g[0].numel() == 0) return std::vector<Tensor>{zeros_like(g[0])};
      const Tensor& y = ctx.saved(0);
      return std::vector<Tensor>{mul(y, sub(g[0], sum(mul(g[0], y), d, true)))};
    });
  }
  return out;
}

Tensor log_softmax(const Tensor& t, int64_t dim) {
  const std::vector<int64_t> d{checked_dim(t, dim, "log_softmax")};
  Tensor out;
  {
    forward_ad::PrimalOnlyGuard forward_only;
    if (t.numel() == 0) {  // an empty result, as torch
      out = zeros_like(t);
    } else {
      const Tensor shifted = sub(t, max(t, d, true));
      out = sub(shifted, log(sum(exp(shifted), d, true)));
    }
  }
  if (should_record({t})) {
    record_op("log_softmax", {t}, {&out}, {}, {0}, [d](BackwardContext& ctx, const std::vector<Tensor>& g) {
      if (g[0].numel() == 0) return std::vector<Tensor>{zeros_like(g[0])};
      return std::vector<Tensor>{sub(g[0], mul(exp(ctx.saved(0)), sum(g[0], d, true)))};
    });
  }
  return out;
}

namespace {
using V = std::vector<Tensor>;
std::vector<OpSample> softmax_samples(RandomKey k) {
  return {{"3-d", {sample_leaf({2, 3, 4}, sub_key(k, 1))}},
          {"non-contiguous", {sample_leaf_transposed({4, 3}, sub_key(k, 2))}},
          {"0-dim", {sample_leaf({}, sub_key(k, 3))}}};
}
template <typename F>
V along_dims(const Tensor& x, F f) {
  if (x.dim() == 0) return V{f(x, 0)};
  return V{f(x, 0), f(x, -1)};
}
const OpRegistrar registrar{
    {"softmax", softmax_samples, [](const V& x) { return along_dims(x[0], [](auto& t, int64_t d) { return softmax(t, d); }); }},
    {"log_softmax", softmax_samples,
     [](const V& x) { return along_dims(x[0], [](auto& t, int64_t d) { return log_softmax(t, d); }); }},
};
}  // namespace

}  // namespace gs
