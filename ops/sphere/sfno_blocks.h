// The grid-space building blocks of an SFNO block: normalisations, pointwise channel mixing, a
// pole-aware local 3x3 convolution, and ACE's area-weighted mean and MSE. All are differentiable
// twice. Fields are (B, C, H, W), latitude row 0 at the north pole (DESIGN.md); f32 or f64.
// Decisions and conventions: ops/sphere/NOTES.md ("SFNO blocks").
#pragma once
#include <vector>

#include "engine/tensor.h"

namespace gs::sphere {

// ---- normalisations. Variances are biased (divide by the count), as torch's LayerNorm and
// InstanceNorm; eps is added to the variance. weight and bias are optional (undefined: no affine),
// each (C) with x's dtype.

// LayerNorm over the channel dim, per pixel: y = (x - mean_c) / sqrt(var_c + eps) * weight + bias,
// as torch-harmonics' LayerNorm wrapper on (B, C, H, W) (C moved last, nn.LayerNorm(C), moved back;
// note that wrapper hard-codes eps = 1e-6 whatever it is given).
Tensor layer_norm_channels(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5);

// Normalise each (b, c) over the sphere. Without quad_weights: uniform mean and variance over the
// H*W grid points (nn.InstanceNorm2d). With quad_weights (H), non-negative, any scale, constants (a
// tensor that requires grad is refused): mean and variance are quadrature integrals over the
// sphere, sum_h q_h mean_w(.) with q normalised to sum to 1. Pass the grid's quadrature weights
// (make_quadrature(...).weights) for the area-weighted variant.
Tensor instance_norm_sphere(const Tensor& x, const Tensor& weight = {}, const Tensor& bias = {}, double eps = 1e-5,
                            const Tensor& quad_weights = {});

// ACE's conditional layer norm: xhat = LayerNorm over channels (no affine), then
//   y = xhat * (1 + scale) + bias,
// scale and bias computed by the caller from the context, each (B, C) (one value per channel, as
// ACE's scalar embedding) or (B, C, H, W) (ACE's 2-D embedding path). Note the 1 +: ACE's module
// multiplies by its scale directly and starts its W_scale bias at 1; pass (ACE's scale - 1).
Tensor conditional_layer_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, double eps = 1e-5);

// ---- channel mixing and local convolution (weights f32 or f64 with x's dtype)

// y[b,o,h,w] = sum_i weight[o,i] x[b,i,h,w] + bias[o]: a 1x1 convolution (nn.Conv2d(Cin, Cout, 1)),
// one GEMM per batch entry through gs::matmul. weight (Cout, Cin), bias (Cout) optional.
Tensor conv1x1(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// A 3x3 convolution on the lat-lon grid, as nn.Conv2d(Cin, Cout, 3, padding=1) (cross-correlation:
// y[b,o,h,w] = sum_{i,dh,dw} weight[o,i,dh,dw] xs[b,i,h+dh-1,w+dw-1] + bias[o]) except for what
// lies beyond the grid's edges (sphere_neighbour_index):
//   - longitude is periodic: column -1 is column W-1, column W is column 0;
//   - across a pole, the row beyond row 0 is row 0 itself, rotated by half a turn: xs[-1, w] =
//     x[0, (w + W/2) mod W], and likewise xs[H, w] = x[H-1, (w + W/2) mod W]. This is exact on grids
//     whose first row sits half a row spacing from the pole (colatitudes (j + 1/2) pi / H), where
//     reflecting through the pole lands on row 0 itself. W must be even.
// weight (Cout, Cin, 3, 3), bias (Cout) optional. Dedicated gather / scatter-add kernels feed a GEMM.
Tensor local_conv3x3(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

// The pole-aware neighbourhood gather behind local_conv3x3: x (B, C, H, W) -> (B, C, 3, 3, H, W) with
// out[b,c,dh,dw,h,w] = xs[b,c,h+dh-1,w+dw-1], xs extended beyond the grid as above (W even).
Tensor sphere_neighbours3x3(const Tensor& x);

// For a kernel of size k (odd), the source grid point (row, col) that neighbour (dh, dw) of point
// (h, w) reads: rows beyond a pole reflect through it (row -1-r is row r, row H+r is row H-1-r) with
// the column rotated by W/2; columns wrap. Exposed for tests and for the halo exchange to agree with.
struct GridPoint {
  int64_t row, col;
};
GridPoint sphere_neighbour_index(int64_t h, int64_t w, int64_t dh, int64_t dw, int64_t H, int64_t W, int64_t k = 3);

// ---- area-weighted statistics (ACE's definitions, fme.core: weighted_mean and AreaWeightedMSELoss)

// x (..., H, W), area_weights (H), non-negative with a positive sum: sum_h a_h mean_w x[..., h, w] with
// a normalised to sum to 1. Returns (...). Use area_weights_coslat (grids.h) for ACE's cos-lat weights.
Tensor area_weighted_mean(const Tensor& x, const Tensor& area_weights);
Tensor area_weighted_mean(const Tensor& x, const std::vector<double>& area_weights);

// mean over every leading dim (batch, channels) of area_weighted_mean((pred - target)^2): a 0-dim tensor.
Tensor area_weighted_mse(const Tensor& pred, const Tensor& target, const Tensor& area_weights);
Tensor area_weighted_mse(const Tensor& pred, const Tensor& target, const std::vector<double>& area_weights);

}  // namespace gs::sphere
