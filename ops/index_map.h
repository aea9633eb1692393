// The two differentiable primitives every indexing op of ops/indexing.h is written with (internal
// to ops/). An op validates its indices, turns them into an IndexMap (flat row-major positions in
// the indexed tensor, one per element read or written) and calls take_at / put_at / fill_at with
// its own node names. The primitives are each other's adjoints, so gradients of every order stay
// within them:
//   take_at(x)        backward: put_at(zeros, g, accumulate)
//   put_at(base, src) backward: base <- g (accumulate) or fill_at(g, 0) (overwrite); src <- take_at(g)
//   fill_at(base, v)  backward: base <- fill_at(g, 0)
// Positions are computed on the host (an index tensor on a device is copied there first); the
// kernels (ops/indexing_math.h) read a CSR table of the sources per target, so duplicates are
// summed, or the last one kept, in index order on every device.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace gs::indexing {

struct IndexMap {
  Shape target_shape;  // the tensor whose elements are read or written
  Tensor positions;    // i64, contiguous, on the CPU; the shape of the values read or written
};
using IndexMapPtr = std::shared_ptr<const IndexMap>;

// Node names: `name` for the op, `adjoint` for the primitive its backward records (gather's
// backward records "scatter_add", and the other way round).
struct Names {
  const char* name;
  const char* adjoint;
};

enum class PutMode { accumulate, overwrite };

// out (positions' shape) = x's elements at the positions; x has the target shape.
Tensor take_at(const Tensor& x, const IndexMapPtr& m, Names names);
// out (target shape) = base with src (positions' shape, base's dtype) written at the positions.
Tensor put_at(const Tensor& base, const IndexMapPtr& m, const Tensor& src, PutMode mode, Names names);
// out = base with `value` at the positions.
Tensor fill_at(const Tensor& base, const IndexMapPtr& m, double value, const char* name);
// In-place forms: write into self (target shape), bump its version and rebase its history
// (engine/autograd/record.h's protocol). `name` is the in-place node's name ("scatter_").
Tensor& put_at_(Tensor& self, const IndexMapPtr& m, const Tensor& src, PutMode mode, Names names);
Tensor& fill_at_(Tensor& self, const IndexMapPtr& m, double value, const char* name);

// ---- validation helpers shared by the ops
// The values of an index tensor (i64, any device) as a host vector, in row-major order; an error
// naming `op` and `what` for another dtype.
std::vector<int64_t> read_indices(const Tensor& index, const char* op, const char* what = "the index");
// The index `v` found at row-major position `q` of an index tensor of shape `index_shape`, checked
// against a dim of `size`: wrapped when negative indices are allowed, else an error naming the
// index, its position and the valid range.
int64_t checked_index(int64_t v, int64_t q, const Shape& index_shape, int64_t dim, int64_t size, bool allow_negative,
                      const char* op);
// A new map from positions computed on the host.
IndexMapPtr make_map(Shape target_shape, const Shape& positions_shape, std::vector<int64_t> positions);

// ---- the maps of the dim-wise ops (dim already wrapped; indices non-negative and in range)
// index_select / index_add: a 1-D (or 0-dim) index of k entries picks slices along dim of a tensor
// of `target`; the positions have target's shape with k along dim.
IndexMapPtr slices_map(const Shape& target, int64_t dim, const Tensor& index, const char* op);
// gather / scatter: index (target's number of dims, sizes at most target's except along dim)
// names, per element, the coordinate along dim; the positions have index's shape.
IndexMapPtr elementwise_map(const Shape& target, int64_t dim, const Tensor& index, const char* op);

// ---- registry samples: an i64 index of `shape` (empty shape: 0-dim), and the dim a sample runs
// along, carried as a 0-dim i64 input (an op's registry fn is one for all its samples).
Tensor sample_index(const std::vector<int64_t>& values, const Shape& shape);
inline Tensor sample_dim(int64_t d) { return sample_index({d}, {}); }
inline int64_t dim_of(const Tensor& t) { return t.item<int64_t>(); }

}  // namespace gs::indexing
