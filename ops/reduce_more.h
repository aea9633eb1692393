// More reductions, under torch's names and conventions (issue 30): prod, cumsum, cumprod, std,
// norm, amax / amin, argmax / argmin. f32 and f64. Negative dims count from the end; an empty dim
// list means all dims. Gradients, double backward included, follow torch at zeros and ties.
#pragma once
#include <vector>

#include "ops/reduce.h"

namespace gs {

// ---- ops/prod.cpp
// The product over dims (torch.prod, which takes one dim or all; several are allowed here). The
// gradient at a single zero of a slice is the product of the others, at two or more zeros 0.
Tensor prod(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);

// ---- ops/scan.cpp
// Running sum / product along dim (torch.cumsum / torch.cumprod); `reverse` runs from the end
// (y[k] = x[k] + ... + x[n-1], torch's flip(cumsum(flip(x)))). f32 accumulates in f64. cumprod's
// gradient is torch's at zeros (exact to every order).
Tensor cumsum(const Tensor& t, int64_t dim, bool reverse = false);
Tensor cumprod(const Tensor& t, int64_t dim, bool reverse = false);

// ---- ops/norm.cpp
// sqrt(var(t, dims, correction, keepdim)); errors as var's. The gradient at zero variance is 0
// (torch.std's).
Tensor std(const Tensor& t, std::vector<int64_t> dims = {}, int64_t correction = 1, bool keepdim = false);
// The vector p-norm over dims (torch.linalg.vector_norm) for p = 1, 2 or infinity
// (std::numeric_limits<double>::infinity()). Gradients as torch: sign(x) g for p = 1, x / norm g
// for p = 2 (0 at the zero vector), for p = inf sign(x) g split evenly among the elements of
// largest magnitude (and NaNs).
Tensor norm(const Tensor& t, double p = 2.0, std::vector<int64_t> dims = {}, bool keepdim = false);

// torch.amax / torch.amin: max / min of ops/reduce.h, which follow them (ties split evenly).
inline Tensor amax(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false) {
  return max(t, std::move(dims), keepdim);
}
inline Tensor amin(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false) {
  return min(t, std::move(dims), keepdim);
}

// ---- ops/argmax.cpp: i64 indices, not differentiable.
// The index of the maximum along dim, or into the flattened tensor when dim is absent (keepdim
// then gives every dim size 1, as torch). As torch: ties give the first index, a NaN counts as
// larger (argmax) / smaller (argmin) than any number, so the first NaN's index is returned.
inline constexpr int64_t kAllDims = INT64_MIN;
Tensor argmax(const Tensor& t, int64_t dim = kAllDims, bool keepdim = false);
Tensor argmin(const Tensor& t, int64_t dim = kAllDims, bool keepdim = false);

}  // namespace gs
