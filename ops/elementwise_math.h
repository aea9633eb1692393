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
  neg, exp, log, sqrt, rsqrt, abs, sign, tanh, sigmoid, relu, erf, gelu, gelu_tanh, silu, pow_scalar, conj, logical_not
};
enum class BinaryCode : uint8_t { add, sub, mul, div, pow, logical_and };

// Calls f(functor) with the functor of `code` (param: pow_scalar's exponent). Host code: the
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
auto with_unary(UnaryCode code, double param, F&& f) {
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
    case UnaryCode::pow_scalar: return with_pow_scalar(param, f);
    case UnaryCode::conj: return f(Conj{});
    case UnaryCode::logical_not: return f(LogicalNot{});
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
  }
  return f(Add{});
}

}  // namespace gs::math
