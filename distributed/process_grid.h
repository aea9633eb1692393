// The process grid: how world ranks split into data-parallel replicas and a spatial (h, w) grid.
// Models see distribution only through this type (DESIGN.md); for one process every size is 1, so
// model code written against it runs unchanged when the distributed layer decomposes the sphere.
//
// A grid made by ProcessGrid::create also owns the communicators of its groups (below); one made
// by the plain constructor describes a layout only (for computing another rank's blocks).
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace gs::dist {

// A contiguous block [start, start + count) of an index range split into `parts`.
struct Block {
  int64_t start = 0;
  int64_t count = 0;
};

// Splits n into `parts` blocks; the first n % parts blocks get one more element (DESIGN.md).
Block split_block(int64_t n, int64_t parts, int64_t index);

// The groups of a grid (e, d, i, j = ensemble, data, h and w coordinates; a replica is one (e, d)):
//   world     every rank
//   data      same (e, i, j): the data-parallel shards of the batch (for one set of members)
//   h         same (e, d, j): a column of tiles (latitude / degree l split)
//   w         same (e, d, i): a row of tiles (longitude / order m split)
//   spatial   same (e, d): the tiles of one replica (h x w)
//   data_w    same i: where an h-sharded parameter is replicated (ensemble x data x w)
//   data_h    same j: where a w-sharded parameter is replicated (ensemble x data x h)
//   ensemble  same (d, i, j): the ranks holding the other ensemble members of the same samples
//   replicas  same (i, j): where a replicated parameter is (ensemble x data)
// With one ensemble rank (E = 1) `replicas` is `data`, and every group is what a DxHxW grid had.
enum class Group { world, data, h, w, spatial, data_w, data_h, ensemble, replicas };
constexpr int kGroupCount = 9;
const char* group_name(Group g);

// "DxHxW" or "ExDxHxW" as given to --grid (E: the ensemble axis, 1 when not given).
struct GridSpec {
  int64_t data = 1, h = 1, w = 1;
  int64_t ensemble = 1;
  int64_t size() const { return ensemble * data * h * w; }
  std::string str() const;  // "1x2x2", or "2x1x2x2" when ensemble > 1
  bool operator==(const GridSpec&) const = default;
};
// Parses "2x1x2" or "2x2x1x2"; the error names the text and the expected forms.
GridSpec parse_grid(const std::string& text);
// Every grid of `world_size` ranks with E = 1, data-major: 1x1x4, 1x2x2, 1x4x1, 2x1x2, ...; with
// `with_ensemble` also those with E > 1 (after them, ensemble-major).
std::vector<GridSpec> all_grids(int64_t world_size, bool with_ensemble = false);

class ProcessGrid {
 public:
  // One process: data = h = w = 1.
  ProcessGrid() = default;
  // Row-major over world ranks: rank = ((e * data + d) * h + i) * w + j. Throws unless every size is
  // >= 1 and rank < ensemble * data * h * w.
  ProcessGrid(int64_t data, int64_t h, int64_t w, int64_t world_rank, int64_t ensemble = 1);
  // The grid of the whole job over `world` (collective: every rank calls it with the same spec),
  // with the communicators of every group. The world size must equal data * h * w.
  static ProcessGrid create(const CommPtr& world, const GridSpec& spec);

  int64_t data_size() const { return data_; }
  int64_t h_size() const { return h_; }
  int64_t w_size() const { return w_; }
  int64_t ensemble_size() const { return ensemble_; }
  int64_t world_size() const { return ensemble_ * data_ * h_ * w_; }
  int64_t world_rank() const { return rank_; }
  int64_t data_rank() const { return (rank_ / (h_ * w_)) % data_; }
  int64_t ensemble_rank() const { return rank_ / (data_ * h_ * w_); }
  int64_t h_rank() const { return (rank_ / w_) % h_; }
  int64_t w_rank() const { return rank_ % w_; }
  bool is_single_process() const { return world_size() == 1; }
  bool spatially_split() const { return h_ * w_ > 1; }
  // Rank 0 writes files and reports; every other rank stays quiet.
  bool is_root() const { return rank_ == 0; }

  // This rank's latitude rows of an nlat-row grid, and its longitude columns of nlon.
  Block local_lat(int64_t nlat) const { return split_block(nlat, h_, h_rank()); }
  Block local_lon(int64_t nlon) const { return split_block(nlon, w_, w_rank()); }

  std::string str() const;  // "data 1 x h 1 x w 1, rank 0" ("ensemble 2 x data 1 x ..." when E > 1)
  GridSpec spec() const { return {data_, h_, w_, ensemble_}; }

  // The communicator of group g. A one-process grid has single-process communicators; a layout-only
  // grid of several ranks has none (an error).
  const CommPtr& comm(Group g) const;
  int group_size(Group g) const;
  int group_rank(Group g) const;
  // Whether world rank `other` belongs to this rank's instance of group g (the ranks that g's
  // communicator spans here).
  bool in_my_group(int64_t other, Group g) const;
  // The (ensemble, data, h, w) coordinates of any world rank.
  std::array<int64_t, 4> coords(int64_t world_rank) const;

 private:
  int64_t data_ = 1, h_ = 1, w_ = 1, rank_ = 0, ensemble_ = 1;
  std::shared_ptr<const std::array<CommPtr, kGroupCount>> comms_;
};

// Whether `mine` holds on any rank of the grid's world (one all-reduce; every rank gets the same
// answer, so every rank can take the same branch). Collective; one process: `mine`.
bool any_rank(const ProcessGrid& grid, bool mine);

}  // namespace gs::dist
