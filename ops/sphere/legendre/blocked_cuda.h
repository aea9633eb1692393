// Launchers of the blocked-table Legendre kernels on CUDA (blocked_cuda.cu), plain
// arguments as ops/elementwise_cuda.h. Each returns false for a dtype other than f32 / f64 (the
// table's real dtype; the data is the complex dtype of it, interleaved).
#pragma once
#include <cstdint>

#include "engine/dtype_code.h"

namespace gs::cuda_kernels {

// The table as blocked_math.h's TableView, with untyped values; every pointer on the device.
struct BlockedTableArgs {
  const void* values;
  const int64_t* block_offset;
  const int64_t* block_first_row;
  int64_t lanes, n_even, n_odd, nlat, lmax, m_begin, orders;
  int parity;
};

// A (batch, lmax, orders) from X (batch, nlat, orders), both contiguous complex.
bool legendre_blocked_to_degree(DType real, const BlockedTableArgs& t, const void* X, void* A, int64_t batch,
                                void* stream);
// X (batch, nlat, orders) from A (batch, lmax, orders), both contiguous complex.
bool legendre_blocked_to_latitude(DType real, const BlockedTableArgs& t, const void* A, void* X, int64_t batch,
                                  void* stream);

}  // namespace gs::cuda_kernels
