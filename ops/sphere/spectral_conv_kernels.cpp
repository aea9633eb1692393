// The spectral contractions' `kernels` form (spectral_conv_kernels.h): CUDA launches, or the same
// per-value arithmetic in CPU loops.
#include "ops/sphere/spectral_conv_kernels.h"

#include <omp.h>

#include "engine/factory.h"
#include "ops/kernels.h"
#include "ops/sphere/spectral_conv_cuda.h"
#include "ops/sphere/spectral_conv_math.h"
#include "ops/view.h"

namespace gs::sphere::detail {
namespace {

[[maybe_unused]] cuda_kernels::SpectralDims cuda_dims(const spectral::Dims& d) { return {d.B, d.I, d.O, d.L, d.M}; }

}  // namespace

Tensor spectral_apply_kernels(const Tensor& x, const Tensor& w, SpectralOperator op, bool adjoint) {
  const bool dh = op == SpectralOperator::driscoll_healy;
  const spectral::Dims d{x.size(0), w.size(0), w.size(1), x.size(2), x.size(3)};
  Tensor y = empty({d.B, adjoint ? d.I : d.O, d.L, d.M}, x.dtype(), x.device());
  if (y.numel() == 0) return y;
  const Tensor xc = contiguous_copy(x), wc = contiguous_copy(w);
  const char* name = "spectral_apply_kernels";
  if (kernels::on_cuda(x)) {
    kernels::launch_cuda(name, "spectral_apply", x, [&](void* stream) {
      return GS_CUDA_CALL(cuda_kernels::spectral_apply(real_dtype(x.dtype()), dh, adjoint, xc.raw_data(), wc.raw_data(),
                                                       y.raw_data(), cuda_dims(d), stream));
    });
    return y;
  }
  kernels::check_cpu(x, name);
  dispatch_float(real_dtype(x.dtype()), name, [&]<typename R>() {
    const R *px = static_cast<const R*>(xc.raw_data()), *pw = static_cast<const R*>(wc.raw_data());
    R* py = static_cast<R*>(y.raw_data());
    const int64_t n = y.numel();
#pragma omp parallel for schedule(static) if (n > 4096)
    for (int64_t i = 0; i < n; ++i) spectral::apply_at(px, pw, py, d, dh, adjoint, i);
  });
  return y;
}

Tensor spectral_weight_grad_kernels(const Tensor& x, const Tensor& g, SpectralOperator op) {
  const bool dh = op == SpectralOperator::driscoll_healy;
  const spectral::Dims d{x.size(0), x.size(1), g.size(1), x.size(2), x.size(3)};
  Tensor gw = empty(dh ? Shape{d.I, d.O, d.L} : Shape{d.I, d.O, d.L, d.M}, x.dtype(), x.device());
  if (gw.numel() == 0) return gw;
  const Tensor xc = contiguous_copy(x), gc = contiguous_copy(g);
  const char* name = "spectral_weight_grad_kernels";
  if (kernels::on_cuda(x)) {
    kernels::launch_cuda(name, "spectral_weight_grad", x, [&](void* stream) {
      return GS_CUDA_CALL(cuda_kernels::spectral_weight_grad(real_dtype(x.dtype()), dh, xc.raw_data(), gc.raw_data(),
                                                             gw.raw_data(), cuda_dims(d), stream));
    });
    return gw;
  }
  kernels::check_cpu(x, name);
  dispatch_float(real_dtype(x.dtype()), name, [&]<typename R>() {
    const R *px = static_cast<const R*>(xc.raw_data()), *pg = static_cast<const R*>(gc.raw_data());
    R* pw = static_cast<R*>(gw.raw_data());
    const int64_t n = gw.numel();
#pragma omp parallel for schedule(static) if (n > 1024)
    for (int64_t k = 0; k < n; ++k) spectral::weight_grad_at(px, pg, pw, d, dh, k);
  });
  return gw;
}

}  // namespace gs::sphere::detail
