#include "ops/kernels.h"

#include "engine/cuda_runtime.h"
#include "engine/strided_index.h"
#include "gradsphere_config.h"
#if GS_HAVE_CUDA
#include "ops/elementwise_cuda.h"
#include "ops/gelu_fused_cuda.h"
#endif

namespace gs::kernels {

void check_defined(const Tensor& t, const char* op, const char* what) {
  GS_CHECK(t.defined(), "{}: {} is an undefined tensor", op, what);
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


void* cuda_stream(const Tensor& t, const char* op) {
  cuda::require_device(t.device(), op);
  return cuda::current_stream(t.device().index).handle;
}

namespace {

// Builds the strided loop of `out` and its operands, runs `launch(loop, stream)`, and reports a
// refused dtype or a failed launch naming the op.
template <int N, typename Launch>
void launch_on_cuda(const char* op, const Tensor& out, std::array<const Tensor*, N - 1> ins, Launch launch) {
#if GS_HAVE_CUDA
  void* stream = cuda_stream(out, op);
  std::array<Shape, N> strides;
  std::array<const Shape*, N> sp;
  strides[0] = out.strides();
  for (int k = 1; k < N; ++k) {
    check_same_device(out, *ins[k - 1], op);
    strides[k] = expanded_strides(*ins[k - 1], out.sizes());
  }
  for (int k = 0; k < N; ++k) sp[k] = &strides[k];
  const bool ok = launch(make_strided_loop<N>(out.sizes(), sp), stream);
  GS_CHECK(ok, "{}: no CUDA kernel for {} operands", op, dtype_name(ins[N - 2]->dtype()));
  cuda::check_launch(op, op);
#else
  fail("{}: {} needs CUDA, and this gradsphere was built without it", op, out.device());
#endif
}

}  // namespace

#if GS_HAVE_CUDA
#define GS_CUDA_CALL(expr) expr
#else
#define GS_CUDA_CALL(expr) false
#endif

void cuda_unary(math::UnaryCode code, double param, const Tensor& out, const Tensor& a, const char* op) {
  launch_on_cuda<2>(op, out, {&a}, [&](const auto& loop, void* stream) {
    return GS_CUDA_CALL(cuda_kernels::unary(code, param, a.dtype(), out.raw_data(), a.raw_data(), loop, stream));
  });
}

void cuda_binary(math::BinaryCode code, const Tensor& out, const Tensor& a, const Tensor& b, const char* op) {
  launch_on_cuda<3>(op, out, {&a, &b}, [&](const auto& loop, void* stream) {
    return GS_CUDA_CALL(
        cuda_kernels::binary(code, a.dtype(), out.raw_data(), a.raw_data(), b.raw_data(), loop, stream));
  });
}

void cuda_compare(math::CompareCode code, const Tensor& out, const Tensor& a, const Tensor& b, const char* op) {
  launch_on_cuda<3>(op, out, {&a, &b}, [&](const auto& loop, void* stream) {
    return GS_CUDA_CALL(
        cuda_kernels::compare(code, a.dtype(), out.raw_data(), a.raw_data(), b.raw_data(), loop, stream));
  });
}

void cuda_isfinite(const Tensor& out, const Tensor& a) {
  launch_on_cuda<2>("isfinite", out, {&a}, [&](const auto& loop, void* stream) {
    return GS_CUDA_CALL(cuda_kernels::isfinite(a.dtype(), out.raw_data(), a.raw_data(), loop, stream));
  });
}

void cuda_complex_abs(const Tensor& out, const Tensor& a) {
  launch_on_cuda<2>("abs", out, {&a}, [&](const auto& loop, void* stream) {
    return GS_CUDA_CALL(cuda_kernels::complex_abs(a.dtype(), out.raw_data(), a.raw_data(), loop, stream));
  });
}

void cuda_make_complex(const Tensor& out, const Tensor& re, const Tensor& im) {
  launch_on_cuda<3>("complex", out, {&re, &im}, [&](const auto& loop, void* stream) {
    return GS_CUDA_CALL(
        cuda_kernels::make_complex(re.dtype(), out.raw_data(), re.raw_data(), im.raw_data(), loop, stream));
  });
}

void cuda_where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b) {
  launch_on_cuda<4>("where", out, {&cond, &a, &b}, [&](const auto& loop, void* stream) {
    return GS_CUDA_CALL(cuda_kernels::where(a.dtype(), out.raw_data(), cond.raw_data(), a.raw_data(), b.raw_data(),
                                            loop, stream));
  });
}

Shape expanded_strides(const Tensor& t, const Shape& shape) {
  Shape st(shape.size(), 0);
  int64_t off = static_cast<int64_t>(shape.size()) - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) st[d + off] = t.sizes()[d] == 1 ? 0 : t.strides()[d];
  return st;
}

void cuda_gelu_bias_forward(const Tensor& out, const Tensor& x, const Tensor& b) {
  launch_on_cuda<3>("gelu_fused", out, {&x, &b}, [&](const auto& loop, void* stream) {
    return GS_CUDA_CALL(
        cuda_kernels::gelu_bias_forward(x.dtype(), out.raw_data(), x.raw_data(), b.raw_data(), loop, stream));
  });
}

void cuda_gelu_bias_backward(const Tensor& out, const Tensor& x, const Tensor& b, const Tensor& g) {
  launch_on_cuda<4>("gelu_fused backward", out, {&x, &b, &g}, [&](const auto& loop, void* stream) {
    return GS_CUDA_CALL(cuda_kernels::gelu_bias_backward(x.dtype(), out.raw_data(), x.raw_data(), b.raw_data(),
                                                         g.raw_data(), loop, stream));
  });
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
