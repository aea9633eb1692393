// The process grid: how world ranks split into data-parallel replicas and a spatial (h, w) grid.
// Models see distribution only through this type (DESIGN.md); for one process every size is 1, so
// model code written against it runs unchanged when the distributed layer decomposes the sphere.
#pragma once
#include <cstdint>
#include <string>

namespace gs::dist {

// A contiguous block [start, start + count) of an index range split into `parts`.
struct Block {
  int64_t start = 0;
  int64_t count = 0;
};

// Splits n into `parts` blocks; the first n % parts blocks get one more element (DESIGN.md).
Block split_block(int64_t n, int64_t parts, int64_t index);

class ProcessGrid {
 public:
  // One process: data = h = w = 1.
  ProcessGrid() = default;
  // Row-major over world ranks: rank = (d * h + i) * w + j. Throws unless every size is >= 1 and
  // rank < data * h * w.
  ProcessGrid(int64_t data, int64_t h, int64_t w, int64_t world_rank);

  int64_t data_size() const { return data_; }
  int64_t h_size() const { return h_; }
  int64_t w_size() const { return w_; }
  int64_t world_size() const { return data_ * h_ * w_; }
  int64_t world_rank() const { return rank_; }
  int64_t data_rank() const { return rank_ / (h_ * w_); }
  int64_t h_rank() const { return (rank_ / w_) % h_; }
  int64_t w_rank() const { return rank_ % w_; }
  bool is_single_process() const { return world_size() == 1; }
  bool spatially_split() const { return h_ * w_ > 1; }
  // Rank 0 writes files and reports; every other rank stays quiet.
  bool is_root() const { return rank_ == 0; }

  // This rank's latitude rows of an nlat-row grid, and its longitude columns of nlon.
  Block local_lat(int64_t nlat) const { return split_block(nlat, h_, h_rank()); }
  Block local_lon(int64_t nlon) const { return split_block(nlon, w_, w_rank()); }

  std::string str() const;  // "data 1 x h 1 x w 1, rank 0"

 private:
  int64_t data_ = 1, h_ = 1, w_ = 1, rank_ = 0;
};

}  // namespace gs::dist
