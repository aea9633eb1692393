// The grid-space blocks on the split sphere (sphere_blocks.h), composed of tape ops: local sums,
// the collectives, elementwise ops; their gradients (of any order) follow from those of the parts.
#include "distributed/sphere_blocks.h"

#include <cmath>

#include "distributed/collectives.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/shape_ops.h"
#include "ops/sphere/sfno_blocks.h"
#include "ops/view.h"

namespace gs::dist {
namespace {

void check_tile(const Tensor& x, int64_t min_dim, int64_t nlat, int64_t nlon, const ProcessGrid& grid, const char* op) {
  const int64_t rows = grid.local_lat(nlat).count, cols = grid.local_lon(nlon).count;
  GS_CHECK(x.defined() && x.dim() >= min_dim && x.size(-2) == rows && x.size(-1) == cols,
           "dist::{}: expected this rank's tile (..., {}, {}) of a {}x{} field on grid {} (at least {} dims), got {}",
           op, rows, cols, nlat, nlon, grid.str(), min_dim, x.defined() ? x.meta_str() : "an undefined tensor");
}

// The weight of each of this rank's rows in a sum over the sphere, (rows, 1) in dtype: q_h / (sum q
// * nlon), so that the sum over every grid point of every rank is 1.
Tensor row_weights(const std::vector<double>& q, int64_t nlon, const ProcessGrid& grid, DType dtype, const char* op) {
  const int64_t nlat = static_cast<int64_t>(q.size());
  double total = 0;
  for (double v : q) {
    GS_CHECK(v >= 0 && std::isfinite(v), "dist::{}: expected non-negative finite row weights, got {}", op, v);
    total += v;
  }
  GS_CHECK(total > 0, "dist::{}: the row weights sum to {}; expected a positive sum", op, total);
  const Block rows = grid.local_lat(nlat);
  std::vector<double> mine(static_cast<size_t>(rows.count));
  for (int64_t i = 0; i < rows.count; ++i)
    mine[static_cast<size_t>(i)] = q[static_cast<size_t>(rows.start + i)] / (total * static_cast<double>(nlon));
  return cast_copy(from_vector(mine, {rows.count, 1}), dtype);
}

// A sum over the whole sphere read on every rank: forward and backward all-reduces.
Tensor sphere_sum(const Tensor& partial, const ProcessGrid& grid) {
  const CommPtr& spatial = grid.comm(Group::spatial);
  return copy_to_group(reduce_replicated(partial, spatial), spatial);
}

// The normalised field (x - mean) / sqrt(var + eps) per (b, c), statistics over the sphere with
// row weights q (nlat), in f64; returned in x's dtype.
Tensor normalise_over_sphere(const Tensor& x, const std::vector<double>& q, double eps, int64_t nlon,
                             const ProcessGrid& grid, const char* op) {
  const int64_t B = x.size(0), C = x.size(1);
  const Tensor rw = row_weights(q, nlon, grid, DType::f64, op);
  const Tensor x64 = to(x, DType::f64);
  const Tensor mean = reshape(sphere_sum(sum(mul(x64, rw), {2, 3}), grid), {B, C, 1, 1});
  const Tensor d = sub(x64, mean);
  const Tensor var = reshape(sphere_sum(sum(mul(square(d), rw), {2, 3}), grid), {B, C, 1, 1});
  return to(mul(d, rsqrt(add(var, eps))), x.dtype());
}

std::vector<double> quadrature_of(const Tensor& quad_weights, int64_t nlat, const char* op) {
  if (!quad_weights.defined()) return std::vector<double>(static_cast<size_t>(nlat), 1.0);
  GS_CHECK(!quad_weights.requires_grad(),
           "dist::{}: the quadrature weights are constants and get no gradient, got a tensor that requires grad", op);
  GS_CHECK(quad_weights.dim() == 1 && quad_weights.size(0) == nlat,
           "dist::{}: expected the global quadrature weights ({}), got {}", op, nlat, quad_weights.meta_str());
  return cast_copy(quad_weights.detach(), DType::f64).to_vector<double>();
}

}  // namespace

Tensor instance_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& quad_weights,
                     int64_t nlat, int64_t nlon, const ProcessGrid& grid) {
  if (!grid.spatially_split()) return sphere::instance_norm_sphere(x, weight, bias, eps, quad_weights);
  const char* op = "instance_norm";
  check_tile(x, 4, nlat, nlon, grid, op);
  GS_CHECK(x.dim() == 4 && is_floating(x.dtype()), "dist::{}: expected a real (B, C, rows, cols) tile, got {}", op,
           x.meta_str());
  GS_CHECK(eps >= 0 && std::isfinite(eps), "dist::{}: expected a finite eps >= 0, got {}", op, eps);
  Tensor y = normalise_over_sphere(x, quadrature_of(quad_weights, nlat, op), eps, nlon, grid, op);
  const int64_t C = x.size(1);
  for (const Tensor* p : {&weight, &bias})
    if (p->defined())
      GS_CHECK(p->dim() == 1 && p->size(0) == C && p->dtype() == x.dtype(),
               "dist::{}: expected an affine parameter ({}) of dtype {}, got {}", op, C, dtype_name(x.dtype()),
               p->meta_str());
  if (weight.defined()) y = mul(y, reshape(weight, {1, C, 1, 1}));
  if (bias.defined()) y = add(y, reshape(bias, {1, C, 1, 1}));
  return y;
}

Tensor grid_layer_norm(const Tensor& x, const Tensor& weight_tile, const Tensor& bias_tile, double eps, int64_t nlat,
                       int64_t nlon, const ProcessGrid& grid) {
  const char* op = "grid_layer_norm";
  check_tile(x, 4, nlat, nlon, grid, op);
  Tensor y = grid.spatially_split() ? normalise_over_sphere(x, std::vector<double>(static_cast<size_t>(nlat), 1.0), eps,
                                                            nlon, grid, op)
                                    : sphere::instance_norm_sphere(x, {}, {}, eps);
  if (weight_tile.defined()) y = mul(y, weight_tile);
  if (bias_tile.defined()) y = add(y, bias_tile);
  return y;
}

Tensor local_conv3x3(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t nlat, int64_t nlon,
                     const ProcessGrid& grid) {
  if (!grid.spatially_split()) return sphere::local_conv3x3(x, weight, bias);
  const char* op = "local_conv3x3";
  check_tile(x, 4, nlat, nlon, grid, op);
  GS_CHECK(weight.defined() && weight.dim() == 4 && weight.size(1) == x.size(1) && weight.size(2) == 3 &&
               weight.size(3) == 3 && weight.dtype() == x.dtype(),
           "dist::{}: expected a weight (Cout, {}, 3, 3) of dtype {}, got {}", op, x.size(1), dtype_name(x.dtype()),
           weight.defined() ? weight.meta_str() : "an undefined tensor");
  const int64_t rows = x.size(2), cols = x.size(3);
  // xh[r, c] = the sphere's x[r - 1, c - 1] around the tile; output (h, w) reads xh[h + dh, w + dw].
  const Tensor xh = halo_exchange(x, grid, 1, 1, nlat, nlon);
  Tensor y;
  for (int64_t dh = 0; dh < 3; ++dh)
    for (int64_t dw = 0; dw < 3; ++dw) {
      const Tensor window = narrow(narrow(xh, 2, dh, rows), 3, dw, cols);
      const Tensor tap = select(select(weight, 3, dw), 2, dh);  // (Cout, Cin)
      const Tensor part = sphere::conv1x1(window, tap);
      y = y.defined() ? add(y, part) : part;
    }
  if (bias.defined()) y = add(y, reshape(bias, {1, bias.numel(), 1, 1}));
  return y;
}

Tensor area_weighted_mean(const Tensor& x, const std::vector<double>& area_weights, int64_t nlon,
                          const ProcessGrid& grid) {
  const int64_t nlat = static_cast<int64_t>(area_weights.size());
  if (!grid.spatially_split()) return sphere::area_weighted_mean(x, area_weights);
  const char* op = "area_weighted_mean";
  check_tile(x, 2, nlat, nlon, grid, op);
  const Tensor partial = sum(mul(x, row_weights(area_weights, nlon, grid, x.dtype(), op)), {-2, -1});
  return reduce_replicated(partial, grid.comm(Group::spatial));
}

Tensor area_weighted_mse(const Tensor& pred, const Tensor& target, const std::vector<double>& area_weights,
                         int64_t nlon, const ProcessGrid& grid) {
  const int64_t nlat = static_cast<int64_t>(area_weights.size());
  if (!grid.spatially_split()) return sphere::area_weighted_mse(pred, target, area_weights);
  const char* op = "area_weighted_mse";
  check_tile(pred, 2, nlat, nlon, grid, op);
  GS_CHECK(target.defined() && target.sizes() == pred.sizes() && target.dtype() == pred.dtype(),
           "dist::{}: expected a target like the prediction {}, got {}", op, pred.meta_str(),
           target.defined() ? target.meta_str() : "an undefined tensor");
  // The mean over the leading dims (batch, channels) of each field's area-weighted mean.
  const Shape lead(pred.sizes().begin(), pred.sizes().end() - 2);
  const double count = static_cast<double>(numel_of(lead));
  const Tensor d = sub(pred, target);
  const Tensor partial = div(sum(mul(square(d), row_weights(area_weights, nlon, grid, pred.dtype(), op))), count);
  return reduce_replicated(partial, grid.comm(Group::spatial));
}

namespace {
// The window of randn for rows `r` and columns `c` of the trailing dims, samples from first_sample:
// row-major indices do not depend on the leading size, so the samples after the window do not matter.
Tensor randn_window(const Shape& lead, int64_t rows, int64_t cols, Block r, Block c, int64_t first_sample,
                    RandomKey key, DType dtype) {
  GS_CHECK(!lead.empty() && first_sample >= 0, "dist::randn: expected leading dims (samples, ...) and first_sample >= 0");
  RandomWindow win{lead, Shape(lead.size(), 0)};
  win.global_sizes[0] += first_sample;
  win.start[0] = first_sample;
  win.global_sizes.push_back(rows), win.global_sizes.push_back(cols);
  win.start.push_back(r.start), win.start.push_back(c.start);
  Shape local = lead;
  local.push_back(r.count), local.push_back(c.count);
  return randn(local, key, dtype, &win);
}
}  // namespace

Tensor randn_tile(const Shape& lead, int64_t nlat, int64_t nlon, RandomKey key, DType dtype, const ProcessGrid& grid,
                  int64_t first_sample) {
  return randn_window(lead, nlat, nlon, grid.local_lat(nlat), grid.local_lon(nlon), first_sample, key, dtype);
}

Tensor randn_coeff_block(const Shape& lead, int64_t lmax, int64_t mmax, RandomKey key, DType dtype,
                         const ProcessGrid& grid, int64_t first_sample) {
  return randn_window(lead, lmax, mmax, split_block(lmax, grid.h_size(), grid.h_rank()),
                      split_block(mmax, grid.w_size(), grid.w_rank()), first_sample, key, dtype);
}

}  // namespace gs::dist
