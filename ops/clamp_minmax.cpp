// clamp (scalar and tensor bounds), maximum, minimum (ops/elementwise_more.h). Forward: the
// ClampScalar / Maximum / Minimum functors of ops/elementwise_math.h (tensor-bound clamp is
// minimum(maximum(a, min), max): the same values, NaN from any operand). Gradients: torch 2.14's,
// written with where() on comparisons, so their derivative in the incoming gradient is themselves.
#include <limits>

#include "engine/autograd/record.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/elementwise_more.h"
#include "ops/elementwise_more_kernels.h"
#include "ops/elementwise_more_samples.h"

namespace gs {

using V = std::vector<Tensor>;

Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max) {
  GS_CHECK(min || max, "clamp: expected at least one of min and max, got neither");
  constexpr double inf = std::numeric_limits<double>::infinity();
  Tensor out = kernels::unary_map(a, "clamp", math::UnaryCode::clamp, {min.value_or(-inf), max.value_or(inf)});
  if (should_record({a}))
    record_op("clamp", {a}, {&out}, {a}, {}, [min, max](BackwardContext& ctx, const V& g) {
      // Strictly inside the bounds only: zero at a bound and for NaN (torch 2.14's ClampBackward1).
      Tensor x = ctx.saved(0);
      Tensor inside = min ? gt(x, *min) : Tensor();
      if (max) inside = inside.defined() ? logical_and(inside, lt(x, *max)) : lt(x, *max);
      return V{where(inside, g[0], scalar_like(g[0], 0.0))};
    });
  return out;
}

Tensor clamp(const Tensor& a, const Tensor& min, const Tensor& max) {
  GS_CHECK(min.defined() || max.defined(), "clamp: expected at least one of min and max, got neither");
  if (!max.defined()) return maximum(a, min);  // torch's clamp with one tensor bound, gradients included
  if (!min.defined()) return minimum(a, max);
  Tensor lower = kernels::binary_map(a, min, "clamp", math::BinaryCode::maximum);
  Tensor out = kernels::binary_map(lower, max, "clamp", math::BinaryCode::minimum);
  if (should_record({a, min, max}))
    record_op("clamp_tensor", {a, min, max}, {&out}, {a, min, max}, {}, [](BackwardContext& ctx, const V& g) {
      Tensor x = ctx.saved(0), lo = ctx.saved(1), hi = ctx.saved(2);
      Tensor zero = scalar_like(g[0], 0.0), half = mul(g[0], 0.5);
      // A tie with one bound splits the gradient with it; a tie with both (min == x == max) does not.
      Tensor lo_tie = logical_and(eq(x, lo), lt(x, hi));
      Tensor hi_tie = logical_and(eq(x, hi), gt(x, lo));
      Tensor ordered = le(lo, hi);  // false for min > max and for a NaN bound
      Tensor gx, glo, ghi;
      if (ctx.needs_input_grad(0))
        gx = where(lt(x, lo), zero, where(gt(x, hi), zero, where(lo_tie, half, where(hi_tie, half, g[0]))));
      if (ctx.needs_input_grad(1)) glo = where(logical_and(lt(x, lo), ordered), g[0], where(lo_tie, half, zero));
      if (ctx.needs_input_grad(2))
        ghi = where(logical_and(gt(x, hi), ordered), g[0], where(gt(lo, hi), g[0], where(hi_tie, half, zero)));
      return V{gx, glo, ghi};
    });
  return out;
}

namespace {
// torch's maximum / minimum rule: half the gradient to each on a tie, none to the operand that lost,
// all of it to both when either is NaN (no comparison holds).
V split_at_ties(BackwardContext& ctx, const Tensor& g, bool keep_larger) {
  Tensor a = ctx.saved(0), b = ctx.saved(1);
  Tensor zero = scalar_like(g, 0.0);
  Tensor shared = where(eq(a, b), mul(g, 0.5), g);
  Tensor a_lost = keep_larger ? lt(a, b) : gt(a, b);
  Tensor b_lost = keep_larger ? gt(a, b) : lt(a, b);
  return V{ctx.needs_input_grad(0) ? where(a_lost, zero, shared) : Tensor(),
           ctx.needs_input_grad(1) ? where(b_lost, zero, shared) : Tensor()};
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) {
  Tensor out = kernels::binary_map(a, b, "maximum", math::BinaryCode::maximum);
  if (should_record({a, b}))
    record_op("maximum", {a, b}, {&out}, {a, b}, {},
              [](BackwardContext& ctx, const V& g) { return split_at_ties(ctx, g[0], true); });
  return out;
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  Tensor out = kernels::binary_map(a, b, "minimum", math::BinaryCode::minimum);
  if (should_record({a, b}))
    record_op("minimum", {a, b}, {&out}, {a, b}, {},
              [](BackwardContext& ctx, const V& g) { return split_at_ties(ctx, g[0], false); });
  return out;
}

namespace {
using samples::away_from;

std::vector<OpSample> clamp_scalar_samples(RandomKey k) {
  return {{"away from -0.5 and 0.7", {away_from(sample_leaf_in({3, 4}, sub_key(k, 1), -2.0, 2.0), {-0.5, 0.7}, 0.1)}}};
}
// x (3, 4) kept out of [-1.35, -0.65] and [0.65, 1.35], bounds broadcast from (4) and (3, 1) in
// [-1.2, -0.8] and [0.8, 1.2]: no tie is within reach of a finite difference.
std::vector<OpSample> clamp_tensor_samples(RandomKey k) {
  auto x = [&](uint64_t s) { return away_from(sample_leaf_in({3, 4}, sub_key(k, s), -2.5, 2.5), {-1.0, 1.0}, 0.35); };
  return {{"min < max, broadcast",
           {x(1), sample_leaf_in({4}, sub_key(k, 2), -1.2, -0.8), sample_leaf_in({3, 1}, sub_key(k, 3), 0.8, 1.2)}},
          {"min > max (the result is max)",
           {x(4), sample_leaf_in({4}, sub_key(k, 5), 0.8, 1.2), sample_leaf_in({3, 1}, sub_key(k, 6), -1.2, -0.8)}}};
}
std::vector<OpSample> minmax_samples(RandomKey k) {
  return {{"same shape", {sample_leaf({3, 4}, sub_key(k, 1)), sample_leaf({3, 4}, sub_key(k, 2))}},
          {"broadcast", {sample_leaf({2, 1, 4}, sub_key(k, 3)), sample_leaf({3, 1}, sub_key(k, 4))}},
          {"non-contiguous", {sample_leaf_transposed({4, 3}, sub_key(k, 5)), sample_leaf({4, 3}, sub_key(k, 6))}}};
}

const OpRegistrar registrar{
    {"clamp", clamp_scalar_samples,
     [](const V& x) {
       return V{clamp(x[0], -0.5, 0.7), clamp(x[0], -0.5, std::nullopt), clamp(x[0], std::nullopt, 0.7)};
     }},
    {"clamp_tensor", clamp_tensor_samples,
     [](const V& x) { return V{clamp(x[0], x[1], x[2]), clamp(x[0], x[1], Tensor()), clamp(x[0], Tensor(), x[2])}; }},
    {"maximum", minmax_samples, [](const V& x) { return V{maximum(x[0], x[1])}; }},
    {"minimum", minmax_samples, [](const V& x) { return V{minimum(x[0], x[1])}; }},
};
}  // namespace

}  // namespace gs
