// The forward kernels of ops/elementwise_more.h's ops (ops/elementwise_more_kernels.h).
#include "ops/elementwise_more_kernels.h"

#include "engine/factory.h"
#include "ops/elementwise_launch.h"
#include "ops/kernels.h"

namespace gs::kernels {

Tensor unary_map(const Tensor& a, const char* op, math::UnaryCode code, math::UnaryParam param, bool complex_too) {
  check_defined(a, op);
  if (is_storage_only(a.dtype())) fail_storage_only(op, a.dtype());
  GS_CHECK(is_floating(a.dtype()) || (complex_too && is_complex(a.dtype())), "{}: expected {} tensor, got {}", op,
           complex_too ? "an f32, f64, c64 or c128" : "an f32 or f64", a.meta_str());
  Tensor out = empty(a.sizes(), a.dtype(), a.device());
  if (on_cuda(a)) {
    cuda_unary(code, param, out, a, op);
    return out;
  }
  check_cpu(a, op);
  math::with_unary(code, param, [&](auto f) {
    dispatch_float_complex(a.dtype(), op, [&]<typename T>() {
      if constexpr (std::is_invocable_v<decltype(f), T>) unary_loop<T, T>(out, a, f);
    });
  });
  return out;
}

Tensor binary_map(const Tensor& a, const Tensor& b, const char* op, math::BinaryCode code) {
  check_defined(a, op);
  check_defined(b, op, "other");
  if (is_storage_only(a.dtype())) fail_storage_only(op, a.dtype());
  GS_CHECK(is_floating(a.dtype()), "{}: expected f32 or f64 tensors, got {}", op, a.meta_str());
  check_same_dtype(a, b, op);
  check_same_device(a, b, op);
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), op), a.dtype(), a.device());
  if (on_cuda(a)) {
    cuda_binary(code, out, a, b, op);
    return out;
  }
  check_cpu(a, op);
  math::with_binary(code, [&](auto f) {
    dispatch_float(a.dtype(), op, [&]<typename T>() {
      if constexpr (std::is_invocable_v<decltype(f), T, T>) binary_loop<T, T, T>(out, a, b, f);
    });
  });
  return out;
}

}  // namespace gs::kernels
