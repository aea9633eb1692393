// Trigonometric and hyperbolic ops (ops/elementwise_more.h). Each rule is torch's
// (derivatives.yaml) written with differentiable ops, so double backward follows; complex sin and
// cos conjugate the derivative, as the complex chain rule of ops/elementwise.h says.
#include "engine/autograd/record.h"
#include "ops/compare.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/elementwise_more.h"
#include "ops/elementwise_more_kernels.h"
#include "ops/elementwise_more_samples.h"

namespace gs {

using math::UnaryCode;
using V = std::vector<Tensor>;

Tensor sin(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "sin", UnaryCode::sin, {}, /*complex_too=*/true);
  if (should_record({a}))
    record_op("sin", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      return V{mul(g[0], conj(cos(ctx.saved(0))))};
    });
  return out;
}

Tensor cos(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "cos", UnaryCode::cos, {}, /*complex_too=*/true);
  if (should_record({a}))
    record_op("cos", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      return V{mul(g[0], neg(conj(sin(ctx.saved(0)))))};
    });
  return out;
}

Tensor tan(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "tan", UnaryCode::tan);
  if (should_record({a}))
    record_op("tan", {a}, {&out}, {}, {0}, [](BackwardContext& ctx, const V& g) {
      return V{mul(g[0], add(pow(ctx.saved(0), 2.0), 1.0))};
    });
  return out;
}

namespace {
// rsqrt(1 - x^2), the derivative of asin (and minus that of acos).
Tensor inv_sqrt_one_minus_square(const Tensor& x) { return rsqrt(sub(1.0, mul(x, x))); }
}  // namespace

Tensor asin(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "asin", UnaryCode::asin);
  if (should_record({a}))
    record_op("asin", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      return V{mul(g[0], inv_sqrt_one_minus_square(ctx.saved(0)))};
    });
  return out;
}

Tensor acos(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "acos", UnaryCode::acos);
  if (should_record({a}))
    record_op("acos", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      return V{mul(g[0], neg(inv_sqrt_one_minus_square(ctx.saved(0))))};
    });
  return out;
}

Tensor atan(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "atan", UnaryCode::atan);
  if (should_record({a}))
    record_op("atan", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      Tensor x = ctx.saved(0);
      return V{div(g[0], add(mul(x, x), 1.0))};
    });
  return out;
}

Tensor atan2(const Tensor& y, const Tensor& x) {
  Tensor out = kernels::binary_map(y, x, "atan2", math::BinaryCode::atan2);
  if (should_record({y, x}))
    record_op("atan2", {y, x}, {&out}, {y, x}, {}, [](BackwardContext& ctx, const V& g) {
      // torch 2.14: 1 / (x^2 + y^2) taken as 0 where x^2 + y^2 is 0 (at the origin, or underflowed),
      // so the gradient there is 0 (its derivative NaN, as torch's).
      Tensor y = ctx.saved(0), x = ctx.saved(1);
      Tensor denom = add(mul(y, y), mul(x, x));
      Tensor recip = where(eq(denom, 0.0), scalar_like(denom, 0.0), div(1.0, denom));
      Tensor gy = ctx.needs_input_grad(0) ? mul(mul(g[0], x), recip) : Tensor();
      Tensor gx = ctx.needs_input_grad(1) ? mul(mul(g[0], neg(y)), recip) : Tensor();
      return V{gy, gx};
    });
  return out;
}

Tensor sinh(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "sinh", UnaryCode::sinh);
  if (should_record({a}))
    record_op("sinh", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      return V{mul(g[0], cosh(ctx.saved(0)))};
    });
  return out;
}

Tensor cosh(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "cosh", UnaryCode::cosh);
  if (should_record({a}))
    record_op("cosh", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      return V{mul(g[0], sinh(ctx.saved(0)))};
    });
  return out;
}

Tensor asinh(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "asinh", UnaryCode::asinh);
  if (should_record({a}))
    record_op("asinh", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      return V{mul(g[0], rsqrt(add(pow(ctx.saved(0), 2.0), 1.0)))};
    });
  return out;
}

Tensor acosh(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "acosh", UnaryCode::acosh);
  if (should_record({a}))
    record_op("acosh", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      return V{mul(g[0], rsqrt(sub(pow(ctx.saved(0), 2.0), 1.0)))};
    });
  return out;
}

Tensor atanh(const Tensor& a) {
  Tensor out = kernels::unary_map(a, "atanh", UnaryCode::atanh);
  if (should_record({a}))
    record_op("atanh", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const V& g) {
      return V{div(g[0], sub(1.0, pow(ctx.saved(0), 2.0)))};
    });
  return out;
}

namespace {

using samples::unary_entry;
using samples::within;

std::vector<OpSample> real_and_complex(RandomKey k) {
  return {{"2-d", {sample_leaf({3, 4}, sub_key(k, 1))}},
          {"non-contiguous", {sample_leaf_transposed({2, 3}, sub_key(k, 2))}},
          {"c128", {sample_leaf({2, 3}, sub_key(k, 3), DType::c128)}}};
}
std::vector<OpSample> atan2_samples(RandomKey k) {
  return {{"same shape", {sample_leaf({3, 4}, sub_key(k, 1)), sample_leaf({3, 4}, sub_key(k, 2))}},
          {"broadcast", {sample_leaf({2, 1, 4}, sub_key(k, 3)), sample_leaf({3, 1}, sub_key(k, 4))}},
          {"non-contiguous", {sample_leaf_transposed({4, 3}, sub_key(k, 5)), sample_leaf({4, 3}, sub_key(k, 6))}}};
}

const OpRegistrar registrar{
    unary_entry("sin", sin, real_and_complex),
    unary_entry("cos", cos, real_and_complex),
    unary_entry("tan", tan, within(-1.2, 1.2)),
    unary_entry("asin", asin, within(-0.9, 0.9)),
    unary_entry("acos", acos, within(-0.9, 0.9)),
    unary_entry("atan", atan, within(-3.0, 3.0)),
    {"atan2", atan2_samples, [](const V& x) { return V{atan2(x[0], x[1])}; }},
    unary_entry("sinh", sinh, within(-2.0, 2.0)),
    unary_entry("cosh", cosh, within(-2.0, 2.0)),
    unary_entry("asinh", asinh, within(-3.0, 3.0)),
    unary_entry("acosh", acosh, within(1.2, 3.0)),
    unary_entry("atanh", atanh, within(-0.9, 0.9)),
};

}  // namespace
}  // namespace gs
