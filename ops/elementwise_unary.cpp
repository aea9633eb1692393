// Unary elementwise ops. Each backward is written with differentiable ops (often reusing the
// saved output), so second derivatives come for free.
#include <cmath>
#include <numbers>

#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/compare.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/elementwise_launch.h"
#include "ops/elementwise_more_kernels.h"
#include "ops/kernels.h"
#include "ops/registry.h"

namespace gs {
namespace {

enum class Domain { real, real_or_complex };

// out = f(a) elementwise, f the functor of `code` (ops/elementwise_math.h), on a's device.
Tensor unary(const Tensor& a, const char* op, Domain domain, math::UnaryCode code, double param = 0) {
  return kernels::unary_map(a, op, code, param, domain == Domain::real_or_complex);
}

}  // namespace

Tensor neg(const Tensor& a) {
  Tensor out = unary(a, "neg", Domain::real_or_complex, math::UnaryCode::neg);
  if (should_record({a}))
    record_op("neg", {a}, {&out}, {}, {},
              [](BackwardContext&, const std::vector<Tensor>& g) { return std::vector<Tensor>{neg(g[0])}; });
  return out;
}

Tensor exp(const Tensor& a) {
  Tensor out = unary(a, "exp", Domain::real_or_complex, math::UnaryCode::exp);
  if (should_record({a}))
    record_op("exp", {a}, {&out}, {}, {0}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{mul(g[0], conj(ctx.saved(0)))};
    });
  return out;
}

Tensor log(const Tensor& a) {
  Tensor out = unary(a, "log", Domain::real, math::UnaryCode::log);
  if (should_record({a}))
    record_op("log", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{div(g[0], ctx.saved(0))};
    });
  return out;
}

Tensor sqrt(const Tensor& a) {
  Tensor out = unary(a, "sqrt", Domain::real, math::UnaryCode::sqrt);
  if (should_record({a}))
    record_op("sqrt", {a}, {&out}, {}, {0}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{div(g[0], mul(ctx.saved(0), 2.0))};
    });
  return out;
}

Tensor rsqrt(const Tensor& a) {
  Tensor out = unary(a, "rsqrt", Domain::real, math::UnaryCode::rsqrt);
  if (should_record({a}))
    record_op("rsqrt", {a}, {&out}, {}, {0}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      // d/dx x^{-1/2} = -1/2 x^{-3/2} = -1/2 out^3
      Tensor o = ctx.saved(0);
      return std::vector<Tensor>{mul(g[0], mul(mul(o, mul(o, o)), -0.5))};
    });
  return out;
}

Tensor sign(const Tensor& a) {
  Tensor out = unary(a, "sign", Domain::real, math::UnaryCode::sign);
  if (should_record({a}))
    record_op("sign", {a}, {&out}, {}, {},
              [](BackwardContext&, const std::vector<Tensor>& g) { return std::vector<Tensor>{zeros_like(g[0])}; });
  return out;
}

Tensor abs(const Tensor& a) {
  kernels::check_defined(a, "abs");
  if (is_complex(a.dtype())) {
    Tensor out = empty(a.sizes(), real_dtype(a.dtype()), a.device());
    if (kernels::on_cuda(a)) {
      kernels::launch_strided_cuda<2>("abs", out, {&a}, [&](const auto& loop, void* stream) {
        return GS_CUDA_CALL(cuda_kernels::complex_abs(a.dtype(), out.raw_data(), a.raw_data(), loop, stream));
      });
    } else {
      kernels::check_cpu(a, "abs");
      dispatch_float_complex(a.dtype(), "abs", [&]<typename T>() {
        if constexpr (is_complex_v<T>) kernels::unary_loop<real_t<T>, T>(out, a, math::ComplexAbs{});
      });
    }
    if (should_record({a}))
      record_op("abs", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
        // d|z| = Re(conj(z/|z|) dz): gradient g * z / |z| (0 at z = 0). |z| is recomputed rather than
        // saved, so an in-place write on the result does not invalidate the backward (as torch).
        Tensor z = ctx.saved(0), r = abs(z);
        Tensor safe_r = where(eq(r, 0.0), scalar_like(r, 1.0), r);
        Tensor scale = div(where(eq(r, 0.0), scalar_like(r, 0.0), g[0]), safe_r);
        return std::vector<Tensor>{mul(complex(scale, zeros_like(scale)), z)};
      });
    return out;
  }
  Tensor out = unary(a, "abs", Domain::real, math::UnaryCode::abs);
  if (should_record({a}))
    record_op("abs", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{mul(g[0], sign(ctx.saved(0)))};
    });
  return out;
}

Tensor tanh(const Tensor& a) {
  Tensor out = unary(a, "tanh", Domain::real, math::UnaryCode::tanh);
  if (should_record({a}))
    record_op("tanh", {a}, {&out}, {}, {0}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      Tensor o = ctx.saved(0);
      return std::vector<Tensor>{mul(g[0], sub(1.0, mul(o, o)))};
    });
  return out;
}

Tensor sigmoid(const Tensor& a) {
  Tensor out = unary(a, "sigmoid", Domain::real, math::UnaryCode::sigmoid);
  if (should_record({a}))
    record_op("sigmoid", {a}, {&out}, {}, {0}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      Tensor s = ctx.saved(0);
      return std::vector<Tensor>{mul(g[0], mul(s, sub(1.0, s)))};
    });
  return out;
}

Tensor relu(const Tensor& a) {
  // NaN stays NaN (x > 0 is false for it), as torch's relu; so does its gradient: torch's
  // threshold_backward zeroes where the output is <= 0, which a NaN is not.
  Tensor out = unary(a, "relu", Domain::real, math::UnaryCode::relu);
  if (should_record({a}))
    record_op("relu", {a}, {&out}, {}, {0}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{where(le(ctx.saved(0), 0.0), scalar_like(g[0], 0.0), g[0])};
    });
  return out;
}

Tensor erf(const Tensor& a) {
  Tensor out = unary(a, "erf", Domain::real, math::UnaryCode::erf);
  if (should_record({a}))
    record_op("erf", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      Tensor x = ctx.saved(0);
      return std::vector<Tensor>{mul(g[0], mul(exp(neg(mul(x, x))), 2.0 / std::sqrt(std::numbers::pi)))};
    });
  return out;
}

namespace {
constexpr double kSqrt2 = math::kSqrt2;
constexpr double kTanhK = math::kGeluTanhK;
constexpr double kTanhC = math::kGeluTanhC;
}  // namespace

Tensor gelu(const Tensor& a, GeluApprox approx) {
  Tensor out;
  if (approx == GeluApprox::none) {
    out = unary(a, "gelu", Domain::real, math::UnaryCode::gelu);
  } else {
    out = unary(a, "gelu", Domain::real, math::UnaryCode::gelu_tanh);
  }
  if (should_record({a}))
    record_op(approx == GeluApprox::none ? "gelu" : "gelu_tanh", {a}, {&out}, {a}, {},
              [approx](BackwardContext& ctx, const std::vector<Tensor>& g) {
                Tensor x = ctx.saved(0);
                Tensor d;
                if (approx == GeluApprox::none) {
                  // Phi(x) + x phi(x)
                  Tensor cdf = mul(add(erf(div(x, kSqrt2)), 1.0), 0.5);
                  Tensor pdf = mul(exp(mul(mul(x, x), -0.5)), 1.0 / std::sqrt(2.0 * std::numbers::pi));
                  d = add(cdf, mul(x, pdf));
                } else {
                  Tensor x2 = mul(x, x);
                  Tensor t = tanh(mul(add(x, mul(mul(x2, x), kTanhC)), kTanhK));
                  Tensor dinner = mul(add(mul(x2, 3.0 * kTanhC), 1.0), kTanhK);
                  d = add(mul(add(t, 1.0), 0.5), mul(mul(mul(x, sub(1.0, mul(t, t))), dinner), 0.5));
                }
                return std::vector<Tensor>{mul(g[0], d)};
              });
  return out;
}

Tensor silu(const Tensor& a) {
  Tensor out = unary(a, "silu", Domain::real, math::UnaryCode::silu);
  if (should_record({a}))
    record_op("silu", {a}, {&out}, {a}, {}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      Tensor x = ctx.saved(0), s = sigmoid(x);
      return std::vector<Tensor>{mul(g[0], mul(s, add(mul(x, sub(1.0, s)), 1.0)))};
    });
  return out;
}

Tensor square(const Tensor& a) { return mul(a, a); }

namespace {
using V = std::vector<Tensor>;
std::vector<OpSample> plain(RandomKey k, bool complex_too) {
  std::vector<OpSample> s = {{"2-d", {sample_leaf({3, 4}, {k.seed, k.stream * 10 + 1})}},
                             {"non-contiguous", {sample_leaf_transposed({2, 3}, {k.seed, k.stream * 10 + 2})}}};
  if (complex_too) s.push_back({"c128", {sample_leaf({2, 3}, {k.seed, k.stream * 10 + 3}, DType::c128)}});
  return s;
}
std::vector<OpSample> positive(RandomKey k) {
  return {{"values in [0.3, 3]", {sample_leaf_in({3, 4}, {k.seed, k.stream * 10 + 4}, 0.3, 3.0)}}};
}
// Values kept away from the kinks of abs and relu, where finite differences are meaningless.
std::vector<OpSample> away_from_zero(RandomKey k) {
  Tensor t = sample_leaf_in({3, 4}, {k.seed, k.stream * 10 + 5}, 0.2, 2.0);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); i += 2) p[i] = -p[i];
  return {{"signs mixed, |x| >= 0.2", {t}}};
}
OpInfo unary_entry(std::string name, std::function<Tensor(const Tensor&)> f,
                   std::function<std::vector<OpSample>(RandomKey)> samples) {
  return {std::move(name), std::move(samples), [f](const V& x) { return V{f(x[0])}; }};
}
auto plain_real = [](RandomKey k) { return plain(k, false); };
auto plain_complex = [](RandomKey k) { return plain(k, true); };
const OpRegistrar registrar{
    unary_entry("neg", [](const Tensor& x) { return neg(x); }, plain_complex),
    unary_entry("exp", [](const Tensor& x) { return exp(x); }, plain_complex),
    unary_entry("log", [](const Tensor& x) { return log(x); }, positive),
    unary_entry("sqrt", [](const Tensor& x) { return sqrt(x); }, positive),
    unary_entry("rsqrt", [](const Tensor& x) { return rsqrt(x); }, positive),
    unary_entry("abs", [](const Tensor& x) { return abs(x); }, away_from_zero),
    unary_entry("abs_complex", [](const Tensor& x) { return abs(x); },
                [](RandomKey k) { return std::vector<OpSample>{{"c128", {sample_leaf({5}, {k.seed, 77}, DType::c128)}}}; }),
    unary_entry("tanh", [](const Tensor& x) { return tanh(x); }, plain_real),
    unary_entry("sigmoid", [](const Tensor& x) { return sigmoid(x); }, plain_real),
    unary_entry("relu", [](const Tensor& x) { return relu(x); }, away_from_zero),
    unary_entry("sign", [](const Tensor& x) { return sign(x); }, away_from_zero),  // gradient 0 away from 0
    unary_entry("erf", [](const Tensor& x) { return erf(x); }, plain_real),
    unary_entry("gelu", [](const Tensor& x) { return gelu(x); }, plain_real),
    unary_entry("gelu_tanh", [](const Tensor& x) { return gelu(x, GeluApprox::tanh); }, plain_real),
    unary_entry("silu", [](const Tensor& x) { return silu(x); }, plain_real),
    unary_entry("square", [](const Tensor& x) { return square(x); }, plain_complex),
};
}  // namespace

}  // namespace gs
