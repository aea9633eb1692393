#include "engine/strided_index.h"

#include "engine/error.h"

namespace gs {

template <int N>
StridedLoop<N> make_strided_loop(const Shape& shape, const std::array<const Shape*, N>& strides) {
  StridedLoop<N> l;
  l.numel = numel_of(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    // Merge into the previous dim when every operand steps over this one exactly once per step
    // of the previous one.
    bool merge = l.ndim > 0;
    for (int k = 0; k < N && merge; ++k) merge = l.strides[k][l.ndim - 1] == (*strides[k])[d] * shape[d];
    if (merge) {
      l.sizes[l.ndim - 1] *= shape[d];
      for (int k = 0; k < N; ++k) l.strides[k][l.ndim - 1] = (*strides[k])[d];
      continue;
    }
    GS_CHECK(l.ndim < kMaxLoopDims, "a strided loop over shape {} has more than {} dims that cannot be merged",
             shape_str(shape), kMaxLoopDims);
    l.sizes[l.ndim] = shape[d];
    for (int k = 0; k < N; ++k) l.strides[k][l.ndim] = (*strides[k])[d];
    ++l.ndim;
  }
  return l;
}

template StridedLoop<1> make_strided_loop<1>(const Shape&, const std::array<const Shape*, 1>&);
template StridedLoop<2> make_strided_loop<2>(const Shape&, const std::array<const Shape*, 2>&);
template StridedLoop<3> make_strided_loop<3>(const Shape&, const std::array<const Shape*, 3>&);
template StridedLoop<4> make_strided_loop<4>(const Shape&, const std::array<const Shape*, 4>&);

}  // namespace gs
