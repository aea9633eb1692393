// ACE's area-weighted statistics: compositions of differentiable ops (reductions over W come
// first, so the composite costs little more than one pass), so they run on every device those do.
// The weights' validation reads them on the host.
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/sphere/sfno_block_common.h"
#include "ops/sphere/sfno_blocks.h"
#include "ops/view.h"

namespace gs::sphere {
using namespace detail;
using V = std::vector<Tensor>;

Tensor area_weighted_mean(const Tensor& x, const Tensor& area_weights) {
  const char* op = "area_weighted_mean";
  GS_CHECK(x.defined() && x.dim() >= 2 && is_floating(x.dtype()),
           "{}: expected x (..., H, W) of f32 or f64 with at least 2 dims, got {}", op, x.meta_str());
  Tensor a = row_weights(area_weights, x, op, "the area weights (H)");  // (H, 1)
  return sum(mul(mean(x, {-1}, true), a), {-2, -1});
}

Tensor area_weighted_mean(const Tensor& x, const std::vector<double>& area_weights) {
  GS_CHECK(x.defined(), "area_weighted_mean: x is an undefined tensor");
  return area_weighted_mean(x, to(to(from_vector(area_weights), x.dtype()), x.device()));
}

Tensor area_weighted_mse(const Tensor& pred, const Tensor& target, const Tensor& area_weights) {
  const char* op = "area_weighted_mse";
  GS_CHECK(pred.defined() && target.defined(), "{}: pred and target must be defined, got {} and {}", op, pred.meta_str(),
           target.meta_str());
  GS_CHECK(pred.sizes() == target.sizes(), "{}: expected target with pred's shape {}, got {}", op,
           shape_str(pred.sizes()), shape_str(target.sizes()));
  GS_CHECK(pred.dtype() == target.dtype(), "{}: expected target with pred's dtype {}, got {}", op,
           dtype_name(pred.dtype()), target.meta_str());
  Tensor d = sub(pred, target);
  return mean(area_weighted_mean(mul(d, d), area_weights));
}

Tensor area_weighted_mse(const Tensor& pred, const Tensor& target, const std::vector<double>& area_weights) {
  GS_CHECK(pred.defined(), "area_weighted_mse: pred is an undefined tensor");
  return area_weighted_mse(pred, target, to(to(from_vector(area_weights), pred.dtype()), pred.device()));
}

namespace {
const OpRegistrar registrar{
    {"area_weighted_mean",
     [](RandomKey k) {
       return std::vector<OpSample>{{"(B, C, H, W)", {sample_leaf({2, 2, 3, 4}, sub_key(k, 1)), positive_rows(3, sub_key(k, 2))}},
                                    {"2-D, weights with grad", {sample_leaf({3, 2}, sub_key(k, 3)), sample_leaf_in({3}, sub_key(k, 4), 0.5, 1.5)}}};
     },
     [](const V& x) { return V{area_weighted_mean(x[0], x[1])}; }},
    {"area_weighted_mse",
     [](RandomKey k) {
       return std::vector<OpSample>{{"(B, C, H, W)", {sample_leaf({2, 2, 3, 2}, sub_key(k, 1)), sample_leaf({2, 2, 3, 2}, sub_key(k, 2)),
                                                     positive_rows(3, sub_key(k, 3))}}};
     },
     [](const V& x) { return V{area_weighted_mse(x[0], x[1], x[2])}; }},
};
}  // namespace
}  // namespace gs::sphere
