// Sharded tensors: the part of a whole tensor a rank holds under a Distribution (distribution.h),
// and the whole put back together from the parts. How parameters are cut from the one-process
// values at construction, and how checkpoints are written and read on any grid.
#pragma once
#include "distributed/distribution.h"
#include "distributed/process_grid.h"
#include "engine/tensor.h"

namespace gs::dist {

// This rank's part of `whole` (the same on every rank): dim h_dim cut by split_block over h,
// dim w_dim over w. A fresh contiguous tensor. A grid that does not split a dim keeps it whole.
Tensor local_shard(const Tensor& whole, const Distribution& d, const ProcessGrid& grid);

// The whole tensor from every rank's shard (collective over the h and w groups of the grid): the
// inverse of local_shard, replicated on every rank. No history (for checkpoints, not for training).
Tensor gather_shards(const Tensor& shard, const Distribution& d, const ProcessGrid& grid);

}  // namespace gs::dist
