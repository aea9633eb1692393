// GELU (erf form, as nn.GELU()) with one fused pass forward and one backward, for f32 and f64 (a bf16
// input is read as f32, saved as bf16, and the result and gradients are f32).
// gs::gelu computes erf with libm per element and builds its derivative from eight elementwise
// ops; in an SFNO training step that was more than half of the time. Here f32 uses a polynomial
// erf (Abramowitz-Stegun 7.1.26, |error| <= 1.5e-7, as PyTorch's vectorised CPU erf) with an
// inlined exp, so the loops vectorise; f64 keeps std::erf (gradcheck precision). Under
// create_graph the backward is the same formula in differentiable ops, so double backward works.
// With a bias (C) and x (B, C, ...), computes gelu(x + bias) in the same pass, and its backward
// sums the bias gradient in the same pass too (the first layer of an MLP: conv1x1 without bias,
// then this).
#pragma once
#include "engine/tensor.h"

namespace gs {

Tensor gelu_fused(const Tensor& x, const Tensor& bias = {});

}  // namespace gs
