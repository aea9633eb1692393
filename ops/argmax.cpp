// argmax / argmin: i64 indices along one dim or into the flattened tensor, not differentiable.
// One line rule (ops/reduce_math.h, ArgExtremum: torch's ties and NaNs) for the CPU loop and the
// CUDA kernel (ops/reduce_more_cuda.cu).
#include "ops/kernels.h"
#include "ops/line_loop.h"
#include "ops/reduce_math.h"
#include "ops/reduce_more.h"
#include "ops/reduce_more_cuda.h"

namespace gs {
namespace {

template <bool kMax>
Tensor arg_extremum(const Tensor& t, int64_t dim, bool keepdim, const char* op) {
  kernels::check_defined(t, op);
  if (is_storage_only(t.dtype())) fail_storage_only(op, t.dtype());
  GS_CHECK(is_floating(t.dtype()), "{}: expected an f32 or f64 tensor, got {}", op, t.meta_str());
  const bool all = dim == kAllDims;
  const int64_t d = all ? 0 : wrap_dim(dim, t.dim(), op);
  // The contiguous input seen as (outer, n, inner), the index running along n.
  const Tensor x = contiguous_copy(t);
  const kernels::LineShape s = all ? kernels::LineShape{1, t.numel(), 1} : kernels::lines_along(t.sizes(), d);
  Shape out_sizes;
  for (int64_t k = 0; k < t.dim(); ++k) {
    if (!all && k != d) out_sizes.push_back(t.size(k));
    else if (keepdim) out_sizes.push_back(1);
  }
  GS_CHECK(s.n > 0, "{}: cannot take the index of the {} of zero elements (input {} {})", op, kMax ? "maximum" : "minimum",
           shape_str(t.sizes()), all ? "flattened" : fmt::format("along dim {}", dim));
  Tensor out = empty(out_sizes, DType::i64, t.device());
  if (kernels::on_cuda(t)) {
    kernels::launch_cuda(op, "arg_extremum", t, [&](void* stream) {
      return GS_CUDA_CALL(cuda_kernels::arg_extremum(kMax, t.dtype(), out.device_data<int64_t>(), x.raw_data(), s.outer,
                                                     s.n, s.inner, stream));
    });
    return out;
  }
  kernels::check_cpu(t, op);
  dispatch_float(t.dtype(), op, [&]<typename T>() {
    const T* px = x.data<T>();
    int64_t* po = out.data<int64_t>();
    const math::ArgExtremum<kMax> arg;
    kernels::for_each_line(s, [&](int64_t l, int64_t base) { po[l] = arg.line(px + base, s.n, s.inner); });
  });
  return out;
}

}  // namespace

Tensor argmax(const Tensor& t, int64_t dim, bool keepdim) { return arg_extremum<true>(t, dim, keepdim, "argmax"); }
Tensor argmin(const Tensor& t, int64_t dim, bool keepdim) { return arg_extremum<false>(t, dim, keepdim, "argmin"); }

}  // namespace gs
