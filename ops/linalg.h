// Matrix products (CPU: Eigen through ops/gemm_cpu.h, both cores via OpenMP; CUDA: cuBLAS). f32, f64, c64, c128.
#pragma once
#include "engine/tensor.h"

namespace gs {

// NumPy matmul: 1-D operands are promoted and the added dim removed; leading batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// (B, n, k) x (B, k, m) -> (B, n, m), no broadcasting.
Tensor bmm(const Tensor& a, const Tensor& b);
// x (..., in) with weight (out, in) and optional bias (out): x W^T + b.
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});

}  // namespace gs
