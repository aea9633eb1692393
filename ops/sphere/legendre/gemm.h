// The Legendre contractions as batched GEMMs: the path device_gemm of path.h (the other device
// path is blocked.h). Each
// order's table becomes a dense (lmax, nlat) matrix with both hemispheres written out and zeros
// where l < m and where the blocked table (table.h) dropped negligible values, so the
// products use exactly the CPU kernels' table values. Written with device-generic tensor ops
// (permute, matmul), so it runs, and is tested, on the CPU too.
#pragma once
#include <memory>

#include "engine/tensor.h"
#include "ops/sphere/legendre/table.h"

namespace gs::sphere::detail {

// tab's values as (orders, lmax, nlat) in its dtype on `device`: row l of order m holds T_l^m(x_j)
// at every grid row j (the southern rows from the northern ones by the table's parity). Read-only
// and cached per (table, device) in a KeyedCache until clear_legendre_cache.
Tensor dense_legendre_table(const std::shared_ptr<const LegendreTable>& tab, Device device);
// Drops every cached dense table (clear_legendre_cache calls it); returns the bytes they held.
size_t clear_dense_legendre_tables();

// x (..., rows_in, orders) complex contracted with dense (orders, lmax, nlat) of its real dtype on
// its device: to_degree (rows_in = nlat) gives (..., lmax, orders), out[l,m] = sum_j T[m,l,j] x[j,m];
// otherwise (rows_in = lmax) (..., nlat, orders), out[j,m] = sum_l T[m,l,j] x[l,m]. Not recorded
// on the tape: the callers record the contraction as one op.
Tensor legendre_contract_gemm(const Tensor& x, const Tensor& dense, bool to_degree);

}  // namespace gs::sphere::detail
