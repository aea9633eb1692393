// The arithmetic of the elementwise ops, once, for the CPU loops (ops/kernels.h) and the CUDA
// kernels (ops/elementwise_cuda.cu) alike: every functor is __host__ __device__, so the CPU suites
// test the very expressions the GPU runs. Complex values are std::complex on the host and
// cuda::std::complex on the device (the same layout); the math calls are unqualified after a
// `using std::f`, so argument-dependent lookup picks cuda::std's complex overloads on the device.
//
// Adding an op: a functor here, an entry in the op's list below (GS_UNARY_OPS / GS_BINARY_OPS),
// and the op's .cpp calls it by its code; the CUDA build instantiates every entry.
#pragma once
#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <type_traits>

#if defined(__CUDACC__)
#define GS_HD __host__ __device__
#else
#define GS_HD
#endif

namespace gs::math {

template <typename T>
inline constexpr bool is_real_v = std::is_floating_point_v<T>;

struct Neg {
  template <typename T> GS_HD T operator()(T x) const { return -x; }
};
struct Exp {
  template <typename T> GS_HD T operator()(T x) const { using std::exp; return exp(x); }
};
struct Log {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::log(x); }
};
struct Sqrt {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::sqrt(x); }
};
struct Rsqrt {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return T(1) / std::sqrt(x); }
};
struct Abs {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::abs(x); }
};
struct Sign {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> {
    return static_cast<T>((x > 0) - (x < 0));
  }
};
struct Tanh {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::tanh(x); }
};
struct Sigmoid {  // stable on both tails
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> {
    return x >= 0 ? T(1) / (T(1) + std::exp(-x)) : std::exp(x) / (T(1) + std::exp(x));
  }
};
// NaN stays NaN (x > 0 is false for it), as torch's relu.
struct Relu {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return x > 0 || x != x ? x : T(0); }
};
struct Erf {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::erf(x); }
};
inline constexpr double kSqrt2 = 1.4142135623730950488;
inline constexpr double kGeluTanhK = 0.7978845608028654;  // sqrt(2/pi)
inline constexpr double kGeluTanhC = 0.044715;
struct Gelu {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> {
    return T(0.5) * x * (T(1) + std::erf(x / T(kSqrt2)));
  }
};
struct GeluTanh {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> {
    return T(0.5) * x * (T(1) + std::tanh(T(kGeluTanhK) * (x + T(kGeluTanhC) * x * x * x)));
  }
};
struct Silu {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> {
    return x >= 0 ? x / (T(1) + std::exp(-x)) : x * std::exp(x) / (T(1) + std::exp(x));
  }
};
// x^e for a scalar e. with_unary picks torch's special exponents (its pow_tensor_scalar kernel)
// once per call, not per element: they give the same numbers as pow except at signed zeros and
// -inf (sqrt(-0) = -0, sqrt(-inf) = NaN, 1/sqrt(-0) = -inf).
struct PowScalar {
  double e;
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::pow(x, static_cast<T>(e)); }
};
struct Square {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return x * x; }
};
struct Cube {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return x * x * x; }
};
struct Reciprocal {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return T(1) / x; }
};
struct InvSquare {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return T(1) / (x * x); }
};

struct Add {
  template <typename T> GS_HD T operator()(T x, T y) const { return x + y; }
};
struct Sub {
  template <typename T> GS_HD T operator()(T x, T y) const { return x - y; }
};
struct Mul {
  template <typename T> GS_HD T operator()(T x, T y) const { return x * y; }
};
struct Div {
  template <typename T> GS_HD T operator()(T x, T y) const { return x / y; }
};
struct Pow {
  template <typename T> GS_HD T operator()(T x, T y) const requires is_real_v<T> { return std::pow(x, y); }
};

// ---- the ops of ops/elementwise_more.h: trigonometric, hyperbolic, exp/log variants, rounding,
// activations with scalar parameters, clamp, maximum / minimum. Each mirrors torch's CPU kernel.
template <typename T>
inline constexpr bool is_float_or_complex_v = is_real_v<T> || !std::is_arithmetic_v<T>;

struct Sin {
  template <typename T> GS_HD T operator()(T x) const requires is_float_or_complex_v<T> { using std::sin; return sin(x); }
};
struct Cos {
  template <typename T> GS_HD T operator()(T x) const requires is_float_or_complex_v<T> { using std::cos; return cos(x); }
};
struct Tan {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::tan(x); }
};
struct Asin {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::asin(x); }
};
struct Acos {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::acos(x); }
};
struct Atan {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::atan(x); }
};
struct Sinh {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::sinh(x); }
};
struct Cosh {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::cosh(x); }
};
struct Asinh {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::asinh(x); }
};
struct Acosh {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::acosh(x); }
};
struct Atanh {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::atanh(x); }
};
struct Log1p {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::log1p(x); }
};
struct Expm1 {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::expm1(x); }
};
struct Log2 {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::log2(x); }
};
struct Log10 {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::log10(x); }
};
struct Exp2 {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::exp2(x); }
};
struct Floor {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::floor(x); }
};
struct Ceil {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::ceil(x); }
};
// Half to even, as torch.round: nearbyint in the default rounding mode (std::round goes away from 0).
struct Round {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::nearbyint(x); }
};
struct Trunc {
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return std::trunc(x); }
};
// torch.nn.functional.softplus: linear above the threshold (on x * beta), else log1p(exp(x beta)) / beta.
struct Softplus {
  double beta, threshold;
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> {
    const T xb = x * static_cast<T>(beta);
    return xb > static_cast<T>(threshold) ? x : std::log1p(std::exp(xb)) / static_cast<T>(beta);
  }
};
// ELU as torch's kernel: x <= 0 takes the exponential branch, so NaN takes the linear one.
struct Elu {
  double alpha;
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> {
    return x <= T(0) ? std::expm1(x) * static_cast<T>(alpha) : x;
  }
};
struct LeakyRelu {
  double slope;
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> { return x > T(0) ? x : x * static_cast<T>(slope); }
};
// min(max(x, lo), hi) with std's comparisons, as torch: NaN x stays NaN, a NaN bound gives NaN,
// lo > hi gives hi. An absent bound is an infinity.
struct ClampScalar {
  double lo, hi;
  template <typename T> GS_HD T operator()(T x) const requires is_real_v<T> {
    if (lo != lo || hi != hi) return std::numeric_limits<T>::quiet_NaN();
    const T m = x < static_cast<T>(lo) ? static_cast<T>(lo) : x;
    return static_cast<T>(hi) < m ? static_cast<T>(hi) : m;
  }
};
struct Atan2 {
  template <typename T> GS_HD T operator()(T y, T x) const requires is_real_v<T> { return std::atan2(y, x); }
};
// torch.maximum / minimum: NaN if either operand is NaN, else std::max / std::min (the first on ties).
struct Maximum {
  template <typename T> GS_HD T operator()(T x, T y) const requires is_real_v<T> {
    if (x != x || y != y) return std::numeric_limits<T>::quiet_NaN();
    return x < y ? y : x;
  }
};
struct Minimum {
  template <typename T> GS_HD T operator()(T x, T y) const requires is_real_v<T> {
    if (x != x || y != y) return std::numeric_limits<T>::quiet_NaN();
    return y < x ? y : x;
  }
};

struct Conj {
  template <typename T> GS_HD T operator()(T z) const requires(!std::is_arithmetic_v<T>) { using std::conj; return conj(z); }
};
struct LogicalNot {
  GS_HD bool operator()(bool v) const { return !v; }
};
struct LogicalAnd {
  GS_HD bool operator()(bool x, bool y) const { return x && y; }
};
// |z| of a complex z, a real number.
struct ComplexAbs {
  template <typename T> GS_HD auto operator()(T z) const requires(!std::is_arithmetic_v<T>) { using std::abs; return abs(z); }
};
struct IsFinite {
  template <typename T> GS_HD bool operator()(T v) const {
    if constexpr (std::is_floating_point_v<T>) return std::isfinite(v);
    else if constexpr (std::is_integral_v<T>) return true;
    else return std::isfinite(v.real()) && std::isfinite(v.imag());
  }
};
// complex(re, im) as a value of type C.
template <typename C>
struct MakeComplex {
  template <typename R> GS_HD C operator()(R re, R im) const { return C(re, im); }
};

// Comparisons give bool. Complex and bool operands only have eq and ne (checked by the op).
struct Eq { template <typename T> GS_HD bool operator()(T x, T y) const { return x == y; } };
struct Ne { template <typename T> GS_HD bool operator()(T x, T y) const { return x != y; } };
struct Lt { template <typename T> GS_HD bool operator()(T x, T y) const requires std::is_arithmetic_v<T> { return x < y; } };
struct Le { template <typename T> GS_HD bool operator()(T x, T y) const requires std::is_arithmetic_v<T> { return x <= y; } };
struct Gt { template <typename T> GS_HD bool operator()(T x, T y) const requires std::is_arithmetic_v<T> { return x > y; } };
struct Ge { template <typename T> GS_HD bool operator()(T x, T y) const requires std::is_arithmetic_v<T> { return x >= y; } };

enum class CompareCode : uint8_t { eq, ne, lt, le, gt, ge };

template <typename F>
auto with_compare(CompareCode code, F&& f) {
  switch (code) {
    case CompareCode::eq: return f(Eq{});
    case CompareCode::ne: return f(Ne{});
    case CompareCode::lt: return f(Lt{});
    case CompareCode::le: return f(Le{});
    case CompareCode::gt: return f(Gt{});
    case CompareCode::ge: return f(Ge{});
  }
  return f(Eq{});
}

// The codes by which an op's .cpp names its functor to a device launcher. `complex` says whether
// the op also takes complex operands.
enum class UnaryCode : uint8_t {
  neg, exp, log, sqrt, rsqrt, abs, sign, tanh, sigmoid, relu, erf, gelu, gelu_tanh, silu, pow_scalar, conj, logical_not,
  sin, cos, tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh, log1p, expm1, log2, log10, exp2,
  floor, ceil, round, trunc, softplus, elu, leaky_relu, clamp
};
enum class BinaryCode : uint8_t { add, sub, mul, div, pow, logical_and, atan2, maximum, minimum };

// The scalar parameters of a unary functor, (a, b): pow_scalar's exponent (a), softplus's beta and
// threshold, elu's alpha (a), leaky_relu's slope (a), clamp's bounds (lo, hi). One double converts,
// so the one-parameter callers pass it as it is.
struct UnaryParam {
  double a = 0, b = 0;
  constexpr UnaryParam(double first = 0, double second = 0) : a(first), b(second) {}
};

// Calls f(functor) with the functor of `code` (param: UnaryParam above). Host code: the
// CUDA launchers use it to pick the kernel to instantiate.
template <typename F>
auto with_pow_scalar(double e, F&& f) {
  if (e == 2.0) return f(Square{});
  if (e == 3.0) return f(Cube{});
  if (e == 0.5) return f(Sqrt{});
  if (e == -0.5) return f(Rsqrt{});
  if (e == -1.0) return f(Reciprocal{});
  if (e == -2.0) return f(InvSquare{});
  return f(PowScalar{e});
}

template <typename F>
auto with_unary(UnaryCode code, UnaryParam param, F&& f) {
  switch (code) {
    case UnaryCode::neg: return f(Neg{});
    case UnaryCode::exp: return f(Exp{});
    case UnaryCode::log: return f(Log{});
    case UnaryCode::sqrt: return f(Sqrt{});
    case UnaryCode::rsqrt: return f(Rsqrt{});
    case UnaryCode::abs: return f(Abs{});
    case UnaryCode::sign: return f(Sign{});
    case UnaryCode::tanh: return f(Tanh{});
    case UnaryCode::sigmoid: return f(Sigmoid{});
    case UnaryCode::relu: return f(Relu{});
    case UnaryCode::erf: return f(Erf{});
    case UnaryCode::gelu: return f(Gelu{});
    case UnaryCode::gelu_tanh: return f(GeluTanh{});
    case UnaryCode::silu: return f(Silu{});
    case UnaryCode::pow_scalar: return with_pow_scalar(param.a, f);
    case UnaryCode::conj: return f(Conj{});
    case UnaryCode::logical_not: return f(LogicalNot{});
    case UnaryCode::sin: return f(Sin{});
    case UnaryCode::cos: return f(Cos{});
    case UnaryCode::tan: return f(Tan{});
    case UnaryCode::asin: return f(Asin{});
    case UnaryCode::acos: return f(Acos{});
    case UnaryCode::atan: return f(Atan{});
    case UnaryCode::sinh: return f(Sinh{});
    case UnaryCode::cosh: return f(Cosh{});
    case UnaryCode::asinh: return f(Asinh{});
    case UnaryCode::acosh: return f(Acosh{});
    case UnaryCode::atanh: return f(Atanh{});
    case UnaryCode::log1p: return f(Log1p{});
    case UnaryCode::expm1: return f(Expm1{});
    case UnaryCode::log2: return f(Log2{});
    case UnaryCode::log10: return f(Log10{});
    case UnaryCode::exp2: return f(Exp2{});
    case UnaryCode::floor: return f(Floor{});
    case UnaryCode::ceil: return f(Ceil{});
    case UnaryCode::round: return f(Round{});
    case UnaryCode::trunc: return f(Trunc{});
    case UnaryCode::softplus: return f(Softplus{param.a, param.b});
    case UnaryCode::elu: return f(Elu{param.a});
    case UnaryCode::leaky_relu: return f(LeakyRelu{param.a});
    case UnaryCode::clamp: return f(ClampScalar{param.a, param.b});
  }
  return f(Neg{});
}

template <typename F>
auto with_binary(BinaryCode code, F&& f) {
  switch (code) {
    case BinaryCode::add: return f(Add{});
    case BinaryCode::sub: return f(Sub{});
    case BinaryCode::mul: return f(Mul{});
    case BinaryCode::div: return f(Div{});
    case BinaryCode::pow: return f(Pow{});
    case BinaryCode::logical_and: return f(LogicalAnd{});
    case BinaryCode::atan2: return f(Atan2{});
    case BinaryCode::maximum: return f(Maximum{});
    case BinaryCode::minimum: return f(Minimum{});
  }
  return f(Add{});
}

}  // namespace gs::math
