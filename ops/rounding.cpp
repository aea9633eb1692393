// floor, ceil, round (half to even), trunc (ops/elementwise_more.h). Piecewise constant: the
// gradient is zero everywhere, jumps included, as torch says (zeros_like(grad)); they still record a
// node so that an input reached only through them gets zeros rather than no gradient.
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/elementwise_more.h"
#include "ops/elementwise_more_kernels.h"
#include "ops/elementwise_more_samples.h"

namespace gs {
namespace {

using V = std::vector<Tensor>;

V zero_gradient(BackwardContext&, const V& g) { return V{zeros_like(g[0])}; }

}  // namespace

Tensor floor(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "floor", math::UnaryCode::floor);
  if (should_record({a})) record_op("floor", {a}, {&out}, {}, {}, zero_gradient);
  return out;
}

Tensor ceil(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "ceil", math::UnaryCode::ceil);
  if (should_record({a})) record_op("ceil", {a}, {&out}, {}, {}, zero_gradient);
  return out;
}

Tensor round(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "round", math::UnaryCode::round);
  if (should_record({a})) record_op("round", {a}, {&out}, {}, {}, zero_gradient);
  return out;
}

Tensor trunc(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "trunc", math::UnaryCode::trunc);
  if (should_record({a})) record_op("trunc", {a}, {&out}, {}, {}, zero_gradient);
  return out;
}

namespace {
// Values in [-3, 3] kept 0.05 away from every multiple of 1/2, where the four jump.
std::vector<OpSample> between_jumps(RandomKey k) {
  Tensor t = sample_leaf_in({3, 4}, sub_key(k, 1), -3.0, 3.0);
  return {{"values away from the jumps",
           {samples::away_from(t, {-3.0, -2.5, -2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0}, 0.05)}}};
}
const OpRegistrar registrar{
    samples::unary_entry("floor", floor, between_jumps),
    samples::unary_entry("ceil", ceil, between_jumps),
    samples::unary_entry("round", round, between_jumps),
    samples::unary_entry("trunc", trunc, between_jumps),
};
}  // namespace

}  // namespace gs
