// The CPU GEMM every matrix-multiplying op calls (matmul / bmm / linear in linalg.cpp, the
// Driscoll-Healy spectral convolution in sphere/spectral_conv.cpp): Eigen on strided operands, or
// for real products with a small dimension the unpacked kernel of gemm_direct.h.
//
// Eigen lives in this one translation unit (gemm_cpu.cpp) behind plain pointers. Its GEMM templates
// are the most expensive code in the library to compile: under UBSan (CI step 2) each file that
// instantiated them took about three minutes, so that unit alone is built without UBSan's checks
// (meson.build), and the ops' own code keeps them.
#pragma once
#include <cstdint>

namespace gs::gemm_cpu {

// One operand matrix. Either its rows (row-major) or its columns (column-major) are contiguous;
// `outer` is the distance between consecutive rows (row-major) or columns (column-major).
template <typename T>
struct Operand {
  const T* data;
  bool row_major;
  int64_t outer;
};

// c = op(a) @ b, or c += op(a) @ b when `accumulate`. a is n x k, b is k x m, c is n x m row-major
// with its rows `c_outer` apart. op(a) is conj(a) when `conj_a` (complex T only; ignored for real).
// Runs on the calling thread, or splits one large product across OpenMP threads when called
// outside a parallel region. T: float, double, std::complex<float>, std::complex<double>.
template <typename T>
void gemm(T* c, int64_t c_outer, const Operand<T>& a, const Operand<T>& b, int64_t n, int64_t k, int64_t m,
          bool accumulate = false, bool conj_a = false);

}  // namespace gs::gemm_cpu
