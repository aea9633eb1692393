// Elementwise ops with NumPy broadcasting. Both tensor operands must share dtype and device;
// the scalar overloads take the tensor's dtype. Complex tensors follow PyTorch's convention:
// the gradient of a real loss L w.r.t. z = x + iy is dL/dx + i dL/dy.
#pragma once
#include "engine/tensor.h"

namespace gs {

// ---- binary (ops/elementwise_binary.cpp); f32, f64, c64, c128 (pow: f32, f64)
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);  // a > 0 where b's gradient is needed
Tensor add(const Tensor& a, double b);
Tensor sub(const Tensor& a, double b);
Tensor sub(double a, const Tensor& b);
Tensor mul(const Tensor& a, double b);
Tensor div(const Tensor& a, double b);
Tensor div(double a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
// A 0-dim tensor holding `value` with t's dtype and device (a constant: no grad).
Tensor scalar_like(const Tensor& t, double value);

// ---- unary (ops/elementwise_unary.cpp)
Tensor neg(const Tensor& a);     // f32, f64, c64, c128
Tensor exp(const Tensor& a);     // f32, f64, c64, c128
Tensor log(const Tensor& a);     // f32, f64
Tensor sqrt(const Tensor& a);    // f32, f64
Tensor rsqrt(const Tensor& a);   // f32, f64
Tensor abs(const Tensor& a);     // f32, f64; complex -> real modulus
Tensor tanh(const Tensor& a);    // f32, f64
Tensor sigmoid(const Tensor& a); // f32, f64
Tensor relu(const Tensor& a);    // f32, f64
Tensor erf(const Tensor& a);     // f32, f64
Tensor sign(const Tensor& a);    // f32, f64; not differentiable (gradient zero)
enum class GeluApprox { none, tanh };  // erf form, or the tanh approximation
Tensor gelu(const Tensor& a, GeluApprox approx = GeluApprox::none);  // f32, f64
Tensor silu(const Tensor& a);    // f32, f64
Tensor square(const Tensor& a);  // a * a (complex: a * a, not |a|^2)

inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator+(const Tensor& a, double b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, double b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, double b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, double b) { return div(a, b); }
inline Tensor operator+(double a, const Tensor& b) { return add(b, a); }
inline Tensor operator-(double a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(double a, const Tensor& b) { return mul(b, a); }
inline Tensor operator/(double a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }

}  // namespace gs
