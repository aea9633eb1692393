// The all-to-all behind a transpose of a split, with every rank's block sizes given explicitly:
// collectives.cpp's transpose (blocks by split_block) and the pipelined SHT (pipelined_sht.h, whose
// chunks hold any rank's share of a chunk of the fields) both run through it, so both pack, move
// and count the same bytes the same way. Non-blocking: start it, compute, then finish it.
#pragma once
#include <cstdint>
#include <vector>

#include "distributed/communicator.h"
#include "engine/tensor.h"

namespace gs::dist {

// x holds from_counts[me] indices along `from` and the whole of `to` (the sum of to_counts); the
// result holds the whole of `from` (the sum of from_counts, rank r's block after rank r-1's) and
// to_counts[me] indices along `to`. The all-to-all goes through comm (replica checker included)
// and its bytes sent to other ranks are counted as transpose traffic (collective_traffic()).
class BlockTranspose {
 public:
  BlockTranspose(const Tensor& x, int64_t from, int64_t to, std::vector<int64_t> from_counts,
                 std::vector<int64_t> to_counts, Communicator& comm);
  // Polls the all-to-all (MPI progresses a non-blocking collective only inside its calls).
  bool test() { return work_->test(); }
  // Waits for the all-to-all and unpacks the result.
  Tensor finish();

 private:
  int64_t from_;
  std::vector<int64_t> from_counts_;
  std::vector<Shape> recv_shapes_;
  Shape out_shape_;
  Tensor recv_;
  WorkHandle work_;
};

// Every rank's block count of `n` split over `parts` (split_block).
std::vector<int64_t> split_counts(int64_t n, int parts);

}  // namespace gs::dist
