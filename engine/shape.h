// Shapes and strides: small vectors of int64 with the helpers views and broadcasting need.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gs {

using Shape = std::vector<int64_t>;

int64_t numel_of(const Shape& s);
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
