// add, sub, mul, div, pow: forward kernels and backward rules side by side. Broadcast gradients
// are reduced to each input's shape by the engine (engine/autograd/engine.cpp).
#include <cmath>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/elementwise_launch.h"
#include "ops/kernels.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/compare.h"

namespace gs {
namespace {

// out = f(a, b) over the broadcast shape, f the functor of `code` (ops/elementwise_math.h), for
// the float and complex dtypes (pow: checked real by its caller), on the inputs' device.
Tensor binary_float_complex(const Tensor& a, const Tensor& b, const char* op, math::BinaryCode code) {
  kernels::check_same_dtype(a, b, op);
  kernels::check_same_device(a, b, op);
  kernels::check_float_complex(a, op);
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), op), a.dtype(), a.device());
  if (kernels::on_cuda(a)) {
    kernels::cuda_binary(code, out, a, b, op);
    return out;
  }
  kernels::check_cpu(a, op);
  math::with_binary(code, [&](auto f) {
    dispatch_float_complex(a.dtype(), op, [&]<typename T>() {
      if constexpr (std::is_invocable_v<decltype(f), T, T>) kernels::binary_loop<T, T, T>(out, a, b, f);
    });
  });
  return out;
}

}  // namespace

Tensor scalar_like(const Tensor& t, double value) {
  kernels::check_defined(t, "scalar_like");
  return full({}, value, t.dtype(), t.device());
}

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_float_complex(a, b, "add", math::BinaryCode::add);
  if (should_record({a, b}))
    record_op("add", {a, b}, {&out}, {}, {}, [](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0], g[0]};
    });
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_float_complex(a, b, "sub", math::BinaryCode::sub);
  if (should_record({a, b}))
    record_op("sub", {a, b}, {&out}, {}, {}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{g[0], ctx.needs_input_grad(1) ? neg(g[0]) : Tensor()};
    });
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_float_complex(a, b, "mul", math::BinaryCode::mul);
  if (should_record({a, b}))
    record_op("mul", {a, b}, {&out}, {a, b}, {}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      // d(ab)/da = b: the complex chain rule conjugates the partner.
      Tensor ga = ctx.needs_input_grad(0) ? mul(g[0], conj(ctx.saved(1))) : Tensor();
      Tensor gb = ctx.needs_input_grad(1) ? mul(g[0], conj(ctx.saved(0))) : Tensor();
      return std::vector<Tensor>{ga, gb};
    });
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_float_complex(a, b, "div", math::BinaryCode::div);
  if (should_record({a, b}))
    record_op("div", {a, b}, {&out}, {a, b}, {}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      Tensor b = ctx.saved(1);
      Tensor ga = ctx.needs_input_grad(0) ? div(g[0], conj(b)) : Tensor();
      // d(a/b)/db = -a/b^2, evaluated as -g ((a / b) / b), as torch: b^2 underflows for |b| < 1e-154
      // (0 / 0 = NaN where the answer is 0), and g / b can overflow where (a / b) / b does not.
      Tensor gb = ctx.needs_input_grad(1) ? neg(mul(g[0], conj(div(div(ctx.saved(0), b), b)))) : Tensor();
      return std::vector<Tensor>{ga, gb};
    });
  return out;
}

Tensor pow(const Tensor& a, const Tensor& b) {
  kernels::check_same_dtype(a, b, "pow");
  GS_CHECK(is_floating(a.dtype()), "pow: expected f32 or f64 tensors, got {}", dtype_name(a.dtype()));
  Tensor out = binary_float_complex(a, b, "pow", math::BinaryCode::pow);
  if (should_record({a, b}))
    record_op("pow", {a, b}, {&out}, {a, b}, {0}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      Tensor a = ctx.saved(0), b = ctx.saved(1), out = ctx.saved(2);
      // PyTorch's rules at the edges: d/da = b a^(b-1), taken as 0 where b == 0 (a^0 = 1 for every a,
      // even a = 0 where a^-1 is inf); d/db = a^b log a, taken as 0 where a == 0 and b >= 0 (the
      // limit along b), NaN for a < 0 (log of a negative number), as torch.pow gives.
      Tensor ga;
      if (ctx.needs_input_grad(0)) {
        Tensor d = mul(b, pow(a, sub(b, 1.0)));
        ga = mul(g[0], where(eq(b, 0.0), zeros_like(d), d));
      }
      Tensor gb;
      if (ctx.needs_input_grad(1)) {
        Tensor zero_base = logical_and(eq(a, 0.0), ge(b, 0.0));
        Tensor d = mul(out, log(where(zero_base, scalar_like(a, 1.0), a)));
        gb = mul(g[0], where(zero_base, zeros_like(d), d));
      }
      return std::vector<Tensor>{ga, gb};
    });
  return out;
}

Tensor pow(const Tensor& a, double exponent) {
  GS_CHECK(a.defined() && is_floating(a.dtype()), "pow: expected an f32 or f64 tensor, got {}",
           a.meta_str());
  Tensor out = empty(a.sizes(), a.dtype(), a.device());
  if (kernels::on_cuda(a)) {
    kernels::cuda_unary(math::UnaryCode::pow_scalar, exponent, out, a, "pow");
  } else {
    kernels::check_cpu(a, "pow");
    // torch's special exponents (0.5, -1, ...) are picked once here, not per element.
    math::with_pow_scalar(exponent, [&](auto f) {
      dispatch_float(a.dtype(), "pow", [&]<typename T>() { kernels::unary_loop<T, T>(out, a, f); });
    });
  }
  if (should_record({a}))
    record_op("pow_scalar", {a}, {&out}, {a}, {}, [exponent](BackwardContext& ctx, const std::vector<Tensor>& g) {
      Tensor a = ctx.saved(0);
      if (exponent == 0.0) return std::vector<Tensor>{zeros_like(g[0])};
      Tensor d = exponent == 1.0 ? g[0] : mul(g[0], mul(pow(a, exponent - 1.0), exponent));
      return std::vector<Tensor>{d};
    });
  return out;
}

Tensor add(const Tensor& a, double b) { return add(a, scalar_like(a, b)); }
Tensor sub(const Tensor& a, double b) { return sub(a, scalar_like(a, b)); }
Tensor sub(double a, const Tensor& b) { return sub(scalar_like(b, a), b); }
Tensor mul(const Tensor& a, double b) { return mul(a, scalar_like(a, b)); }
Tensor div(const Tensor& a, double b) { return div(a, scalar_like(a, b)); }
Tensor div(double a, const Tensor& b) { return div(scalar_like(b, a), b); }

namespace {

std::vector<OpSample> binary_samples(RandomKey k, bool complex_too) {
  auto key = [&](uint64_t s) { return sub_key(k, s); };
  std::vector<OpSample> s = {
      {"same shape", {sample_leaf({3, 5}, key(1)), sample_leaf({3, 5}, key(2))}},
      {"broadcast", {sample_leaf({2, 1, 4}, key(3)), sample_leaf({3, 1}, key(4))}},
      {"non-contiguous", {sample_leaf_transposed({4, 3}, key(5)), sample_leaf({4, 3}, key(6))}},
      {"0-dim", {sample_leaf({}, key(7)), sample_leaf({3}, key(8))}},
  };
  if (complex_too)
    s.push_back({"complex broadcast", {sample_leaf({2, 3}, key(9), DType::c128), sample_leaf({3}, key(10), DType::c128)}});
  return s;
}

// Inputs away from zero for division.
std::vector<OpSample> div_samples(RandomKey k) {
  auto s = binary_samples(k, true);
  for (auto& smp : s) {
    Tensor b = smp.inputs[1];
    NoGradGuard ng;
    Tensor shifted = contiguous_copy(b, true);
    dispatch_float_complex(shifted.dtype(), "div sample", [&]<typename T>() {
      T* p = shifted.data<T>();
      for (int64_t i = 0; i < shifted.numel(); ++i) p[i] += (std::abs(p[i]) < 0.5 ? T(1.5) : T(0));
    });
    shifted.set_requires_grad(true);
    smp.inputs[1] = shifted;
  }
  return s;
}

const OpRegistrar registrar{
    {"add", [](RandomKey k) { return binary_samples(k, true); },
     [](const std::vector<Tensor>& x) { return std::vector<Tensor>{add(x[0], x[1])}; }},
    {"sub", [](RandomKey k) { return binary_samples(k, true); },
     [](const std::vector<Tensor>& x) { return std::vector<Tensor>{sub(x[0], x[1])}; }},
    {"mul", [](RandomKey k) { return binary_samples(k, true); },
     [](const std::vector<Tensor>& x) { return std::vector<Tensor>{mul(x[0], x[1])}; }},
    {"div", div_samples, [](const std::vector<Tensor>& x) { return std::vector<Tensor>{div(x[0], x[1])}; }},
    {"pow",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"positive base", {sample_leaf_in({3, 4}, {k.seed, 1}, 0.5, 2.0), sample_leaf_in({4}, {k.seed, 2}, -1.5, 2.5)}}};
     },
     [](const std::vector<Tensor>& x) { return std::vector<Tensor>{pow(x[0], x[1])}; }},
    {"pow_scalar",
     [](RandomKey k) {
       return std::vector<OpSample>{{"base in [0.5, 2]", {sample_leaf_in({3, 4}, {k.seed, 3}, 0.5, 2.0)}}};
     },
     [](const std::vector<Tensor>& x) {
       return std::vector<Tensor>{pow(x[0], 2.5), pow(x[0], 2.0), pow(x[0], -1.0)};
     }},
};

}  // namespace
}  // namespace gs
