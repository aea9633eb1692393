// More elementwise ops, each as torch computes it: values, gradients (the rule of torch's
// derivatives.yaml, written with differentiable ops, so double backward follows) and the
// conventions at kinks, ties and NaN. Real dtypes f32 and f64 unless a line says more; binary ops
// broadcast and take one dtype and device for every tensor operand. CUDA: the kernels of
// ops/elementwise_math.h through the elementwise launchers, as the CPU loops.
#pragma once
#include <optional>

#include "engine/tensor.h"

namespace gs {

// ---- trigonometric and hyperbolic (ops/elementwise_trig.cpp)
Tensor sin(const Tensor& a);    // f32, f64, c64, c128; d = cos(a) (complex: conjugated)
Tensor cos(const Tensor& a);    // f32, f64, c64, c128; d = -sin(a) (complex: conjugated)
Tensor tan(const Tensor& a);    // d = 1 + tan(a)^2, from the output
Tensor asin(const Tensor& a);   // d = rsqrt(1 - a^2): inf at +-1, NaN outside [-1, 1]
Tensor acos(const Tensor& a);   // d = -rsqrt(1 - a^2)
Tensor atan(const Tensor& a);   // d = 1 / (a^2 + 1)
Tensor atan2(const Tensor& y, const Tensor& x);  // d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2); 0 where x^2 + y^2 == 0
Tensor sinh(const Tensor& a);   // d = cosh(a)
Tensor cosh(const Tensor& a);   // d = sinh(a)
Tensor asinh(const Tensor& a);  // d = rsqrt(a^2 + 1)
Tensor acosh(const Tensor& a);  // d = rsqrt(a^2 - 1): inf at 1, NaN below
Tensor atanh(const Tensor& a);  // d = 1 / (1 - a^2)

// ---- exponentials and logarithms (ops/elementwise_exp_log.cpp)
Tensor log1p(const Tensor& a);  // d = 1 / (a + 1)
Tensor expm1(const Tensor& a);  // d = expm1(a) + 1, from the output
Tensor log2(const Tensor& a);   // d = 1 / (a ln 2)
Tensor log10(const Tensor& a);  // d = 1 / (a ln 10)
Tensor exp2(const Tensor& a);   // d = exp2(a) ln 2, from the output

// ---- rounding (ops/rounding.cpp); gradient zero everywhere, as torch
Tensor floor(const Tensor& a);
Tensor ceil(const Tensor& a);
Tensor round(const Tensor& a);  // half to even (torch.round): round(0.5) = 0, round(2.5) = 2
Tensor trunc(const Tensor& a);

// ---- activations with scalar parameters (ops/activations.cpp), as torch.nn.functional's
// softplus: x where x * beta > threshold, else log1p(exp(x beta)) / beta; d = sigmoid(x beta) below the
// threshold, 1 above; its derivative is 0 from x beta = threshold up, NaN at NaN (torch's double backward).
Tensor softplus(const Tensor& a, double beta = 1.0, double threshold = 20.0);
Tensor elu(const Tensor& a, double alpha = 1.0);  // x > 0: x, else alpha (exp(x) - 1); d(0) = alpha, d'(0) = 0
Tensor leaky_relu(const Tensor& a, double negative_slope = 0.01);  // d at 0 is negative_slope
// clamp(a, min_val, max_val); gradient zero at and beyond the bounds (x <= min or x >= max), passed
// through for NaN; min_val > max_val is refused, as F.hardtanh.
Tensor hardtanh(const Tensor& a, double min_val = -1.0, double max_val = 1.0);

// ---- clamp, maximum, minimum (ops/clamp_minmax.cpp)
// Scalar bounds, at least one given: min(max(a, min), max); NaN a or a NaN bound gives NaN, min > max
// gives max. Gradient where min < a < max strictly (torch 2.14: zero at the bounds and for NaN).
Tensor clamp(const Tensor& a, std::optional<double> min, std::optional<double> max);
// Tensor bounds (an undefined Tensor for an absent one), broadcast with a. One bound: maximum(a, min)
// or minimum(a, max) exactly. Both: a gets the gradient strictly inside, half of it on a tie with a
// bound that is not also a tie with the other (a == min < max, min < a == max), all of it when a is
// NaN; min gets it where a < min <= max, max where a > max >= min or min > max.
Tensor clamp(const Tensor& a, const Tensor& min, const Tensor& max);
// NaN when either operand is NaN (then both get the whole gradient); on ties each gets half.
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

}  // namespace gs
