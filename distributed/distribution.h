// How a parameter is laid out over the process grid. Models declare it for each parameter; the
// gradient reducer reads it to decide over which ranks a gradient is summed (DESIGN.md).
#pragma once
#include <cstdint>
#include <string>

namespace gs::dist {

// Which process-grid axis splits a sharded parameter: h (latitude / degree l) or w (longitude / order m).
enum class GridAxis { h, w };

// A parameter is replicated, or one of its dims is split over h, or one over w, or one over each
// (a diagonal spectral weight (Cout, Cin, L, M): l over h and m over w; a (1, C, H, W) position
// embedding: rows over h and columns over w). Blocks follow split_block (process_grid.h).
struct Distribution {
  int64_t h_dim = -1;  // the tensor dim split over h, or -1
  int64_t w_dim = -1;  // the tensor dim split over w, or -1

  static Distribution replicated() { return {}; }
  static Distribution sharded_along(int64_t dim, GridAxis axis) {
    return axis == GridAxis::h ? Distribution{dim, -1} : Distribution{-1, dim};
  }
  static Distribution sharded_2d(int64_t h_dim, int64_t w_dim) { return {h_dim, w_dim}; }
  bool sharded() const { return h_dim >= 0 || w_dim >= 0; }
  bool splits(GridAxis axis) const { return (axis == GridAxis::h ? h_dim : w_dim) >= 0; }
  std::string str() const;  // "replicated", "sharded dim 2 over h", "sharded dim 2 over h and dim 3 over w"
  bool operator==(const Distribution&) const = default;
};

}  // namespace gs::dist
