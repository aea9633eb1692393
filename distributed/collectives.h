// What you can do here: move tensors between the ranks of a communicator inside a differentiable
// program (sum partial results, gather or scatter the blocks of a split dim, transpose a split, fill
// halos) and get correct gradients back through each move.
//
// Collectives as tape ops, in conjugate pairs (DESIGN.md "Distribution"; Megatron's mappings and
// torch-harmonics' distributed primitives). Each backward rule is the op's partner, itself a tape
// op, so gradients of gradients flow through them (create_graph).
//
// The semantics a distributed gradient relies on: a tensor is either *replicated* over a group
// (every rank holds the same value, which counts once) or *per rank* (each rank holds its own
// piece: a block of a split dim, or a partial sum). The gradient of a replicated tensor is itself
// replicated; that of a per-rank tensor is per rank.
//
//   op                  forward                                 backward
//   reduce_replicated   per rank -> replicated: all-reduce sum   identity (copy_to_group)
//   copy_to_group       replicated -> per rank: identity         all-reduce sum (reduce_replicated)
//   gather_along        blocks of a dim -> replicated whole      take the local block (scatter_along)
//   scatter_along       replicated whole -> the local block      gather the blocks (gather_along)
//   transpose           split along dim a -> split along dim b   transpose back
//   halo_exchange       tile -> tile with halo rows/columns      add halo gradients onto their owners
//
// Summing in reduce_replicated's backward would multiply the gradient by the group size: the
// seed's double-counting bug (tools/examples/seed_double_count.cpp shows the factor).
// Blocks follow split_block (process_grid.h): the first n % k ranks hold one more index.
#pragma once
#include <cstdint>

#include "distributed/communicator.h"
#include "distributed/process_grid.h"
#include "engine/tensor.h"

namespace gs::dist {

Tensor reduce_replicated(const Tensor& x, const CommPtr& comm);
Tensor copy_to_group(const Tensor& x, const CommPtr& comm);

// x holds this rank's block of a dim of `global_size` along `dim`; every rank gets the whole.
Tensor gather_along(const Tensor& x, int64_t dim, int64_t global_size, const CommPtr& comm);
// x (replicated) is cut along `dim`; this rank keeps its block.
Tensor scatter_along(const Tensor& x, int64_t dim, const CommPtr& comm);

// x is split along `from_dim` (this rank's block of `from_global` indices) and whole along
// `to_dim`; the result is whole along `from_dim` and split along `to_dim`. An all-to-all.
Tensor transpose(const Tensor& x, int64_t from_dim, int64_t to_dim, int64_t from_global, const CommPtr& comm);
// The bytes this process has moved through the collective tape ops so far, forward and backward
// (cumulative, for benchmarks: the difference across a call is what the call moved): what the
// transposes and the halo exchanges sent to other ranks, and the payload of reduce_replicated's
// all-reduces (copy_to_group's backward is one).
struct CollectiveTraffic {
  int64_t transpose = 0, halo = 0, all_reduce = 0;
};
CollectiveTraffic collective_traffic();
// Internal: the ops add what they move.
void count_traffic(int64_t CollectiveTraffic::*kind, int64_t bytes);

// A tile (..., rows, cols) of a (nlat, nlon) field split over grid's h (rows) and w (columns)
// groups -> (..., rows + 2 halo_rows, cols + 2 halo_cols) with the halo filled from the
// neighbouring tiles, as local_conv3x3 sees the sphere (ops/sphere/sfno_blocks.h): longitude is
// periodic, and a row beyond a pole is the row mirrored through it, turned by half a revolution
// (nlon must be even when halo_rows > 0). The exchange runs over grid's spatial group.
Tensor halo_exchange(const Tensor& x, const ProcessGrid& grid, int64_t halo_rows, int64_t halo_cols, int64_t nlat,
                     int64_t nlon);
// Its adjoint: g (..., rows + 2 halo_rows, cols + 2 halo_cols) -> (..., rows, cols), the interior
// plus every halo value added onto the tile that owns its point.
Tensor halo_exchange_adjoint(const Tensor& g, const ProcessGrid& grid, int64_t halo_rows, int64_t halo_cols,
                             int64_t nlat, int64_t nlon);

// The source grid point of halo point (row, col) (global, possibly outside the grid) under the
// sphere rule above.
struct HaloSource {
  int64_t row, col;
};
HaloSource halo_source(int64_t row, int64_t col, int64_t nlat, int64_t nlon);

}  // namespace gs::dist
