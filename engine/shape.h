// Shapes and strides: small vectors of int64 with the helpers views and broadcasting need.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/inline_dims.h"

namespace gs {

// Up to kInlineDims dimensions live inside the object (no heap allocation): a tensor holds two
// shapes and every recorded op keeps one per input and output, so a heap vector here was a third
// of the allocations an op made (engine/BENCHMARKS.md, "The tape chain's profile").
using Shape = InlineDims;

inline int64_t numel_of(const Shape& s) {  // inline: several calls per recorded op
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}
// Row-major strides (in elements) for a contiguous tensor of this shape.
Shape contiguous_strides(const Shape& s);
// "(2, 3, 4)"
std::string shape_str(const Shape& s);
// NumPy broadcasting of two shapes; throws naming `op` when they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// True when `from` can be expanded (broadcast) to `to`.
bool is_expandable_to(const Shape& from, const Shape& to);
// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);

}  // namespace gs
