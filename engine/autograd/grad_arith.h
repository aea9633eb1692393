// The two differentiable operations the engine itself needs: summing gradients that meet at one
// input, and reducing a broadcast gradient to its input's shape. The engine knows no op by name,
// so ops/ registers them at start-up (ops/register_grad_arith.cpp).
#pragma once
#include "engine/tensor.h"

namespace gs {

struct GradientArithmetic {
  Tensor (*add)(const Tensor& a, const Tensor& b) = nullptr;
  Tensor (*sum_to)(const Tensor& t, const Shape& shape) = nullptr;
};

void register_gradient_arithmetic(const GradientArithmetic& g);
const GradientArithmetic& gradient_arithmetic();

}  // namespace gs
