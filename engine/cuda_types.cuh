// Device-side element types and the grid-stride launch shape shared by the .cu files: DType ->
// C++ type (complex as cuda::std::complex, the layout of std::complex) and conversions between them.
#pragma once
#include <cuda/std/complex>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "engine/bf16.h"
#include "engine/dtype_code.h"

namespace gs::cuda_kernels {

template <DType D> struct device_type;
template <> struct device_type<DType::f32> { using type = float; };
template <> struct device_type<DType::f64> { using type = double; };
template <> struct device_type<DType::c64> { using type = cuda::std::complex<float>; };
template <> struct device_type<DType::c128> { using type = cuda::std::complex<double>; };
template <> struct device_type<DType::i64> { using type = int64_t; };
template <> struct device_type<DType::b8> { using type = bool; };
template <> struct device_type<DType::bf16> { using type = gs::bfloat16; };  // storage only: copies and fills
template <DType D> using device_t = typename device_type<D>::type;

template <typename T> struct is_device_complex : std::false_type {};
template <typename R> struct is_device_complex<cuda::std::complex<R>> : std::true_type {};

// As the CPU's copy: complex -> real keeps the real part, real -> complex has imaginary part 0.
template <typename To, typename From>
__device__ inline To convert(From v) {
  if constexpr (is_device_complex<From>::value && !is_device_complex<To>::value) {
    return static_cast<To>(v.real());
  } else if constexpr (is_device_complex<To>::value && !is_device_complex<From>::value) {
    return To(static_cast<typename To::value_type>(v));
  } else if constexpr (is_device_complex<To>::value) {
    return To(static_cast<typename To::value_type>(v.real()), static_cast<typename To::value_type>(v.imag()));
  } else {
    return static_cast<To>(v);
  }
}

// Calls f(tag) with std::integral_constant<DType, d> for a runtime d.
template <typename F>
void with_dtype(DType d, F&& f) {
  switch (d) {
    case DType::f32: f(std::integral_constant<DType, DType::f32>{}); return;
    case DType::f64: f(std::integral_constant<DType, DType::f64>{}); return;
    case DType::c64: f(std::integral_constant<DType, DType::c64>{}); return;
    case DType::c128: f(std::integral_constant<DType, DType::c128>{}); return;
    case DType::i64: f(std::integral_constant<DType, DType::i64>{}); return;
    case DType::b8: f(std::integral_constant<DType, DType::b8>{}); return;
    // The host refuses bf16 before any arithmetic kernel (dispatch_all); reaching here is a bug.
    case DType::bf16: throw std::logic_error("gradsphere: a CUDA arithmetic kernel was given bf16 storage");
  }
}

// with_dtype and bf16: for the kernels that only move or convert values (copy, fill).
template <typename F>
void with_storage_dtype(DType d, F&& f) {
  if (d == DType::bf16) return f(std::integral_constant<DType, DType::bf16>{});
  with_dtype(d, std::forward<F>(f));
}

// One thread per element, grid-stride: a grid of at most kMaxBlocks blocks covers any n.
inline constexpr int kThreads = 256;
inline constexpr int64_t kMaxBlocks = 65536;
inline unsigned blocks_for(int64_t n) {
  int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

#define GS_GRID_STRIDE(i, n)                                                                      \
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);         \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)

}  // namespace gs::cuda_kernels
