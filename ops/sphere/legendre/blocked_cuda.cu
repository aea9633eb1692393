// The blocked-table Legendre contractions on CUDA: one thread per output value (grid-stride), the
// order index fastest, so a warp reads consecutive orders of one table row (a block's lanes are
// contiguous) and of one data row. The arithmetic is blocked_math.h's, shared with the CPU.
#include "engine/cuda_types.cuh"
#include "ops/sphere/legendre/blocked_cuda.h"
#include "ops/sphere/legendre/blocked_math.h"

namespace gs::cuda_kernels {
namespace {

template <typename R>
sphere::blocked::TableView<R> view_of(const BlockedTableArgs& t) {
  return {static_cast<const R*>(t.values), t.block_offset, t.block_first_row, t.lanes, t.n_even, t.n_odd, t.nlat,
          t.lmax, t.m_begin, t.orders, t.parity};
}

template <typename R>
__global__ void to_degree_kernel(sphere::blocked::TableView<R> t, const R* X, R* A, int64_t batch) {
  GS_GRID_STRIDE(i, batch * t.lmax * t.orders) sphere::blocked::to_degree_at(t, X, A, i);
}

template <typename R>
__global__ void to_latitude_kernel(sphere::blocked::TableView<R> t, const R* A, R* X, int64_t batch) {
  GS_GRID_STRIDE(i, batch * t.n_even * t.orders) sphere::blocked::to_latitude_at(t, A, X, i);
}

template <typename R>
void launch_to_degree(const BlockedTableArgs& t, const void* X, void* A, int64_t batch, void* stream) {
  const int64_t n = batch * t.lmax * t.orders;
  if (n > 0)
    to_degree_kernel<R><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        view_of<R>(t), static_cast<const R*>(X), static_cast<R*>(A), batch);
}

template <typename R>
void launch_to_latitude(const BlockedTableArgs& t, const void* A, void* X, int64_t batch, void* stream) {
  const int64_t n = batch * t.n_even * t.orders;
  if (n > 0)
    to_latitude_kernel<R><<<blocks_for(n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
        view_of<R>(t), static_cast<const R*>(A), static_cast<R*>(X), batch);
}

}  // namespace

bool legendre_blocked_to_degree(DType real, const BlockedTableArgs& t, const void* X, void* A, int64_t batch,
                                void* stream) {
  if (real == DType::f32) return launch_to_degree<float>(t, X, A, batch, stream), true;
  if (real == DType::f64) return launch_to_degree<double>(t, X, A, batch, stream), true;
  return false;
}

bool legendre_blocked_to_latitude(DType real, const BlockedTableArgs& t, const void* A, void* X, int64_t batch,
                                  void* stream) {
  if (real == DType::f32) return launch_to_latitude<float>(t, A, X, batch, stream), true;
  if (real == DType::f64) return launch_to_latitude<double>(t, A, X, batch, stream), true;
  return false;
}

}  // namespace gs::cuda_kernels
