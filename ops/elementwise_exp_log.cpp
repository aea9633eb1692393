// log1p, expm1, log2, log10, exp2 (ops/elementwise_more.h): torch's rules, written with
// differentiable ops; expm1 and exp2 reuse their output, as torch does.
#include <numbers>

#include "engine/autograd/record.h"
#include "ops/elementwise.h"
#include "ops/elementwise_more.h"
#include "ops/elementwise_more_kernels.h"
#include "ops/elementwise_more_samples.h"

namespace gs {

using math::UnaryCode;
using V = std::vector<Tensor>;

Tensor log1p(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "log1p", UnaryCode::log1p);
  if (should_record({a}))
    record_op("log1p", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      return V{div(g[0], add(ctx.saved(0), 1.0))};
    });
  return out;
}

Tensor expm1(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "expm1", UnaryCode::expm1);
  if (should_record({a}))
    record_op("expm1", {a}, {&out}, {}, {0}, [](BackwardContext& ctx, const V& g) {
      return V{mul(g[0], add(ctx.saved(0), 1.0))};
    });
  return out;
}

Tensor log2(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "log2", UnaryCode::log2);
  if (should_record({a}))
    record_op("log2", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      return V{div(g[0], mul(ctx.saved(0), std::numbers::ln2))};
    });
  return out;
}

Tensor log10(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "log10", UnaryCode::log10);
  if (should_record({a}))
    record_op("log10", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      return V{div(g[0], mul(ctx.saved(0), std::numbers::ln10))};
    });
  return out;
}

Tensor exp2(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "exp2", UnaryCode::exp2);
  if (should_record({a}))
    record_op("exp2", {a}, {&out}, {}, {0}, [](BackwardContext& ctx, const V& g) {
      return V{mul(mul(g[0], ctx.saved(0)), std::numbers::ln2)};
    });
  return out;
}

namespace {
using samples::unary_entry;
using samples::within;
const OpRegistrar registrar{
    unary_entry("log1p", log1p, within(-0.7, 3.0)),
    unary_entry("expm1", expm1, within(-2.0, 2.0)),
    unary_entry("log2", log2, within(0.3, 3.0)),
    unary_entry("log10", log10, within(0.3, 3.0)),
    unary_entry("exp2", exp2, within(-2.0, 2.0)),
};
}  // namespace

}  // namespace gs
