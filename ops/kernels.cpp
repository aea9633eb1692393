#include "ops/kernels.h"

namespace gs::kernels {

void check_defined(const Tensor& t, const char* op, const char* what) {
  GS_CHECK(t.defined(), "{}: {} is an undefined tensor", op, what);
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op, "the first input");
  check_defined(b, op, "the second input");
  GS_CHECK(a.dtype() == b.dtype(),
           "{}: expected both inputs to have the same dtype, got {} and {} (convert one with to(dtype))", op,
           dtype_name(a.dtype()), dtype_name(b.dtype()));
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  GS_CHECK(a.device() == b.device(), "{}: expected both inputs on the same device, got {} and {}", op, a.device(),
           b.device());
}

void check_cpu(const Tensor& t, const char* op) {
  GS_CHECK(t.device().is_cpu(), "{}: no kernel for {} tensors in this build (got {})", op, t.device(),
           t.meta_str());
}

Shape expanded_strides(const Tensor& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  int64_t off = static_cast<int64_t>(shape.size()) - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) st[d + off] = t.sizes()[d] == 1 ? 0 : t.strides()[d];
  return st;
}

}  // namespace gs::kernels
