// Reductions over dims (negative dims count from the end; an empty dim list means all dims).
#pragma once
#include <vector>

#include "engine/tensor.h"

namespace gs {

// ---- ops/reduce_sum.cpp: f32, f64, c64, c128
Tensor sum(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor mean(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);
// Sums a broadcast tensor back down to `shape` (the reverse of expand).
Tensor sum_to(const Tensor& t, const Shape& shape);

// ---- ops/reduce.cpp: f32, f64
// Variance with Bessel's correction by default (correction = 1).
Tensor var(const Tensor& t, std::vector<int64_t> dims = {}, int64_t correction = 1, bool keepdim = false);
// Max / min over dims; the gradient is split evenly between tied maxima (as torch.amax).
Tensor max(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor min(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& t, std::vector<int64_t> dims = {}, bool keepdim = false);

}  // namespace gs
