// Element types and their properties, plus dispatch from a runtime DType to a C++ type.
#pragma once
#include <complex>
#include <cstdint>
#include <string_view>

#include "engine/bf16.h"
#include "engine/dtype_code.h"
#include "engine/error.h"

namespace gs {

using c64 = std::complex<float>;
using c128 = std::complex<double>;

constexpr std::string_view dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::c64: return "c64";
    case DType::c128: return "c128";
    case DType::i64: return "i64";
    case DType::b8: return "bool";
    case DType::bf16: return "bf16";
  }
  return "?";
}

constexpr size_t dtype_size(DType d) {
  switch (d) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::c64: return 8;
    case DType::c128: return 16;
    case DType::i64: return 8;
    case DType::b8: return 1;
    case DType::bf16: return 2;
  }
  return 0;
}

constexpr bool is_complex(DType d) { return d == DType::c64 || d == DType::c128; }
constexpr bool is_floating(DType d) { return d == DType::f32 || d == DType::f64; }
// Floating or complex: the dtypes that ops compute in and that parameters and leaves may have.
constexpr bool is_differentiable(DType d) { return is_floating(d) || is_complex(d); }

// bf16 holds values but no op computes in it: casts, copies, views, joins, I/O and communication
// move it; matmul, linear, conv1x1 and gelu_fused read it as f32 (exact) and return f32. Every
// other op refuses it with dispatch_all's message, so nothing is silently computed at 8 bits.
constexpr bool is_storage_only(DType d) { return d == DType::bf16; }
// The dtype the arithmetic on a tensor of dtype d runs in: f32 for bf16, d itself otherwise.
constexpr DType compute_dtype(DType d) { return d == DType::bf16 ? DType::f32 : d; }
// Gradients flow through the differentiable dtypes and through bf16 storage. A bf16 tensor's
// gradient is f32 (compute_dtype): the tape never rounds a gradient to 8 bits.
constexpr bool carries_gradient(DType d) { return is_differentiable(d) || is_storage_only(d); }
constexpr DType gradient_dtype(DType d) { return compute_dtype(d); }

// c64 -> f32, c128 -> f64, others unchanged.
constexpr DType real_dtype(DType d) {
  return d == DType::c64 ? DType::f32 : d == DType::c128 ? DType::f64 : d;
}
// f32 -> c64, f64 -> c128.
constexpr DType complex_dtype(DType d) {
  return d == DType::f32 ? DType::c64 : d == DType::f64 ? DType::c128 : d;
}

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<c64> { static constexpr DType value = DType::c64; };
template <> struct dtype_of<c128> { static constexpr DType value = DType::c128; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::b8; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::bf16; };

template <typename T> struct real_of { using type = T; };
template <typename T> struct real_of<std::complex<T>> { using type = T; };
template <typename T> using real_t = typename real_of<T>::type;

template <typename T> inline constexpr bool is_complex_v = false;
template <typename T> inline constexpr bool is_complex_v<std::complex<T>> = true;

[[noreturn]] inline void fail_storage_only(std::string_view op, DType d) {
  fail("{}: {} is a storage dtype (casts, copies, views, I/O and communication, and the f32-accumulating "
       "matmul, linear, conv1x1 and gelu_fused); cast it to f32 first (to(t, DType::f32))",
       op, dtype_name(d));
}

// dispatch(dtype, "op", [&]<typename T>() { ... }) calls the lambda with T = the C++ element type.
// dispatch_all covers every dtype an op computes in; bf16 is refused (fail_storage_only).
template <typename F>
decltype(auto) dispatch_all(DType d, std::string_view op, F&& f) {
  switch (d) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    case DType::c64: return f.template operator()<c64>();
    case DType::c128: return f.template operator()<c128>();
    case DType::i64: return f.template operator()<int64_t>();
    case DType::b8: return f.template operator()<bool>();
    case DType::bf16: fail_storage_only(op, d);
  }
  fail("{}: unknown dtype", op);
}

// Every dtype, bf16 (T = bfloat16) included: for code that only moves or converts values.
template <typename F>
decltype(auto) dispatch_storage(DType d, std::string_view op, F&& f) {
  if (d == DType::bf16) return f.template operator()<bfloat16>();
  return dispatch_all(d, op, std::forward<F>(f));
}

// Floating and complex dtypes only (the differentiable ones).
template <typename F>
decltype(auto) dispatch_float_complex(DType d, std::string_view op, F&& f) {
  switch (d) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    case DType::c64: return f.template operator()<c64>();
    case DType::c128: return f.template operator()<c128>();
    default:
      if (is_storage_only(d)) fail_storage_only(op, d);
      fail("{}: expected a floating or complex dtype (f32, f64, c64, c128), got {}", op, dtype_name(d));
  }
}

// Real floating dtypes only.
template <typename F>
decltype(auto) dispatch_float(DType d, std::string_view op, F&& f) {
  switch (d) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    default:
      if (is_storage_only(d)) fail_storage_only(op, d);
      fail("{}: expected a real floating dtype (f32 or f64), got {}", op, dtype_name(d));
  }
}

// Real numeric dtypes (floating and i64), for ordering ops.
template <typename F>
decltype(auto) dispatch_real(DType d, std::string_view op, F&& f) {
  switch (d) {
    case DType::f32: return f.template operator()<float>();
    case DType::f64: return f.template operator()<double>();
    case DType::i64: return f.template operator()<int64_t>();
    default:
      if (is_storage_only(d)) fail_storage_only(op, d);
      fail("{}: expected a real dtype (f32, f64 or i64), got {}", op, dtype_name(d));
  }
}

}  // namespace gs

template <>
struct fmt::formatter<gs::DType> : fmt::formatter<std::string_view> {
  auto format(gs::DType d, format_context& ctx) const {
    return fmt::formatter<std::string_view>::format(gs::dtype_name(d), ctx);
  }
};
