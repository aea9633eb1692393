#include "ops/kernels.h"

#include "engine/cuda_runtime.h"
#include "engine/strided_index.h"

namespace gs::kernels {

void check_defined(const Tensor& t, const char* op, const char* what) {
  GS_CHECK(t.defined(), "{}: {} is an undefined tensor", op, what);
}

void check_no_self_overlap(const Tensor& self, const char* op) {
  for (int64_t d = 0; d < self.dim(); ++d)
    GS_CHECK(self.sizes()[d] <= 1 || self.strides()[d] != 0,
             "{}: cannot write in place to {} with strides {}: several of its elements share one memory location "
             "(an expanded view, dim {} has stride 0). clone() it first.",
             op, self.meta_str(), shape_str(self.strides()), d);
}

DType check_mixed_storage_pair(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op, "the first input");
  check_defined(b, op, "the second input");
  if (!is_storage_only(a.dtype()) && !is_storage_only(b.dtype())) {
    check_same_dtype(a, b, op);
    return a.dtype();
  }
  GS_CHECK(compute_dtype(a.dtype()) == DType::f32 && compute_dtype(b.dtype()) == DType::f32,
           "{}: a bf16 operand pairs with f32 or bf16 (read as f32, accumulated and returned in f32), got {} and {}",
           op, dtype_name(a.dtype()), dtype_name(b.dtype()));
  return DType::f32;
}

Tensor widen_storage(const Tensor& t) {
  return is_storage_only(t.dtype()) ? cast_copy(t, compute_dtype(t.dtype())) : t;
}

void check_float_complex(const Tensor& t, const char* op) {
  dispatch_float_complex(t.dtype(), op, []<typename T>() {});
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
  GS_CHECK(t.device().is_cpu(), "{}: has no kernel for {} tensors yet (got {}); copy the input to the CPU with to()",
           op, t.device().type == DeviceType::cuda ? "CUDA" : "device", t.meta_str());
}

bool on_cuda(const Tensor& t) { return t.defined() && t.device().type == DeviceType::cuda; }


// Without CUDA, require_device throws (naming op and why), so no launcher call is ever reached.
void* cuda_stream(const Tensor& t, const char* op) {
  cuda::require_device(t.device(), op);
  return cuda::current_stream(t.device().index).handle;
}

void check_cuda_launch(const char* kernel, const char* op) { cuda::check_launch(kernel, op); }

Shape expanded_strides(const Tensor& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  int64_t off = static_cast<int64_t>(shape.size()) - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) st[d + off] = t.sizes()[d] == 1 ? 0 : t.strides()[d];
  return st;
}

}  // namespace gs::kernels

namespace gs {
namespace {
thread_local bool composite_on_cpu = false;
}  // namespace

bool composite_path(const Tensor& t) { return kernels::on_cuda(t) || (composite_on_cpu && t.defined()); }
CompositePathsOnCpu::CompositePathsOnCpu() : prev_(composite_on_cpu) { composite_on_cpu = true; }
CompositePathsOnCpu::~CompositePathsOnCpu() { composite_on_cpu = prev_; }

}  // namespace gs
