// The SFNO's grid-space blocks on a sphere split over a process grid: each rank holds a tile
// (B, C, rows, cols) = grid.local_lat(nlat) x grid.local_lon(nlon) (sphere_transforms.h). On a
// grid that does not split the sphere every function is the one-process op itself.
//
//   instance_norm        statistics over the whole sphere: partial sums (f64) all-reduced over the
//                        spatial group, two passes (mean, then the mean square deviation about it),
//                        so partial means and variances merge without cancellation
//   local_conv3x3        the pole-aware 3x3 convolution through halo_exchange (one-row halo)
//   area_weighted_mean   / area_weighted_mse: local quadrature sums through reduce_replicated: the
//                        result is replicated over the spatial group and counts once
//   randn_tile           a Gaussian field drawn by global element index: equal on every decomposition
//
// Every statistic used per rank is formed as copy_to_group(reduce_replicated(partial)): forward an
// all-reduce, backward an all-reduce, which is the gradient of a global sum read on every rank.
#pragma once
#include <vector>

#include "distributed/process_grid.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace gs::dist {

// sphere::instance_norm_sphere on the whole sphere (nlat x nlon) from this rank's tile x.
// quad_weights: the global (nlat) quadrature weights or undefined (uniform); weight, bias (C).
Tensor instance_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps, const Tensor& quad_weights,
                     int64_t nlat, int64_t nlon, const ProcessGrid& grid);

// torch-harmonics' layer_norm over the grid (nn.LayerNorm((H, W))) on the split sphere: the
// uniform statistics of instance_norm, then this rank's tile of the (H, W) affine weight and bias
// (each (rows, cols) or undefined).
Tensor grid_layer_norm(const Tensor& x, const Tensor& weight_tile, const Tensor& bias_tile, double eps, int64_t nlat,
                       int64_t nlon, const ProcessGrid& grid);

// sphere::local_conv3x3 on the whole sphere from this rank's tile (nlon even).
Tensor local_conv3x3(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t nlat, int64_t nlon,
                     const ProcessGrid& grid);

// sphere::area_weighted_mean / area_weighted_mse of the whole sphere; area_weights has nlat
// entries (global). The result is replicated over the spatial group.
Tensor area_weighted_mean(const Tensor& x, const std::vector<double>& area_weights, int64_t nlon,
                          const ProcessGrid& grid);
Tensor area_weighted_mse(const Tensor& pred, const Tensor& target, const std::vector<double>& area_weights,
                         int64_t nlon, const ProcessGrid& grid);

// This rank's tile of randn({lead..., nlat, nlon}, key, dtype): the same values as the field drawn
// whole on one process. first_sample offsets dim 0 (the samples): the tile holds global samples
// first_sample .. first_sample + lead[0] - 1, whose values do not depend on how many follow.
Tensor randn_tile(const Shape& lead, int64_t nlat, int64_t nlon, RandomKey key, DType dtype, const ProcessGrid& grid,
                  int64_t first_sample = 0);
// This rank's (degrees, orders) block of randn({lead..., lmax, mmax}, key, dtype), likewise.
Tensor randn_coeff_block(const Shape& lead, int64_t lmax, int64_t mmax, RandomKey key, DType dtype,
                         const ProcessGrid& grid, int64_t first_sample = 0);

}  // namespace gs::dist
