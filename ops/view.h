// View ops: share storage and the version counter with their input; backward maps the gradient
// back to the input's geometry. reshape copies only when the strides make a view impossible.
#pragma once
#include <vector>

#include "engine/autograd/grad_arith.h"
#include "engine/tensor.h"

namespace gs {

Tensor reshape(const Tensor& t, Shape sizes);  // one size may be -1
Tensor view(const Tensor& t, Shape sizes);     // like reshape, but an error instead of a copy
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor permute(const Tensor& t, const std::vector<int64_t>& dims);
Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1);
Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step = 1);  // Python-style bounds
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
Tensor expand(const Tensor& t, const Shape& sizes);  // -1 keeps a size
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor squeeze(const Tensor& t);
Tensor unsqueeze(const Tensor& t, int64_t dim);
// Not views: a contiguous tensor (t itself when already contiguous), a copy, a cast.
// The gradient of a view with respect to its base, for any geometry (ops/view_history.cpp): g (the
// view's shape and dtype) at the view's positions in a base-shaped zero tensor, shared positions
// summed; view_from_base is the adjoint (the view's elements of a base-shaped tensor). The
// engine's regenerated view histories use view_to_base (engine/autograd/grad_arith.h).
Tensor view_to_base(const Tensor& g, const ViewRelation& r);
Tensor view_from_base(const Tensor& base_shaped, const ViewRelation& r);
// base_shaped with the view's positions set to zero (what copy_slices passes to the old base).
Tensor view_complement(const Tensor& base_shaped, const ViewRelation& r);

Tensor contiguous(const Tensor& t);
Tensor clone(const Tensor& t);
Tensor to(const Tensor& t, DType dtype);  // real -> complex gives a zero imaginary part; complex -> real keeps the real part
Tensor to(const Tensor& t, Device device);

}  // namespace gs
