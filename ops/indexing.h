// Indexing ops, torch's semantics: index_select, gather, scatter, scatter_add, index_add,
// masked_fill, masked_select, index_put. Indices are i64 tensors (on any device); an index out of
// range is an error naming the index, its position in the index tensor and the valid range.
// Negative indices are accepted where torch accepts them: index_put's (wrapped, as x[-1]); the
// others refuse them, as torch does.
//
// Duplicate indices (torch leaves the order unspecified; here it is fixed on every device):
// - accumulating forms (scatter_add, index_add, index_put with accumulate) sum the duplicates in
//   index order (row-major over the index), so results are deterministic and CPU == CUDA;
// - overwriting forms (scatter, index_put without accumulate) keep the LAST write in index order.
//   Their source gradient is torch's rule, g read at the target of every source, duplicates
//   included: a source whose write was overwritten still gets that gradient (not the derivative of
//   the forward, which gives it zero), so gradcheck holds only without duplicates.
//
// In-place forms (suffix _) bump the version counter and rebase history like ops/inplace.h, and
// refuse a target with several elements at one memory location (an expanded view). Gradients:
//   index_select(x, d, i)     x <- index_add(zeros, d, i, g)
//   gather(x, d, i)           x <- scatter_add(zeros, d, i, g)
//   scatter(x, d, i, src)     x <- g zeroed where written;  src <- gather(g, d, i) (zero beyond i's extent)
//   scatter_add(x, d, i, src) x <- g;                      src <- gather(g, d, i)
//   index_add(x, d, i, s, a)  x <- g;                      s <- a * index_select(g, d, i)
//   masked_fill(x, m, v)      x <- g where !m;             v (0-dim tensor) <- sum of g where m
//   masked_select(x, m)       x <- g scattered back to the true positions (summed over broadcast)
//   index_put(x, idx, v, acc) x <- g (acc) or g zeroed where written; v <- g at the indices (summed
//                             over v's broadcast)
// Every gradient is written with these ops, so double backward works.
#pragma once
#include <vector>

#include "engine/tensor.h"

namespace gs {

// x (..., n, ...) and a 1-D (or 0-dim) index of k entries -> (..., k, ...) along dim.
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out[i][j] = x[index[i][j]][j] (dim 0; likewise along any dim). index has x's number of dims and
// sizes at most x's except along dim; out has index's shape.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);

// x with out[index[i][j]][j] = src[i][j] (dim 0): index has x's number of dims, sizes at most
// src's everywhere and at most x's except along dim; src's elements beyond index's extent are unused.
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, double value);
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, double value);
// The same with out[index[i][j]][j] += src[i][j].
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// x (..., n, ...) with out[..., index[k], ...] += alpha * source[..., k, ...]; index 1-D (or 0-dim),
// source of x's shape with k along dim.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0);
Tensor& index_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, double alpha = 1.0);

// value where the bool mask is true, x elsewhere. The mask broadcasts with x (out-of-place: the
// result has the broadcast shape; in place: the mask must broadcast to x's shape). A tensor value
// is 0-dim, of x's dtype and device.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
Tensor masked_fill(const Tensor& x, const Tensor& mask, const Tensor& value);
Tensor& masked_fill_(Tensor& x, const Tensor& mask, double value);
Tensor& masked_fill_(Tensor& x, const Tensor& mask, const Tensor& value);
// The elements of x (broadcast with the mask) where the mask is true, row-major, as a 1-D tensor.
Tensor masked_select(const Tensor& x, const Tensor& mask);

// x[indices] = values, advanced indexing over x's leading indices.size() dims: the index tensors
// broadcast together to B, the indexed result has shape B + x.shape[k:], and values broadcast to
// it. Negative indices count from the end. accumulate: duplicates are summed (x[indices] += values).
Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);
Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate = false);

}  // namespace gs
