// The fused GELU (ops/gelu_fused.h): its arithmetic is ops/gelu_math.h's, the CPU loops here and
// the CUDA kernels in gelu_fused_cuda.cu.
#include "ops/gelu_fused.h"

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "engine/autograd/custom_function.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/gelu_fused_cuda.h"
#include "ops/gelu_math.h"
#include "ops/kernels.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {

namespace {

// The fused GELU over `planes` contiguous rows of `n` values; row r belongs to channel
// r % channels and reads bias[channel] when a bias is given. Forward (grad null):
// out = gelu(x + bias). Backward: out = grad * gelu'(x + bias), and row_sums[r] = sum of that row
// (for the bias gradient) when row_sums is given.
template <typename T>
void gelu_rows(const T* x, const T* bias, const T* grad, T* out, double* row_sums, int64_t planes, int64_t n,
               int64_t channels) {
  const bool parallel = planes * n >= (1 << 15) && planes > 1;
  const math::GeluBiasForward fwd;
  const math::GeluBiasBackward bwd;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < planes; ++r) {
    const T b = bias ? bias[r % channels] : T(0);
    const T* xr = x + r * n;
    T* o = out + r * n;
    if (grad == nullptr) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = fwd(xr[i], b);
      continue;
    }
    const T* gr = grad + r * n;
    // f32 rows sum in f32 (vectorised; a row is at most one plane), f64 in f64.
    T acc = T(0);
#pragma omp simd reduction(+ : acc)
    for (int64_t i = 0; i < n; ++i) {
      o[i] = bwd(xr[i], b, gr[i]);
      acc += o[i];
    }
    if (row_sums) row_sums[r] = acc;
  }
}

// x contiguous; bias (C) with x (B, C, ...) or undefined; grad undefined (forward) or like x.
// Returns the output and, in backward with a bias, the bias gradient.
// On CUDA: one elementwise pass with the bias broadcast as (1, C, 1, ...) (a 0-dim zero without
// one), and the bias gradient as a sum over every dim but 1 (f64 accumulation, as the CPU's).
std::pair<Tensor, Tensor> run_gelu_cuda(const Tensor& x, const Tensor& bias, const Tensor& grad) {
  forward_ad::PrimalOnlyGuard ng;
  Shape bshape(static_cast<size_t>(x.dim()), 1);
  if (bias.defined()) bshape[1] = x.size(1);
  const Tensor b = bias.defined() ? reshape(bias, bshape) : zeros({}, x.dtype(), x.device());
  Tensor out = empty(x.sizes(), x.dtype(), x.device());
  if (!grad.defined()) {
    kernels::launch_strided_cuda<3>("gelu_fused", out, {&x, &b}, [&](const auto& loop, void* stream) {
      return GS_CUDA_CALL(
          cuda_kernels::gelu_bias_forward(x.dtype(), out.raw_data(), x.raw_data(), b.raw_data(), loop, stream));
    });
    return {out, Tensor()};
  }
  kernels::launch_strided_cuda<4>("gelu_fused backward", out, {&x, &b, &grad}, [&](const auto& loop, void* stream) {
    return GS_CUDA_CALL(cuda_kernels::gelu_bias_backward(x.dtype(), out.raw_data(), x.raw_data(), b.raw_data(),
                                                         grad.raw_data(), loop, stream));
  });
  if (!bias.defined()) return {out, Tensor()};
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != 1) dims.push_back(d);
  return {out, sum(out, dims)};
}

std::pair<Tensor, Tensor> run_gelu(const Tensor& x, const Tensor& bias, const Tensor& grad) {
  if (kernels::on_cuda(x)) return run_gelu_cuda(x, bias, grad);
  Tensor xc = contiguous(x), gc = grad.defined() ? contiguous(grad) : Tensor();
  Tensor bc = bias.defined() ? contiguous(bias) : Tensor();
  const int64_t C = bias.defined() ? x.size(1) : 1;
  const int64_t n = bias.defined() ? x.numel() / (x.size(0) * C) : std::min<int64_t>(x.numel(), 4096);
  const int64_t planes = n > 0 ? x.numel() / n : 0;
  const int64_t tail = x.numel() - planes * n;  // only without bias: a last, shorter row
  Tensor out = empty(x.sizes(), x.dtype());
  const bool want_sums = grad.defined() && bias.defined();
  std::vector<double> sums(want_sums ? static_cast<size_t>(planes) : 0);
  auto run = [&]<typename T>() {
    const T* b = bc.defined() ? bc.data<T>() : nullptr;
    const T* g = gc.defined() ? gc.data<T>() : nullptr;
    gelu_rows<T>(xc.data<T>(), b, g, out.data<T>(), want_sums ? sums.data() : nullptr, planes, n, C);
    if (tail > 0)
      gelu_rows<T>(xc.data<T>() + planes * n, nullptr, g ? g + planes * n : nullptr, out.data<T>() + planes * n, nullptr,
                   1, tail, 1);
  };
  if (x.dtype() == DType::f32) run.template operator()<float>();
  else run.template operator()<double>();
  Tensor gbias;
  if (want_sums) {
    std::vector<double> per_channel(static_cast<size_t>(C), 0.0);
    for (int64_t r = 0; r < planes; ++r) per_channel[static_cast<size_t>(r % C)] += sums[static_cast<size_t>(r)];
    gbias = cast_copy(from_vector(per_channel, {C}), x.dtype());
  }
  return {out, gbias};
}

// inputs {x} or {x, bias}
struct FusedGelu {
  // A bf16 x is saved as it is (half the bytes of f32) and read as f32 in both passes.
  static std::vector<Tensor> forward(FunctionCtx& ctx, const std::vector<Tensor>& in) {
    ctx.save_for_backward(in);
    return {run_gelu(kernels::widen_storage(in[0]), in.size() > 1 ? in[1] : Tensor(), Tensor()).first};
  }
  static std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& g) {
    const std::vector<Tensor> saved = ctx.saved_tensors();
    const Tensor x = to(saved[0], compute_dtype(saved[0].dtype()));  // recorded under create_graph
    const Tensor bias = saved.size() > 1 ? saved[1] : Tensor();
    if (!GradMode::enabled()) {
      auto [gx, gb] = run_gelu(x, bias, g[0]);
      if (!bias.defined()) return {gx};
      return {gx, gb};
    }
    // create_graph: Phi(v) + v phi(v) in differentiable ops, v = x + bias.
    Shape bshape(static_cast<size_t>(x.dim()), 1);
    if (bias.defined()) bshape[1] = x.size(1);
    const Tensor v = bias.defined() ? add(x, reshape(bias, bshape)) : x;
    Tensor cdf = mul(add(erf(mul(v, 0.70710678118654752)), 1.0), 0.5);
    Tensor pdf = mul(exp(mul(mul(v, v), -0.5)), 0.39894228040143268);
    Tensor gx = mul(g[0], add(cdf, mul(v, pdf)));
    if (!bias.defined()) return {gx};
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (d != 1) dims.push_back(d);
    return {gx, sum(gx, dims)};
  }
};

}  // namespace

Tensor gelu_fused(const Tensor& x, const Tensor& bias) {
  GS_CHECK(x.defined() && is_floating(compute_dtype(x.dtype())),
           "gelu_fused: expected an f32 or f64 tensor (or bf16, read as f32), got {}", x.defined() ? x.meta_str() : "undefined");
  if (bias.defined()) kernels::check_same_device(x, bias, "gelu_fused");
  if (!bias.defined()) return apply_function<FusedGelu>("gelu_fused", {x})[0];
  GS_CHECK(x.dim() >= 2 && x.size(0) >= 1 && bias.dim() == 1 && bias.size(0) == x.size(1) &&
               bias.dtype() == compute_dtype(x.dtype()),
           "gelu_fused: expected a bias ({}) of dtype {} for x {}, got {}", x.dim() >= 2 ? x.size(1) : -1,
           dtype_name(compute_dtype(x.dtype())), x.meta_str(), bias.meta_str());
  return apply_function<FusedGelu>("gelu_bias_fused", {x, bias})[0];
}

namespace {

const OpRegistrar kGeluFusedOps{
    OpInfo{"gelu_fused", [](RandomKey k) {
             return std::vector<OpSample>{{"plain", {sample_leaf({2, 3, 4}, k)}},
                                          {"non-contiguous", {sample_leaf_transposed({3, 5}, {k.seed, k.stream + 1})}}};
           },
           [](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu_fused(in[0])}; }},
    OpInfo{"gelu_bias_fused", [](RandomKey k) {
             return std::vector<OpSample>{{"bias per channel",
                                           {sample_leaf({2, 3, 4, 5}, k), sample_leaf({3}, {k.seed, k.stream + 1})}}};
           },
           [](const std::vector<Tensor>& in) { return std::vector<Tensor>{gelu_fused(in[0], in[1])}; }},
};

}  // namespace
}  // namespace gs
