// SFNO normalisations: layer_norm_channels and instance_norm_sphere are one fused op (statistics,
// normalise and per-channel affine in one kernel; backward in one kernel too). Its backward rule
// runs the fused backward kernel for a plain backward, and the same formula written with
// differentiable ops when a graph of the gradient is asked for (create_graph), so double backward
// works. The composite version was ~7x slower than the fused kernels (forward and backward); it is
// the CUDA path (forward and backward) until fused CUDA norms land (the next issue).
// conditional_layer_norm: the fused normalisation, then elementwise ops for the modulation.
#include <cmath>
#include <string>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/sphere/sfno_block_common.h"
#include "ops/sphere/sfno_blocks.h"
#include "ops/view.h"

namespace gs::sphere {
using namespace detail;
using V = std::vector<Tensor>;
namespace {

// ---- the fused normalisation: y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c]
//
// Statistics are weighted means over a group: the C channels of one pixel (layer norm, weight 1/C
// each) or the H*W points of one (b, c) plane (instance norm, weight a_h per point of row h, with
// sum_h a_h W = 1). Variances are biased. With xh = (x - mean) r, r = (var + eps)^-1/2, gh = g weight:
//   grad_x = r (gh - a (S1 + xh S2)),  S1 = sum_group gh,  S2 = sum_group gh xh  (plain sums)
//   grad_weight[c] = sum g xh,  grad_bias[c] = sum g  (over everything but c)
// Statistics and sums are accumulated in f64 for both dtypes.

enum class NormAxis { channels, grid };

struct NormPlan {
  NormAxis axis;
  int64_t B, C, H, W;
  double eps;
  std::vector<double> row_weight;  // grid: a_h (sum_h a_h W = 1); channels: unused
  const char* name;
};

// Pixels per task in the channel-axis kernels: their running statistics stay in L1.
constexpr int64_t kPixelChunk = 256;


// Forward. x, y (B, C, H, W) contiguous; weight / bias (C) or null; mean, rstd (f64): channels
// (B, H*W), grid (B, C).
template <typename T>
void norm_forward_kernel(const NormPlan& pl, const T* x, const T* weight, const T* bias, T* y, double* mean,
                         double* rstd) {
  const int64_t P = pl.H * pl.W, C = pl.C;
  if (pl.axis == NormAxis::channels) {
    const int64_t nchunks = (P + kPixelChunk - 1) / kPixelChunk;
    parallel_tasks(pl.B * nchunks, pl.B * C * P, [&](int64_t t) {
      const int64_t b = t / nchunks, p0 = (t % nchunks) * kPixelChunk, n = std::min(kPixelChunk, P - p0);
      // Two passes over the chunk (it stays in L2): the mean, then squared deviations from it.
      double mu[kPixelChunk] = {}, m2[kPixelChunk] = {}, r[kPixelChunk];
      for (int64_t c = 0; c < C; ++c) {
        const T* xp = x + (b * C + c) * P + p0;
        for (int64_t k = 0; k < n; ++k) mu[k] += static_cast<double>(xp[k]);
      }
      for (int64_t k = 0; k < n; ++k) mu[k] /= static_cast<double>(C);
      for (int64_t c = 0; c < C; ++c) {
        const T* xp = x + (b * C + c) * P + p0;
        for (int64_t k = 0; k < n; ++k) {
          const double d = static_cast<double>(xp[k]) - mu[k];
          m2[k] += d * d;
        }
      }
      for (int64_t k = 0; k < n; ++k) {
        r[k] = 1.0 / std::sqrt(m2[k] / static_cast<double>(C) + pl.eps);
        mean[b * P + p0 + k] = mu[k];
        rstd[b * P + p0 + k] = r[k];
      }
      for (int64_t c = 0; c < C; ++c) {
        const T* xp = x + (b * C + c) * P + p0;
        T* yp = y + (b * C + c) * P + p0;
        const double wc = weight ? static_cast<double>(weight[c]) : 1.0, bc = bias ? static_cast<double>(bias[c]) : 0.0;
        for (int64_t k = 0; k < n; ++k) yp[k] = static_cast<T>((static_cast<double>(xp[k]) - mu[k]) * r[k] * wc + bc);
      }
    });
    return;
  }
  parallel_tasks(pl.B * C, pl.B * C * P, [&](int64_t t) {
    const int64_t c = t % C;
    const T* xp = x + t * P;
    T* yp = y + t * P;
    double mu = 0.0, var = 0.0;
    for (int64_t h = 0; h < pl.H; ++h) {
      double row = 0.0;
      for (int64_t w = 0; w < pl.W; ++w) row += static_cast<double>(xp[h * pl.W + w]);
      mu += pl.row_weight[h] * row;
    }
    for (int64_t h = 0; h < pl.H; ++h) {
      double row = 0.0;
      for (int64_t w = 0; w < pl.W; ++w) {
        const double d = static_cast<double>(xp[h * pl.W + w]) - mu;
        row += d * d;
      }
      var += pl.row_weight[h] * row;
    }
    const double r = 1.0 / std::sqrt(var + pl.eps);
    mean[t] = mu;
    rstd[t] = r;
    const double scale = r * (weight ? static_cast<double>(weight[c]) : 1.0), bc = bias ? static_cast<double>(bias[c]) : 0.0;
    for (int64_t k = 0; k < P; ++k) yp[k] = static_cast<T>((static_cast<double>(xp[k]) - mu) * scale + bc);
  });
}

// Backward (not differentiable again: the rule switches to norm_backward_ops under create_graph).
// gx may be null (not needed); gw_part / gb_part are per-task partial sums (ntasks x C), summed in
// task order by the caller so the result does not depend on the thread count.
template <typename T>
void norm_backward_kernel(const NormPlan& pl, const T* x, const T* g, const T* weight, const double* mean,
                          const double* rstd, T* gx, double* gw_part, double* gb_part) {
  const int64_t P = pl.H * pl.W, C = pl.C;
  auto wc = [&](int64_t c) { return weight ? static_cast<double>(weight[c]) : 1.0; };
  if (pl.axis == NormAxis::channels) {
    const int64_t nchunks = (P + kPixelChunk - 1) / kPixelChunk;
    const double a = 1.0 / static_cast<double>(C);
    parallel_tasks(pl.B * nchunks, 2 * pl.B * C * P, [&](int64_t t) {
      const int64_t b = t / nchunks, p0 = (t % nchunks) * kPixelChunk, n = std::min(kPixelChunk, P - p0);
      const double* mu = mean + b * P + p0;
      const double* r = rstd + b * P + p0;
      double s1[kPixelChunk] = {}, s2[kPixelChunk] = {};
      for (int64_t c = 0; c < C; ++c) {
        const T* xp = x + (b * C + c) * P + p0;
        const T* gp = g + (b * C + c) * P + p0;
        const double w = wc(c);
        double gxh = 0.0, gsum = 0.0;
        for (int64_t k = 0; k < n; ++k) {
          const double xh = (static_cast<double>(xp[k]) - mu[k]) * r[k], gv = static_cast<double>(gp[k]);
          s1[k] += gv * w;
          s2[k] += gv * w * xh;
          gxh += gv * xh;
          gsum += gv;
        }
        gw_part[t * C + c] = gxh;
        gb_part[t * C + c] = gsum;
      }
      if (!gx) return;
      for (int64_t c = 0; c < C; ++c) {
        const T* xp = x + (b * C + c) * P + p0;
        const T* gp = g + (b * C + c) * P + p0;
        T* out = gx + (b * C + c) * P + p0;
        const double w = wc(c);
        for (int64_t k = 0; k < n; ++k) {
          const double xh = (static_cast<double>(xp[k]) - mu[k]) * r[k];
          out[k] = static_cast<T>(r[k] * (static_cast<double>(gp[k]) * w - a * (s1[k] + xh * s2[k])));
        }
      }
    });
    return;
  }
  parallel_tasks(pl.B * C, 2 * pl.B * C * P, [&](int64_t t) {
    const int64_t c = t % C;
    const T* xp = x + t * P;
    const T* gp = g + t * P;
    const double mu = mean[t], r = rstd[t], w = wc(c);
    double gxh = 0.0, gsum = 0.0;
    for (int64_t k = 0; k < P; ++k) {
      const double gv = static_cast<double>(gp[k]);
      gxh += gv * (static_cast<double>(xp[k]) - mu) * r;
      gsum += gv;
    }
    gw_part[t] = gxh;  // one plane per task: the partials are (B x C)
    gb_part[t] = gsum;
    if (!gx) return;
    const double s1 = w * gsum, s2 = w * gxh;
    T* out = gx + t * P;
    for (int64_t h = 0; h < pl.H; ++h) {
      const double a = pl.row_weight[h];
      for (int64_t v = 0; v < pl.W; ++v) {
        const int64_t k = h * pl.W + v;
        const double xh = (static_cast<double>(xp[k]) - mu) * r;
        out[k] = static_cast<T>(r * (static_cast<double>(gp[k]) * w - a * (s1 + xh * s2)));
      }
    }
  });
}

// The per-point weights a as a tensor on `device` that broadcasts against (B, C, H, W): a 0-dim
// 1/C or 1/(HW), or (H, 1) rows.
Tensor point_weights(const NormPlan& pl, DType dtype, Device device) {
  if (pl.axis == NormAxis::channels) return full({}, 1.0 / static_cast<double>(pl.C), dtype, device);
  bool uniform = true;
  for (double a : pl.row_weight) uniform &= a == pl.row_weight[0];
  if (uniform) return full({}, pl.row_weight[0], dtype, device);
  const Tensor rows = to(from_vector(pl.row_weight, {pl.H, 1}), dtype);
  return device.is_cpu() ? rows : to(rows, device);
}

std::vector<int64_t> group_dims(const NormPlan& pl) {
  return pl.axis == NormAxis::channels ? std::vector<int64_t>{1} : std::vector<int64_t>{2, 3};
}

// xh = (x - mean) r and r = (var + eps)^-1/2 as differentiable ops in x's dtype, with the point
// weights a they were taken with.
struct NormalizedOps {
  Tensor a, r, xh;
};
NormalizedOps normalized_ops(const NormPlan& pl, const Tensor& x) {
  const auto dims = group_dims(pl);
  Tensor a = point_weights(pl, x.dtype(), x.device());
  auto wmean = [&](const Tensor& t) { return sum(mul(t, a), dims, true); };
  Tensor xc = sub(x, wmean(x));
  Tensor r = rsqrt(add(wmean(mul(xc, xc)), pl.eps));
  return {a, r, mul(xc, r)};
}

// The forward as tensor ops, not recorded: the path on CUDA, where there is no fused kernel yet.
Tensor norm_forward_ops(const NormPlan& pl, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  forward_ad::PrimalOnlyGuard no_grad;
  Tensor y = normalized_ops(pl, x).xh;
  if (weight.defined()) y = mul(y, reshape(weight, {1, pl.C, 1, 1}));
  if (bias.defined()) y = add(y, reshape(bias, {1, pl.C, 1, 1}));
  return kernels::own_result(contiguous_copy(y, true));
}

// The backward formula as differentiable ops, statistics recomputed from x (used under create_graph,
// and on CUDA).
std::vector<Tensor> norm_backward_ops(const NormPlan& pl, const Tensor& x, const Tensor& weight, const Tensor& g,
                                      bool need_x, bool need_w, bool need_b) {
  const auto dims = group_dims(pl);
  const auto [a, r, xh] = normalized_ops(pl, x);
  Tensor gx, gw, gb;
  if (need_x) {
    Tensor gh = weight.defined() ? mul(g, reshape(weight, {1, pl.C, 1, 1})) : g;
    Tensor s1 = sum(gh, dims, true), s2 = sum(mul(gh, xh), dims, true);
    gx = mul(r, sub(gh, mul(a, add(s1, mul(xh, s2)))));
  }
  if (need_w) gw = sum(mul(g, xh), {0, 2, 3});
  if (need_b) gb = sum(g, {0, 2, 3});
  return {gx, gw, gb};
}

std::vector<Tensor> norm_backward_fused(const NormPlan& pl, const Tensor& x, const Tensor& weight, const Tensor& g,
                                        const Tensor& mean, const Tensor& rstd, bool need_x, bool need_w,
                                        bool need_b) {
  const int64_t P = pl.H * pl.W;
  const int64_t ntasks = pl.axis == NormAxis::channels ? pl.B * ((P + kPixelChunk - 1) / kPixelChunk) : pl.B * pl.C;
  Tensor gx = need_x ? empty(x.sizes(), x.dtype(), x.device()) : Tensor();
  std::vector<double> gw_part(static_cast<size_t>(ntasks * (pl.axis == NormAxis::channels ? pl.C : 1)));
  std::vector<double> gb_part(gw_part.size());
  Tensor gc = contiguous_copy(g), xc = contiguous_copy(x), wc = weight.defined() ? contiguous_copy(weight) : Tensor();
  dispatch_float(x.dtype(), pl.name, [&]<typename T>() {
    norm_backward_kernel<T>(pl, xc.data<T>(), gc.data<T>(), wc.defined() ? wc.data<T>() : nullptr, mean.data<double>(),
                            rstd.data<double>(), need_x ? gx.data<T>() : nullptr, gw_part.data(), gb_part.data());
  });
  // Channel sums of the partials, in task order (partials are (ntasks, C) or, on the grid axis, (B, C)).
  auto channel_sums = [&](const std::vector<double>& part) {
    std::vector<double> s(static_cast<size_t>(pl.C), 0.0);
    const int64_t rows = static_cast<int64_t>(part.size()) / pl.C;
    for (int64_t t = 0; t < rows; ++t)
      for (int64_t c = 0; c < pl.C; ++c) s[c] += part[t * pl.C + c];
    return to(from_vector(s), x.dtype());
  };
  return {gx, need_w ? channel_sums(gw_part) : Tensor(), need_b ? channel_sums(gb_part) : Tensor()};
}

// The recorded op. weight and bias (C) may be undefined.
Tensor fused_norm(const NormPlan& pl, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const int64_t P = pl.H * pl.W;
  Shape stat_sizes = pl.axis == NormAxis::channels ? Shape{pl.B, 1, pl.H, pl.W} : Shape{pl.B, pl.C, 1, 1};
  // On CUDA the forward and backward are tensor ops (the fused kernels are CPU code): no statistics kept.
  const bool ops_path = composite_path(x);
  const bool compute = x.numel() > 0 && P > 0;
  Tensor mean = ops_path ? Tensor() : empty(stat_sizes, DType::f64, x.device());
  Tensor rstd = ops_path ? Tensor() : empty(stat_sizes, DType::f64, x.device());
  Tensor y = compute && ops_path ? norm_forward_ops(pl, x, weight, bias) : empty(x.sizes(), x.dtype(), x.device());
  if (compute && !ops_path) {
    Tensor xc = contiguous_copy(x);
    Tensor wc = weight.defined() ? contiguous_copy(weight) : Tensor(), bc = bias.defined() ? contiguous_copy(bias) : Tensor();
    dispatch_float(x.dtype(), pl.name, [&]<typename T>() {
      norm_forward_kernel<T>(pl, xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr, bc.defined() ? bc.data<T>() : nullptr,
                             y.data<T>(), mean.data<double>(), rstd.data<double>());
    });
  }
  if (should_record({x, weight, bias})) {
    record_op(pl.name, {x, weight, bias}, {&y}, {x, weight, mean, rstd}, {},
              [pl, ops_path](BackwardContext& ctx, const std::vector<Tensor>& g) {
                const bool nx = ctx.needs_input_grad(0), nw = ctx.needs_input_grad(1), nb = ctx.needs_input_grad(2);
                if (GradMode::enabled() || ops_path) return norm_backward_ops(pl, ctx.saved(0), ctx.saved(1), g[0], nx, nw, nb);
                return norm_backward_fused(pl, ctx.saved(0), ctx.saved(1), g[0], ctx.saved(2), ctx.saved(3), nx, nw, nb);
              });
  }
  return y;
}

NormPlan plan_for(const Tensor& x, NormAxis axis, double eps, const char* name) {
  return {axis, x.size(0), x.size(1), x.size(2), x.size(3), eps, {}, name};
}

}  // namespace

Tensor layer_norm_channels(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "layer_norm_channels";
  check_field(x, op);
  check_eps(eps, op);
  Tensor w = channel_param(weight, x, op, "the weight (C)"), b = channel_param(bias, x, op, "the bias (C)");
  return fused_norm(plan_for(x, NormAxis::channels, eps, op), x, w, b);
}

Tensor instance_norm_sphere(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                            const Tensor& quad_weights) {
  const char* op = "instance_norm_sphere";
  check_field(x, op);
  check_eps(eps, op);
  Tensor w = channel_param(weight, x, op, "the weight (C)"), b = channel_param(bias, x, op, "the bias (C)");
  NormPlan pl = plan_for(x, NormAxis::grid, eps, op);
  const double npts = static_cast<double>(pl.H * pl.W);
  if (!quad_weights.defined()) {
    pl.row_weight.assign(static_cast<size_t>(pl.H), 1.0 / npts);
  } else {
    GS_CHECK(!quad_weights.requires_grad(),
             "{}: the quadrature weights are constants and get no gradient, got a tensor that requires grad "
             "(pass quad_weights.detach())",
             op);
    pl.row_weight = check_row_weights(quad_weights, x, op, "the quadrature weights (H)");
    double total = 0.0;
    for (double q : pl.row_weight) total += q;
    for (double& q : pl.row_weight) q /= total * static_cast<double>(pl.W);  // sum over the grid: 1
  }
  return fused_norm(pl, x, w, b);
}

Tensor conditional_layer_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, double eps) {
  const char* op = "conditional_layer_norm";
  check_field(x, op);
  check_eps(eps, op);
  auto modulation = [&](const Tensor& t, const char* what) {
    GS_CHECK(t.defined(), "{}: {} is an undefined tensor", op, what);
    const int64_t B = x.size(0), C = x.size(1);
    GS_CHECK((t.dim() == 2 && t.size(0) == B && t.size(1) == C) || (t.dim() == 4 && t.sizes() == x.sizes()),
             "{}: expected {} of shape ({}, {}) (B, C) or {} (B, C, H, W) for x {}, got {}", op, what, B, C,
             shape_str(x.sizes()), shape_str(x.sizes()), t.meta_str());
    GS_CHECK(t.dtype() == x.dtype(), "{}: expected {} with x's dtype {}, got {}", op, what, dtype_name(x.dtype()),
             t.meta_str());
    kernels::check_same_device(x, t, op);
    return t.dim() == 2 ? reshape(t, {B, C, 1, 1}) : t;
  };
  Tensor s = modulation(scale, "the scale"), b = modulation(bias, "the bias");
  Tensor xhat = fused_norm(plan_for(x, NormAxis::channels, eps, op), x, Tensor(), Tensor());
  return add(mul(xhat, add(s, 1.0)), b);  // xhat * (1 + scale) + bias
}

namespace {
const OpRegistrar registrar{{
    {"layer_norm_channels",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"affine", {sample_leaf({2, 3, 2, 3}, sub_key(k, 1)), sample_leaf({3}, sub_key(k, 2)), sample_leaf({3}, sub_key(k, 3))}},
           {"non-contiguous, no affine", {sample_leaf_transposed({2, 3, 3, 2}, sub_key(k, 4))}}};
     },
     [](const V& x) { return V{layer_norm_channels(x[0], x.size() > 1 ? x[1] : Tensor(), x.size() > 2 ? x[2] : Tensor(), 1e-5)}; }},
    {"instance_norm_sphere",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"uniform, affine", {sample_leaf({2, 3, 2, 3}, sub_key(k, 1)), sample_leaf({3}, sub_key(k, 2)), sample_leaf({3}, sub_key(k, 3))}},
           {"quadrature weights", {sample_leaf({2, 2, 3, 2}, sub_key(k, 4)), sample_leaf({2}, sub_key(k, 5)), sample_leaf({2}, sub_key(k, 6)),
                                   positive_rows(3, sub_key(k, 7))}}};
     },
     [](const V& x) { return V{instance_norm_sphere(x[0], x[1], x[2], 1e-5, x.size() > 3 ? x[3] : Tensor())}; }},
    {"conditional_layer_norm",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"(B, C) scale and bias", {sample_leaf({2, 3, 2, 3}, sub_key(k, 1)), sample_leaf({2, 3}, sub_key(k, 2)), sample_leaf({2, 3}, sub_key(k, 3))}},
           {"(B, C, H, W) scale and bias", {sample_leaf({2, 3, 2, 2}, sub_key(k, 4)), sample_leaf({2, 3, 2, 2}, sub_key(k, 5)),
                                            sample_leaf({2, 3, 2, 2}, sub_key(k, 6))}}};
     },
     [](const V& x) { return V{conditional_layer_norm(x[0], x[1], x[2], 1e-5)}; }},
}};
}  // namespace
}  // namespace gs::sphere
