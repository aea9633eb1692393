// The fused GELU (ops/gelu_fused.h): vectorisable f32 kernels, f64 through std::erf.
#include "ops/gelu_fused.h"

#include <cmath>
#include <cstring>
#include <type_traits>
#include <vector>

#include "engine/autograd/custom_function.h"
#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {

namespace {

// exp(x) for x <= 0 in float (Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, degree-6 polynomial),
// written without calls or branches so the loops below vectorise. Arguments below -87 give exp(-87).
inline float exp_nonpositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  // n = round(x / ln2) by the 1.5 * 2^23 trick (round to nearest; std::floor would block
  // vectorisation without -fno-math-errno).
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// Phi(x) = (1 + erf(x / sqrt 2)) / 2 and phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
struct NormalF {
  float cdf, pdf;
};
inline NormalF normal_f32(float x) {
  const float z = std::fabs(x) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  const float e = exp_nonpositive(-z * z);
  const float poly = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
  const float erf_abs = 1.0f - poly * e;
  const float erf = x < 0 ? -erf_abs : erf_abs;
  return {0.5f * (1.0f + erf), e * 0.39894228040143268f};
}

// The fused GELU over `planes` contiguous rows of `n` values; row r belongs to channel
// r % channels and reads bias[channel] when a bias is given. Forward (grad null):
// out = gelu(x + bias). Backward: out = grad * gelu'(x + bias), and row_sums[r] = sum of that row
// (for the bias gradient) when row_sums is given.
template <typename T>
void gelu_rows(const T* x, const T* bias, const T* grad, T* out, double* row_sums, int64_t planes, int64_t n,
               int64_t channels) {
  const bool parallel = planes * n >= (1 << 15) && planes > 1;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t r = 0; r < planes; ++r) {
    const T b = bias ? bias[r % channels] : T(0);
    const T* xr = x + r * n;
    T* o = out + r * n;
    if constexpr (std::is_same_v<T, float>) {
      if (grad == nullptr) {
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) {
          const float v = xr[i] + b;
          o[i] = v * normal_f32(v).cdf;
        }
      } else {
        const float* gr = grad + r * n;
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int64_t i = 0; i < n; ++i) {
          const float v = xr[i] + b;
          const NormalF nf = normal_f32(v);
          o[i] = gr[i] * (nf.cdf + v * nf.pdf);
          acc += o[i];
        }
        if (row_sums) row_sums[r] = acc;
      }
    } else {
      double acc = 0.0;
      for (int64_t i = 0; i < n; ++i) {
        const double v = xr[i] + b;
        const double cdf = 0.5 * (1.0 + std::erf(v * 0.70710678118654752));
        if (grad == nullptr) {
          o[i] = v * cdf;
        } else {
          const double pdf = std::exp(-0.5 * v * v) * 0.39894228040143268;
          o[i] = grad[r * n + i] * (cdf + v * pdf);
          acc += o[i];
        }
      }
      if (row_sums) row_sums[r] = acc;
    }
  }
}

// x contiguous; bias (C) with x (B, C, ...) or undefined; grad undefined (forward) or like x.
// Returns the output and, in backward with a bias, the bias gradient.
std::pair<Tensor, Tensor> run_gelu(const Tensor& x, const Tensor& bias, const Tensor& grad) {
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
  static std::vector<Tensor> forward(FunctionCtx& ctx, const std::vector<Tensor>& in) {
    ctx.save_for_backward(in);
    return {run_gelu(in[0], in.size() > 1 ? in[1] : Tensor(), Tensor()).first};
  }
  static std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& g) {
    const std::vector<Tensor> saved = ctx.saved_tensors();
    const Tensor& x = saved[0];
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
  GS_CHECK(x.defined() && is_floating(x.dtype()) && x.device().type == DeviceType::cpu,
           "gelu_fused: expected an f32 or f64 tensor on the CPU, got {}",
           x.meta_str());
  if (!bias.defined()) return apply_function<FusedGelu>("gelu_fused", {x})[0];
  GS_CHECK(x.dim() >= 2 && x.size(0) >= 1 && bias.dim() == 1 && bias.size(0) == x.size(1) &&
               bias.dtype() == x.dtype(),
           "gelu_fused: expected a bias ({}) of dtype {} for x {}, got {}", x.dim() >= 2 ? x.size(1) : -1,
           dtype_name(x.dtype()), x.meta_str(), bias.meta_str());
  return apply_function<FusedGelu>("gelu_bias_fused", {x, bias})[0];
}

namespace {

const OpRegistrar kGeluFusedOps{"its fused CUDA kernel is not written yet (the unfused gelu runs on CUDA)", {
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
}};

}  // namespace
}  // namespace gs
