// Comparisons give bool masks; masks are not differentiable. where() is differentiable in a and b.
#pragma once
#include "engine/tensor.h"

namespace gs {

// Real dtypes (f32, f64, i64); eq/ne also complex and bool. Broadcasting.
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double b);
Tensor lt(const Tensor& a, double b);
Tensor le(const Tensor& a, double b);
Tensor gt(const Tensor& a, double b);
Tensor ge(const Tensor& a, double b);
Tensor logical_not(const Tensor& mask);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor isfinite(const Tensor& t);
// cond ? a : b elementwise, broadcasting all three; cond must be bool.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// True when every element is true (one-element bool check, not an op).
bool all_true(const Tensor& mask);

}  // namespace gs
