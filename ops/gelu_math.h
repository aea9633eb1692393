// The fused GELU's arithmetic (ops/gelu_fused.cpp on the CPU, ops/gelu_fused_cuda.cu on CUDA):
// f32 through a branch-free polynomial erf (Abramowitz-Stegun 7.1.26, abs. error <= 1.5e-7) that
// vectorises on the CPU, f64 through erf and exp.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "ops/elementwise_math.h"

namespace gs::math {

// exp(x) for x <= 0 in float (Cephes' expf: x = n ln2 + r, |r| <= ln2 / 2, degree-6 polynomial),
// written without calls or branches so the loops below vectorise. Arguments below -87 give exp(-87).
GS_HD inline float exp_nonpositive(float x) {
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
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

// Phi(x) = (1 + erf(x / sqrt 2)) / 2 and phi(x) = exp(-x^2 / 2) / sqrt(2 pi).
struct NormalF {
  float cdf, pdf;
};
GS_HD inline NormalF normal_f32(float x) {
  const float z = fabsf(x) * 0.70710678118654752f;
  const float t = 1.0f / (1.0f + 0.3275911f * z);
  const float e = exp_nonpositive(-z * z);
  const float poly = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t + 0.254829592f) * t;
  const float erf_abs = 1.0f - poly * e;
  const float erf = x < 0 ? -erf_abs : erf_abs;
  return {0.5f * (1.0f + erf), e * 0.39894228040143268f};
}

// gelu(x + b) and d/dx gelu(x + b) * g, in each dtype's arithmetic above.
struct GeluBiasForward {
  template <typename T> GS_HD T operator()(T x, T b) const requires is_real_v<T> {
    const T v = x + b;
    if constexpr (std::is_same_v<T, float>) return v * normal_f32(v).cdf;
    else return v * (0.5 * (1.0 + std::erf(v * 0.70710678118654752)));
  }
};
struct GeluBiasBackward {
  template <typename T> GS_HD T operator()(T x, T b, T g) const requires is_real_v<T> {
    const T v = x + b;
    if constexpr (std::is_same_v<T, float>) {
      const NormalF nf = normal_f32(v);
      return g * (nf.cdf + v * nf.pdf);
    } else {
      const double cdf = 0.5 * (1.0 + std::erf(v * 0.70710678118654752));
      return g * (cdf + v * (std::exp(-0.5 * v * v) * 0.39894228040143268));
    }
  }
};

}  // namespace gs::math
