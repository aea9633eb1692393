// The CUDA twins of the elementwise loops of ops/kernels.h, on the map kernels of ops/cuda_map.cuh.
// The arithmetic is the CPU's: the functors of ops/elementwise_math.h.
#include <type_traits>

#include "ops/cuda_map.cuh"
#include "ops/elementwise_cuda.h"

namespace gs::cuda_kernels {
namespace {

template <typename T>
__global__ void where_kernel(T* out, const bool* cond, const T* a, const T* b, StridedLoop<4> loop) {
  GS_GRID_STRIDE(i, loop.numel) {
    int64_t off[4];
    loop.offsets(i, off);
    out[off[0]] = cond[off[1]] ? a[off[2]] : b[off[3]];
  }
}

}  // namespace

bool unary(math::UnaryCode code, math::UnaryParam param, DType dtype, void* out, const void* a, const StridedLoop<2>& loop,
           void* stream) {
  bool ok = false;
  with_dtype(dtype, [&](auto tag) {
    using T = device_t<decltype(tag)::value>;
    math::with_unary(code, param, [&](auto f) { ok = launch1<T, T>(out, a, loop, stream, f); });
  });
  return ok;
}

bool binary(math::BinaryCode code, DType dtype, void* out, const void* a, const void* b, const StridedLoop<3>& loop,
            void* stream) {
  bool ok = false;
  with_dtype(dtype, [&](auto tag) {
    using T = device_t<decltype(tag)::value>;
    math::with_binary(code, [&](auto f) { ok = launch2<T, T, T>(out, a, b, loop, stream, f); });
  });
  return ok;
}

bool compare(math::CompareCode code, DType dtype, void* out, const void* a, const void* b, const StridedLoop<3>& loop,
             void* stream) {
  bool ok = false;
  with_dtype(dtype, [&](auto tag) {
    using T = device_t<decltype(tag)::value>;
    math::with_compare(code, [&](auto f) { ok = launch2<bool, T, T>(out, a, b, loop, stream, f); });
  });
  return ok;
}

bool isfinite(DType dtype, void* out, const void* a, const StridedLoop<2>& loop, void* stream) {
  bool ok = false;
  with_dtype(dtype, [&](auto tag) {
    using T = device_t<decltype(tag)::value>;
    ok = launch1<bool, T>(out, a, loop, stream, math::IsFinite{});
  });
  return ok;
}

bool complex_abs(DType complex_dtype, void* out, const void* a, const StridedLoop<2>& loop, void* stream) {
  if (complex_dtype == DType::c64) return launch1<float, device_t<DType::c64>>(out, a, loop, stream, math::ComplexAbs{});
  if (complex_dtype == DType::c128)
    return launch1<double, device_t<DType::c128>>(out, a, loop, stream, math::ComplexAbs{});
  return false;
}

bool make_complex(DType real_dtype, void* out, const void* re, const void* im, const StridedLoop<3>& loop,
                  void* stream) {
  if (real_dtype == DType::f32)
    return launch2<device_t<DType::c64>, float, float>(out, re, im, loop, stream, math::MakeComplex<device_t<DType::c64>>{});
  if (real_dtype == DType::f64)
    return launch2<device_t<DType::c128>, double, double>(out, re, im, loop, stream,
                                                           math::MakeComplex<device_t<DType::c128>>{});
  return false;
}

bool where(DType dtype, void* out, const void* cond, const void* a, const void* b, const StridedLoop<4>& loop,
           void* stream) {
  with_dtype(dtype, [&](auto tag) {
    using T = device_t<decltype(tag)::value>;
    if (loop.numel > 0)
      where_kernel<T><<<blocks_for(loop.numel), kThreads, 0, as_stream(stream)>>>(
          static_cast<T*>(out), static_cast<const bool*>(cond), static_cast<const T*>(a), static_cast<const T*>(b),
          loop);
  });
  return true;
}

}  // namespace gs::cuda_kernels
