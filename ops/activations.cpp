// softplus, elu, leaky_relu, hardtanh (ops/elementwise_more.h), as torch.nn.functional's: the
// forward is one kernel with its scalar parameters (math::UnaryParam), the rule torch's backward
// kernel written with differentiable ops, so that its derivative is torch's double backward.
#include <cmath>

#include "engine/autograd/record.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/elementwise_more.h"
#include "ops/elementwise_more_kernels.h"
#include "ops/elementwise_more_samples.h"

namespace gs {

using math::UnaryCode;
using V = std::vector<Tensor>;

namespace {
// t where `keep`, else t's value without history: where torch's double backward is zero although
// its backward is not (softplus at the threshold, elu at 0).
Tensor history_where(const Tensor& keep, const Tensor& t) { return where(keep, t, t.detach()); }
}  // namespace

Tensor softplus(const Tensor& a, double beta, double threshold) {
  Tensor out = kernels::unary_map(a, "softplus", UnaryCode::softplus, {beta, threshold});
  if (should_record({a}))
    record_op("softplus", {a}, {&out}, {a}, {}, [beta, threshold](BackwardContext& ctx, const V& g) {
      // torch: g where x beta > threshold, else g z / (z + 1) with z = exp(x beta), which is
      // sigmoid(x beta) without z's overflow. torch's double backward is beta sigmoid'(x beta) times
      // (x beta < threshold): from the threshold up the sigmoid sees a detached argument, and NaN
      // keeps its history (NaN times the 0 of the mask is NaN in torch).
      Tensor xb = mul(ctx.saved(0), beta);
      Tensor live = history_where(logical_not(ge(xb, threshold)), xb);
      Tensor d = where(gt(xb, threshold), scalar_like(xb, 1.0), sigmoid(live));
      return V{mul(g[0], d)};
    });
  return out;
}

Tensor elu(const Tensor& a, double alpha) {
  Tensor out = kernels::unary_map(a, "elu", UnaryCode::elu, alpha);
  if (should_record({a}))
    record_op("elu", {a}, {&out}, {a}, {}, [alpha](BackwardContext& ctx, const V& g) {
      // torch's elu_backward on the input: x <= 0 gives alpha exp(x) (alpha at 0), NaN the linear side.
      // Its double backward keeps only x < 0: at 0 the exponential sees a detached argument.
      Tensor x = ctx.saved(0);
      Tensor e = exp(history_where(lt(x, 0.0), x));
      return V{mul(g[0], where(le(x, 0.0), mul(e, alpha), scalar_like(x, 1.0)))};
    });
  return out;
}

Tensor leaky_relu(const Tensor& a, double negative_slope) {
  Tensor out = kernels::unary_map(a, "leaky_relu", UnaryCode::leaky_relu, negative_slope);
  if (should_record({a}))
    record_op("leaky_relu", {a}, {&out}, {a}, {}, [negative_slope](BackwardContext& ctx, const V& g) {
      return V{where(gt(ctx.saved(0), 0.0), g[0], mul(g[0], negative_slope))};
    });
  return out;
}

Tensor hardtanh(const Tensor& a, double min_val, double max_val) {
  GS_CHECK(!(min_val > max_val), "hardtanh: expected min_val <= max_val, got min_val {} and max_val {}", min_val,
           max_val);
  Tensor out = kernels::unary_map(a, "hardtanh", UnaryCode::clamp, {min_val, max_val});
  if (should_record({a}))
    record_op("hardtanh", {a}, {&out}, {a}, {}, [min_val, max_val](BackwardContext& ctx, const V& g) {
      // torch's hardtanh_backward: zero where x <= min_val or x >= max_val, so NaN passes g.
      Tensor x = ctx.saved(0), zero = scalar_like(g[0], 0.0);
      return V{where(le(x, min_val), zero, where(ge(x, max_val), zero, g[0]))};
    });
  return out;
}

namespace {
using samples::away_from;
using samples::unary_entry;
// Signs mixed, kept 0.1 away from the kinks at `points`.
samples::SampleMaker mixed_away_from(std::initializer_list<double> points) {
  std::vector<double> p(points);
  return [p](RandomKey k) {
    Tensor t = sample_leaf_in({3, 4}, sub_key(k, 1), -2.0, 2.0);
    Tensor moved = t;
    for (double c : p) moved = away_from(moved, {c}, 0.1);
    return std::vector<OpSample>{{"signs mixed, away from the kinks", {moved}}};
  };
}
// x beta in [-3, 3], and in [25, 30], above the default threshold 20 (the linear side).
samples::SampleMaker softplus_samples(double beta) {
  return [beta](RandomKey k) {
    return std::vector<OpSample>{
        {"below the threshold", {sample_leaf_in({3, 4}, sub_key(k, 1), -3.0 / beta, 3.0 / beta)}},
        {"x beta above the threshold", {sample_leaf_in({2, 3}, sub_key(k, 2), 25.0 / beta, 30.0 / beta)}}};
  };
}
const OpRegistrar registrar{
    unary_entry("softplus", [](const Tensor& x) { return softplus(x); }, softplus_samples(1.0)),
    unary_entry("softplus_beta2", [](const Tensor& x) { return softplus(x, 2.0, 20.0); }, softplus_samples(2.0)),
    unary_entry("elu", [](const Tensor& x) { return elu(x, 1.5); }, mixed_away_from({0.0})),
    unary_entry("leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }, mixed_away_from({0.0})),
    unary_entry("hardtanh", [](const Tensor& x) { return hardtanh(x, -1.0, 0.5); }, mixed_away_from({-1.0, 0.5})),
};
}  // namespace

}  // namespace gs
