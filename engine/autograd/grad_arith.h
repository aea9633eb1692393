// The differentiable operations the engine itself needs: summing gradients that meet at one input,
// reducing a broadcast gradient to its input's shape, and sending a view's gradient back to its
// base (for views whose history is regenerated, record.h). The engine knows no op by name, so
// ops/ registers them at start-up (ops/register_grad_arith.cpp).
#pragma once
#include "engine/tensor.h"

namespace gs {

// Where a view's elements sit in its base's storage (each geometry in units of its own dtype).
struct ViewRelation {
  Shape base_sizes, base_strides;
  int64_t base_offset = 0;
  DType base_dtype = DType::f32;
  Shape view_sizes, view_strides;
  int64_t view_offset = 0;
  DType view_dtype = DType::f32;
};

struct GradientArithmetic {
  Tensor (*add)(const Tensor& a, const Tensor& b) = nullptr;
  Tensor (*sum_to)(const Tensor& t, const Shape& shape) = nullptr;
  // g (the view's shape and dtype) -> the base's gradient: g at the view's positions, zero
  // elsewhere, overlapping positions summed. Differentiable.
  Tensor (*view_to_base)(const Tensor& g, const ViewRelation& r) = nullptr;
  // The adjoint of view_to_base: the view's elements of a base-shaped tensor.
  Tensor (*view_from_base)(const Tensor& base_shaped, const ViewRelation& r) = nullptr;
  // A base-shaped tensor with the view's positions set to zero (a projection: its own adjoint).
  Tensor (*view_complement)(const Tensor& base_shaped, const ViewRelation& r) = nullptr;
};

void register_gradient_arithmetic(const GradientArithmetic& g);
const GradientArithmetic& gradient_arithmetic();

}  // namespace gs
