// The spectral-convolution contractions as batched GEMMs (spectral_conv_gemm.h). Each is one
// matmul per degree (Driscoll-Healy: the batch and orders as rows) or per (degree, order)
// (diagonal), with the operands permuted so the contracted channel is the inner dim.
#include "ops/sphere/spectral_conv_gemm.h"

#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/kernels.h"
#include "ops/linalg.h"
#include "ops/view.h"

namespace gs::sphere::detail {
namespace {

Tensor packed(const Tensor& t, const std::vector<int64_t>& dims, const Shape& sizes) {
  return reshape(contiguous(permute(t, dims)), sizes);
}

}  // namespace

Tensor spectral_apply_gemm(const Tensor& x, const Tensor& w, SpectralOperator op, bool adjoint) {
  forward_ad::PrimalOnlyGuard no_grad;
  const int64_t B = x.size(0), Cx = x.size(1), L = x.size(2), M = x.size(3);
  const int64_t Cy = adjoint ? w.size(0) : w.size(1);
  if (Cx == 0) return zeros({B, Cy, L, M}, x.dtype(), x.device());
  Tensor y;  // (L, ..., Cy) per degree (and order)
  if (op == SpectralOperator::driscoll_healy) {
    // y_l (B*M, Cy) = x_l (B*M, Cx) @ w_l (Cx, Cy), w_l = w[:, :, l] or conj(w[:, :, l])^T.
    const Tensor xl = packed(x, {2, 0, 3, 1}, {L, B * M, Cx});
    const Tensor wl = adjoint ? conj(permute(w, {2, 1, 0})) : permute(w, {2, 0, 1});
    y = permute(reshape(matmul(xl, wl), {L, B, M, Cy}), {1, 3, 0, 2});
  } else {
    // y_lm (B, Cy) = x_lm (B, Cx) @ w_lm (Cx, Cy).
    const Tensor xlm = permute(x, {2, 3, 0, 1});
    const Tensor wlm = adjoint ? conj(permute(w, {2, 3, 1, 0})) : permute(w, {2, 3, 0, 1});
    y = permute(matmul(xlm, wlm), {2, 3, 0, 1});
  }
  return kernels::own_result(contiguous_copy(y, true));
}

Tensor spectral_weight_grad_gemm(const Tensor& x, const Tensor& g, SpectralOperator op) {
  forward_ad::PrimalOnlyGuard no_grad;
  const int64_t B = x.size(0), I = x.size(1), O = g.size(1), L = x.size(2), M = x.size(3);
  const bool dh = op == SpectralOperator::driscoll_healy;
  if (B == 0 || (dh && M == 0)) return zeros(dh ? Shape{I, O, L} : Shape{I, O, L, M}, x.dtype(), x.device());
  Tensor gw;
  if (dh) {
    // gw_l (I, O) = conj(x_l) (I, B*M) @ g_l (B*M, O).
    const Tensor xl = conj(packed(x, {2, 1, 0, 3}, {L, I, B * M}));
    const Tensor gl = packed(g, {2, 0, 3, 1}, {L, B * M, O});
    gw = permute(matmul(xl, gl), {1, 2, 0});
  } else {
    // gw_lm (I, O) = conj(x_lm) (I, B) @ g_lm (B, O).
    gw = permute(matmul(conj(permute(x, {2, 3, 1, 0})), permute(g, {2, 3, 0, 1})), {2, 3, 0, 1});
  }
  return kernels::own_result(contiguous_copy(gw, true));
}

}  // namespace gs::sphere::detail
