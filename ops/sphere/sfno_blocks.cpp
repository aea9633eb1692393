// SFNO grid-space blocks.
//   - layer_norm_channels and instance_norm_sphere: one fused normalisation op (statistics, normalise
//     and per-channel affine in one kernel; backward in one kernel too). Its backward rule runs the
//     fused backward kernel for a plain backward, and the same formula written with differentiable
//     ops when a graph of the gradient is asked for (create_graph), so double backward works. The
//     composite version was ~7x slower than the fused kernels (forward and backward).
//   - conditional_layer_norm: the fused normalisation, then elementwise ops for the modulation.
//   - conv1x1, local_conv3x3: GEMMs through gs::matmul; local_conv3x3 is fed by a pole-aware gather
//     whose backward is the matching scatter-add (and the scatter's backward is the gather again).
//   - area_weighted_mean / mse: compositions of differentiable ops (reductions over W come first,
//     so the composite costs little more than one pass).
#include "ops/sphere/sfno_blocks.h"

#include <omp.h>

#include <cmath>
#include <string>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs::sphere {
namespace {

// ---- checks

std::string describe(const Tensor& t) { return t.defined() ? t.meta_str() : "an undefined tensor"; }

// x must be a real (B, C, H, W) field on the CPU.
void check_field(const Tensor& x, const char* op, const char* what = "x (B, C, H, W)") {
  GS_CHECK(x.defined(), "{}: {} is an undefined tensor", op, what);
  GS_CHECK(is_floating(x.dtype()) && x.dim() == 4, "{}: expected {} as an f32 or f64 tensor of 4 dims, got {}", op,
           what, x.meta_str());
  kernels::check_cpu(x, op);
}

void check_eps(double eps, const char* op) {
  GS_CHECK(std::isfinite(eps) && eps >= 0.0, "{}: expected a finite eps >= 0, got {}", op, eps);
}

// An optional per-channel parameter (C) with x's dtype; undefined stays undefined.
Tensor channel_param(const Tensor& p, const Tensor& x, const char* op, const char* what) {
  if (!p.defined()) return p;
  const int64_t C = x.size(1);
  GS_CHECK(p.dim() == 1 && p.size(0) == C, "{}: expected {} of shape {} for x {} with {} channels, got {}", op, what,
           shape_str({C}), shape_str(x.sizes()), C, p.meta_str());
  GS_CHECK(p.dtype() == x.dtype(), "{}: expected {} with x's dtype {}, got {}", op, what, dtype_name(x.dtype()),
           p.meta_str());
  kernels::check_same_device(x, p, op);
  return p;
}

// Checks per-row weights (H) for a field (..., H, W); returns their values (f64).
std::vector<double> check_row_weights(const Tensor& a, const Tensor& x, const char* op, const char* what) {
  GS_CHECK(a.defined(), "{}: {} is an undefined tensor", op, what);
  const int64_t H = x.size(-2);
  GS_CHECK(a.dim() == 1 && a.size(0) == H, "{}: expected {} of shape {}, one per latitude row of x {}, got {}", op,
           what, shape_str({H}), shape_str(x.sizes()), a.meta_str());
  GS_CHECK(a.dtype() == x.dtype(), "{}: expected {} with x's dtype {}, got {}", op, what, dtype_name(x.dtype()),
           a.meta_str());
  kernels::check_same_device(x, a, op);
  std::vector<double> v = cast_copy(a, DType::f64).to_vector<double>();
  double total = 0.0;
  for (double e : v) {
    GS_CHECK(e >= 0.0 && std::isfinite(e), "{}: expected {} to be finite and non-negative, got a value {}", op, what, e);
    total += e;
  }
  GS_CHECK(total > 0.0, "{}: expected {} with a positive sum, got all zeros", op, what);
  return v;
}

// Per-row weights (H) for a field (..., H, W): checked, normalised to sum to 1 (with differentiable
// ops, so weights that require grad get one), shaped (H, 1).
Tensor row_weights(const Tensor& a, const Tensor& x, const char* op, const char* what) {
  check_row_weights(a, x, op, what);
  return reshape(div(a, sum(a)), {x.size(-2), 1});
}

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

template <typename F>
void parallel_tasks(int64_t n, int64_t work, F&& f) {
  if (n > 1 && work >= kernels::kParallelGrain && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < n; ++t) f(t);
  } else {
    for (int64_t t = 0; t < n; ++t) f(t);
  }
}

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

// The per-point weights a as a tensor that broadcasts against (B, C, H, W): a 0-dim 1/C or 1/(HW),
// or (H, 1) rows.
Tensor point_weights(const NormPlan& pl, DType dtype) {
  if (pl.axis == NormAxis::channels) return full({}, 1.0 / static_cast<double>(pl.C), dtype);
  bool uniform = true;
  for (double a : pl.row_weight) uniform &= a == pl.row_weight[0];
  if (uniform) return full({}, pl.row_weight[0], dtype);
  return to(from_vector(pl.row_weight, {pl.H, 1}), dtype);
}

std::vector<int64_t> group_dims(const NormPlan& pl) {
  return pl.axis == NormAxis::channels ? std::vector<int64_t>{1} : std::vector<int64_t>{2, 3};
}

// The backward formula as differentiable ops, statistics recomputed from x (used under create_graph).
std::vector<Tensor> norm_backward_ops(const NormPlan& pl, const Tensor& x, const Tensor& weight, const Tensor& g,
                                      bool need_x, bool need_w, bool need_b) {
  const auto dims = group_dims(pl);
  Tensor a = point_weights(pl, x.dtype());
  auto wmean = [&](const Tensor& t) { return sum(mul(t, a), dims, true); };
  Tensor xc = sub(x, wmean(x));
  Tensor r = rsqrt(add(wmean(mul(xc, xc)), pl.eps));
  Tensor xh = mul(xc, r);
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
  Tensor y = empty(x.sizes(), x.dtype(), x.device());
  Shape stat_sizes = pl.axis == NormAxis::channels ? Shape{pl.B, 1, pl.H, pl.W} : Shape{pl.B, pl.C, 1, 1};
  Tensor mean = empty(stat_sizes, DType::f64, x.device()), rstd = empty(stat_sizes, DType::f64, x.device());
  if (x.numel() > 0 && P > 0) {
    Tensor xc = contiguous_copy(x);
    Tensor wc = weight.defined() ? contiguous_copy(weight) : Tensor(), bc = bias.defined() ? contiguous_copy(bias) : Tensor();
    dispatch_float(x.dtype(), pl.name, [&]<typename T>() {
      norm_forward_kernel<T>(pl, xc.data<T>(), wc.defined() ? wc.data<T>() : nullptr, bc.defined() ? bc.data<T>() : nullptr,
                             y.data<T>(), mean.data<double>(), rstd.data<double>());
    });
  }
  if (should_record({x, weight, bias})) {
    record_op(pl.name, {x, weight, bias}, {&y}, {x, weight, mean, rstd}, {},
              [pl](BackwardContext& ctx, const std::vector<Tensor>& g) {
                const bool nx = ctx.needs_input_grad(0), nw = ctx.needs_input_grad(1), nb = ctx.needs_input_grad(2);
                if (GradMode::enabled()) return norm_backward_ops(pl, ctx.saved(0), ctx.saved(1), g[0], nx, nw, nb);
                return norm_backward_fused(pl, ctx.saved(0), ctx.saved(1), g[0], ctx.saved(2), ctx.saved(3), nx, nw, nb);
              });
  }
  return y;
}

NormPlan plan_for(const Tensor& x, NormAxis axis, double eps, const char* name) {
  return {axis, x.size(0), x.size(1), x.size(2), x.size(3), eps, {}, name};
}

// ---- the pole-aware neighbourhood gather and its adjoint

constexpr int64_t kTaps = 9;  // 3x3

// Where row h of tap k = dh*3 + dw reads from: a source row, and the source column of w = 0 (the
// rest of the row follows cyclically). One entry per (tap, row).
struct RowSource {
  int64_t row, col0;
};

std::vector<RowSource> row_sources(int64_t H, int64_t W) {
  std::vector<RowSource> src(static_cast<size_t>(kTaps * H));
  for (int64_t k = 0; k < kTaps; ++k)
    for (int64_t h = 0; h < H; ++h) {
      GridPoint p = sphere_neighbour_index(h, 0, k / 3, k % 3, H, W, 3);
      src[static_cast<size_t>(k * H + h)] = {p.row, p.col};
    }
  return src;
}

void check_even_lon(const Tensor& x, const char* op) {
  GS_CHECK(x.size(3) % 2 == 0 && x.size(2) >= 1,
           "{}: expected an even number of longitudes (across a pole the neighbour row is rotated by W/2) and at "
           "least one latitude, got x {} with W = {}",
           op, shape_str(x.sizes()), x.size(3));
}

Tensor neighbours_scatter(const Tensor& g, const Shape& x_sizes);

// x (B, C, H, W) -> (B, C, 3, 3, H, W): each output row is a source row rotated by col0 (two copies).
Tensor neighbours_gather(const Tensor& x) {
  const int64_t B = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), HW = H * W;
  Tensor out = empty({B, C, 3, 3, H, W}, x.dtype(), x.device());
  if (out.numel() > 0) {
    const std::vector<RowSource> src = row_sources(H, W);
    Tensor xc = contiguous_copy(x);
    dispatch_float_complex(x.dtype(), "sphere_neighbours3x3", [&]<typename T>() {
      const T* px = xc.data<T>();
      T* po = out.data<T>();
      parallel_tasks(B * C, out.numel(), [&](int64_t p) {
        for (int64_t j = 0; j < kTaps * H; ++j) {
          const T* s = px + p * HW + src[j].row * W;
          T* d = po + p * kTaps * HW + j * W;
          const int64_t c0 = src[j].col0;
          std::copy(s + c0, s + W, d);
          std::copy(s, s + c0, d + (W - c0));
        }
      });
    });
  }
  if (should_record({x})) {
    Shape xs = x.sizes();
    record_op("sphere_neighbours3x3", {x}, {&out}, {}, {}, [xs](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{neighbours_scatter(g[0], xs)};
    });
  }
  return out;
}

// The adjoint: g (B, C, 3, 3, H, W) -> (B, C, H, W), each tap's row added back onto the row it read.
Tensor neighbours_scatter(const Tensor& g, const Shape& x_sizes) {
  const int64_t B = x_sizes[0], C = x_sizes[1], H = x_sizes[2], W = x_sizes[3], HW = H * W;
  GS_CHECK(g.sizes() == Shape({B, C, 3, 3, H, W}), "sphere_neighbours3x3 backward: expected a gradient {}, got {}",
           shape_str({B, C, 3, 3, H, W}), g.meta_str());
  Tensor out = zeros(x_sizes, g.dtype(), g.device());
  if (out.numel() > 0) {
    const std::vector<RowSource> src = row_sources(H, W);
    Tensor gc = contiguous_copy(g);
    dispatch_float_complex(g.dtype(), "sphere_neighbours3x3_backward", [&]<typename T>() {
      const T* pg = gc.data<T>();
      T* po = out.data<T>();
      // One plane per task: every tap of a plane lands in that plane, so tasks never collide.
      parallel_tasks(B * C, g.numel(), [&](int64_t p) {
        for (int64_t j = 0; j < kTaps * H; ++j) {
          const T* s = pg + p * kTaps * HW + j * W;
          T* d = po + p * HW + src[j].row * W;
          const int64_t c0 = src[j].col0, n1 = W - c0;
          for (int64_t w = 0; w < n1; ++w) d[c0 + w] += s[w];
          for (int64_t w = 0; w < c0; ++w) d[w] += s[n1 + w];
        }
      });
    });
  }
  if (should_record({g}))
    record_op("sphere_neighbours3x3_backward", {g}, {&out}, {}, {}, [](BackwardContext&, const std::vector<Tensor>& gg) {
      return std::vector<Tensor>{neighbours_gather(gg[0])};
    });
  return out;
}

}  // namespace

GridPoint sphere_neighbour_index(int64_t h, int64_t w, int64_t dh, int64_t dw, int64_t H, int64_t W, int64_t k) {
  GS_CHECK(k >= 1 && k % 2 == 1 && dh >= 0 && dh < k && dw >= 0 && dw < k && h >= 0 && h < H && w >= 0 && w < W,
           "sphere_neighbour_index: expected an odd k, 0 <= dh, dw < k and (h, w) on the {}x{} grid, got k = {}, "
           "(dh, dw) = ({}, {}), (h, w) = ({}, {})",
           H, W, k, dh, dw, h, w);
  GS_CHECK(W % 2 == 0, "sphere_neighbour_index: expected an even number of longitudes W, got {}", W);
  const int64_t half = k / 2;
  int64_t r = h + dh - half, c = w + dw - half;
  GS_CHECK(r >= -H && r < 2 * H, "sphere_neighbour_index: a {}x{} stencil reaches past both poles of a grid of {} rows",
           k, k, H);
  if (r < 0) r = -1 - r, c += W / 2;                 // over the north pole
  else if (r >= H) r = 2 * H - 1 - r, c += W / 2;    // over the south pole
  c = ((c % W) + W) % W;
  return {r, c};
}

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
             shape_str(x.sizes()), shape_str(x.sizes()), describe(t));
    GS_CHECK(t.dtype() == x.dtype(), "{}: expected {} with x's dtype {}, got {}", op, what, dtype_name(x.dtype()),
             t.meta_str());
    kernels::check_same_device(x, t, op);
    return t.dim() == 2 ? reshape(t, {B, C, 1, 1}) : t;
  };
  Tensor s = modulation(scale, "the scale"), b = modulation(bias, "the bias");
  Tensor xhat = fused_norm(plan_for(x, NormAxis::channels, eps, op), x, Tensor(), Tensor());
  return add(mul(xhat, add(s, 1.0)), b);  // xhat * (1 + scale) + bias
}

Tensor conv1x1(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const char* op = "conv1x1";
  check_field(x, op);
  const int64_t B = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  GS_CHECK(weight.defined() && weight.dim() == 2 && weight.size(1) == Cin,
           "{}: expected a weight (Cout, Cin) = (Cout, {}) for x {}, got {}", op, Cin, shape_str(x.sizes()),
           describe(weight));
  GS_CHECK(weight.dtype() == x.dtype(), "{}: expected the weight with x's dtype {}, got {}", op, dtype_name(x.dtype()),
           weight.meta_str());
  const int64_t Cout = weight.size(0);
  if (bias.defined())
    GS_CHECK(bias.dim() == 1 && bias.size(0) == Cout && bias.dtype() == x.dtype(),
             "{}: expected a bias {} of dtype {} for a weight {}, got {}", op, shape_str({Cout}), dtype_name(x.dtype()),
             shape_str(weight.sizes()), bias.meta_str());
  Tensor y = reshape(matmul(weight, reshape(x, {B, Cin, H * W})), {B, Cout, H, W});  // (Cout, Cin) @ (B, Cin, HW)
  return bias.defined() ? add(y, reshape(bias, {Cout, 1, 1})) : y;
}

Tensor sphere_neighbours3x3(const Tensor& x) {
  check_field(x, "sphere_neighbours3x3");
  check_even_lon(x, "sphere_neighbours3x3");
  return neighbours_gather(x);
}

Tensor local_conv3x3(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  const char* op = "local_conv3x3";
  check_field(x, op);
  check_even_lon(x, op);
  const int64_t B = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  GS_CHECK(weight.defined() && weight.dim() == 4 && weight.size(1) == Cin && weight.size(2) == 3 && weight.size(3) == 3,
           "{}: expected a weight (Cout, Cin, 3, 3) = (Cout, {}, 3, 3) for x {}, got {}", op, Cin, shape_str(x.sizes()),
           describe(weight));
  GS_CHECK(weight.dtype() == x.dtype(), "{}: expected the weight with x's dtype {}, got {}", op, dtype_name(x.dtype()),
           weight.meta_str());
  const int64_t Cout = weight.size(0);
  if (bias.defined())
    GS_CHECK(bias.dim() == 1 && bias.size(0) == Cout && bias.dtype() == x.dtype(),
             "{}: expected a bias {} of dtype {} for a weight {}, got {}", op, shape_str({Cout}), dtype_name(x.dtype()),
             shape_str(weight.sizes()), bias.meta_str());
  Tensor cols = reshape(neighbours_gather(x), {B, Cin * kTaps, H * W});               // (B, Cin*9, HW)
  Tensor y = reshape(matmul(reshape(weight, {Cout, Cin * kTaps}), cols), {B, Cout, H, W});
  return bias.defined() ? add(y, reshape(bias, {Cout, 1, 1})) : y;
}

Tensor area_weighted_mean(const Tensor& x, const Tensor& area_weights) {
  const char* op = "area_weighted_mean";
  GS_CHECK(x.defined() && x.dim() >= 2 && is_floating(x.dtype()),
           "{}: expected x (..., H, W) of f32 or f64 with at least 2 dims, got {}", op, describe(x));
  kernels::check_cpu(x, op);
  Tensor a = row_weights(area_weights, x, op, "the area weights (H)");  // (H, 1)
  return sum(mul(mean(x, {-1}, true), a), {-2, -1});
}

Tensor area_weighted_mean(const Tensor& x, const std::vector<double>& area_weights) {
  GS_CHECK(x.defined(), "area_weighted_mean: x is an undefined tensor");
  return area_weighted_mean(x, to(from_vector(area_weights), x.dtype()));
}

Tensor area_weighted_mse(const Tensor& pred, const Tensor& target, const Tensor& area_weights) {
  const char* op = "area_weighted_mse";
  GS_CHECK(pred.defined() && target.defined(), "{}: pred and target must be defined, got {} and {}", op, describe(pred),
           describe(target));
  GS_CHECK(pred.sizes() == target.sizes(), "{}: expected target with pred's shape {}, got {}", op,
           shape_str(pred.sizes()), shape_str(target.sizes()));
  GS_CHECK(pred.dtype() == target.dtype(), "{}: expected target with pred's dtype {}, got {}", op,
           dtype_name(pred.dtype()), target.meta_str());
  Tensor d = sub(pred, target);
  return mean(area_weighted_mean(mul(d, d), area_weights));
}

Tensor area_weighted_mse(const Tensor& pred, const Tensor& target, const std::vector<double>& area_weights) {
  GS_CHECK(pred.defined(), "area_weighted_mse: pred is an undefined tensor");
  return area_weighted_mse(pred, target, to(from_vector(area_weights), pred.dtype()));
}

namespace {

using V = std::vector<Tensor>;
RandomKey sub_key(RandomKey k, uint64_t s) { return {k.seed, k.stream * 100 + s}; }

// Positive weights for the row-weighted ops (constants: no grad).
Tensor positive_rows(int64_t H, RandomKey k) {
  Tensor t = rand({H}, k, DType::f64);
  double* p = t.data<double>();
  for (int64_t i = 0; i < H; ++i) p[i] = 0.25 + p[i];
  return t;
}

const OpRegistrar registrar{
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
    {"conv1x1",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"bias", {sample_leaf({2, 3, 2, 3}, sub_key(k, 1)), sample_leaf({2, 3}, sub_key(k, 2)), sample_leaf({2}, sub_key(k, 3))}},
           {"no bias, non-contiguous", {sample_leaf_transposed({2, 3, 3, 2}, sub_key(k, 4)), sample_leaf({2, 3}, sub_key(k, 5))}}};
     },
     [](const V& x) { return V{conv1x1(x[0], x[1], x.size() > 2 ? x[2] : Tensor())}; }},
    {"local_conv3x3",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"bias", {sample_leaf({2, 2, 3, 4}, sub_key(k, 1)), sample_leaf({2, 2, 3, 3}, sub_key(k, 2)), sample_leaf({2}, sub_key(k, 3))}},
           {"one row, no bias", {sample_leaf({1, 1, 1, 2}, sub_key(k, 4)), sample_leaf({2, 1, 3, 3}, sub_key(k, 5))}}};
     },
     [](const V& x) { return V{local_conv3x3(x[0], x[1], x.size() > 2 ? x[2] : Tensor())}; }},
    {"sphere_neighbours3x3",
     [](RandomKey k) { return std::vector<OpSample>{{"3x4 grid", {sample_leaf({1, 2, 3, 4}, sub_key(k, 1))}}}; },
     [](const V& x) { return V{sphere_neighbours3x3(x[0])}; }},
    {"area_weighted_mean",
     [](RandomKey k) {
       return std::vector<OpSample>{{"(B, C, H, W)", {sample_leaf({2, 2, 3, 4}, sub_key(k, 1)), positive_rows(3, sub_key(k, 2))}},
                                    {"2-D, weights with grad", {sample_leaf({3, 2}, sub_key(k, 3)), sample_leaf_in({3}, sub_key(k, 4), 0.5, 1.5)}}};
     },
     [](const V& x) { return V{area_weighted_mean(x[0], x[1])}; }},
    {"area_weighted_mse",
     [](RandomKey k) {
       return std::vector<OpSample>{{"(B, C, H, W)", {sample_leaf({2, 2, 3, 2}, sub_key(k, 1)), sample_leaf({2, 2, 3, 2}, sub_key(k, 2)),
                                                     positive_rows(3, sub_key(k, 3))}}};
     },
     [](const V& x) { return V{area_weighted_mse(x[0], x[1], x[2])}; }},
};

}  // namespace
}  // namespace gs::sphere
