// The spherical harmonic transforms on a sphere split over a process grid (torch-harmonics'
// DistributedRealSHT and friends, by transposes). A rank of the grid holds
//   a field tile        (..., rows, cols):       grid.local_lat(nlat) x grid.local_lon(nlon)
//   a coefficient tile  (..., degrees, orders):  local_degrees(grid, lmax) x local_orders(grid, mmax)
// (h splits latitude and degree l, w splits longitude and order m; blocks follow split_block). The
// data group plays no part: each data replica transforms its own fields.
//
// sht, step by step (the inverse runs the same steps backwards):
//   1. over w, move the split from longitude to the fields (all-to-all): full rows of some fields;
//   2. the longitude FFT on full rows (the one-process kernel);
//   3. over w, move the split from the fields to the orders: every field, this rank's orders;
//   4. over h, move the split from latitude to the fields: full columns of some fields;
//   5. the Legendre contraction of this rank's orders on full columns (legendre_analysis_orders,
//      whose table holds only those orders);
//   6. over h, move the split from the fields to the degrees.
// Every step is a tape op whose backward is its adjoint (the inverse transposes, the FFT's and the
// contraction's dedicated adjoint kernels), so gradients of any order follow. The fields are every
// leading dim flattened (batch x channels), so a channel count smaller than a group is fine (some
// ranks transform no field in steps 2 and 5). Pure data movement around the one-process kernels
// on full rows and columns: the result equals one process value for value.
#pragma once
#include <cstddef>

#include "distributed/process_grid.h"
#include "engine/tensor.h"
#include "ops/sphere/sht.h"

namespace gs::dist {

// This rank's degrees (over h) and orders (over w) of a coefficient block.
Block local_degrees(const ProcessGrid& grid, int64_t lmax);
Block local_orders(const ProcessGrid& grid, int64_t mmax);

// x (..., rows, cols) real -> (..., degrees, orders) complex; sphere::sht on the whole sphere.
Tensor sht(const Tensor& x, const sphere::ShtSpec& spec, const ProcessGrid& grid);
// coeffs (..., degrees, orders) complex -> (..., rows, cols) real; sphere::isht on the whole sphere.
Tensor isht(const Tensor& coeffs, const sphere::ShtSpec& spec, const ProcessGrid& grid);
// The vector transforms: (..., 2, rows, cols) <-> (..., 2, degrees, orders) (sphere::vector_sht).
Tensor vector_sht(const Tensor& uv, const sphere::ShtSpec& spec, const ProcessGrid& grid);
Tensor ivector_sht(const Tensor& coeffs, const sphere::ShtSpec& spec, const ProcessGrid& grid);

// The bytes of the Legendre tables this rank holds for one direction (analysis or synthesis) of
// the scalar (or vector) transform in `dtype`: the slice of its orders. One process holds the
// whole table (ShtSpec with a one-process grid).
size_t sht_table_bytes(const sphere::ShtSpec& spec, DType dtype, bool analysis, bool vector, const ProcessGrid& grid);

// The minimum bytes one rank must send for one scalar transform of `fields` fields of `dtype`
// (real) by transposes: what leaves the rank in the four all-to-alls when every block is as even
// as the split allows (the figure `gradsphere bench dist` compares with what was sent).
size_t sht_min_bytes_sent(const sphere::ShtSpec& spec, int64_t fields, DType dtype, const ProcessGrid& grid);

}  // namespace gs::dist
