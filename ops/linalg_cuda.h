// GEMM on CUDA through cuBLAS (ops/linalg_cuda.cpp), the twin of linalg.cpp's Eigen kernel.
// TF32 is off unless set_allow_tf32(true): f32 products then keep full f32 precision, as on the CPU.
#pragma once
#include <vector>

#include "engine/tensor.h"

namespace gs {

// Opt-in: let cuBLAS use TF32 tensor cores for f32 GEMMs (about 10 significant bits of the
// inputs' mantissas; faster on Ampere and later). Process-wide; off by default.
void set_allow_tf32(bool allow);
bool allow_tf32();

namespace cuda_blas {

// One operand of a batched GEMM: its storage, each matrix's element offset, and how a matrix
// sits in memory (row-major with `ld` elements between rows, or column-major between columns).
struct GemmOperand {
  const Tensor* tensor;
  bool row_major;
  int64_t ld;
  std::vector<int64_t> offsets;
};

// out (batch, n, m), contiguous on the operands' device = a (n, k) @ b (k, m) per batch entry.
void batched_gemm(const Tensor& out, const GemmOperand& a, const GemmOperand& b, int64_t n, int64_t k, int64_t m);

// out (n, n) = a (n, n) @ b (n, n), contiguous, straight through cuBLAS with no checks or dispatch:
// the baseline that `bench engine --device cuda` measures matmul against.
void raw_square_gemm(const Tensor& out, const Tensor& a, const Tensor& b);

}  // namespace cuda_blas
}  // namespace gs
