// The Legendre contractions on a device from the CPU's blocked table itself (table.h: northern
// rows, l >= m, dropped polar values), with one thread per output value (blocked_math.h,
// blocked_cuda.cu): the triangular structure and the equatorial symmetry halve the work twice
// over against the dense GEMM form (gemm.h), and the table on the device is the CPU's size instead
// of about four times it. On the CPU the same arithmetic runs in plain loops, which is how the CPU
// suites test it. This is the path device_kernels of path.h.
#pragma once
#include <memory>

#include "engine/tensor.h"
#include "ops/sphere/legendre/table.h"

namespace gs::sphere {

namespace detail {

// x (..., rows_in, orders) complex of tab's real dtype, on the CPU or a CUDA device: to_degree
// (rows_in = nlat) gives (..., lmax, orders), otherwise (rows_in = lmax) (..., nlat, orders), as
// legendre_contract_gemm. The table's values (and its block offsets) are copied to x's device
// once, cached per (table, device) in a KeyedCache, and dropped by clear_legendre_cache.
// Not recorded on the tape: the callers record the contraction as one op.
Tensor legendre_contract_blocked(const Tensor& x, const std::shared_ptr<const LegendreTable>& tab, bool to_degree);

// Drops every cached device copy (clear_legendre_cache calls it); returns the bytes they held.
size_t clear_device_blocked_tables();

}  // namespace detail
}  // namespace gs::sphere
