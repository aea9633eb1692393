// How a parameter is laid out over the process grid. Models declare it for each parameter; the
// gradient reducer reads it to decide over which ranks a gradient is summed (DESIGN.md).
#pragma once
#include <cstdint>
#include <string>

namespace gs::dist {

// Which process-grid axis splits a sharded parameter: h (latitude / degree l) or w (longitude / order m).
enum class GridAxis { h, w };

struct Distribution {
  bool sharded = false;
  int64_t dim = -1;  // the tensor dim that is split, when sharded
  GridAxis axis = GridAxis::h;

  static Distribution replicated() { return {}; }
  static Distribution sharded_along(int64_t dim, GridAxis axis) { return {true, dim, axis}; }
  std::string str() const;  // "replicated" or "sharded dim 2 over h"
  bool operator==(const Distribution&) const = default;
};

}  // namespace gs::dist
