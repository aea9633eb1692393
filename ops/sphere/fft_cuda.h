// The longitude FFT on CUDA (ops/sphere/fft_cuda.cu): cuFFT's batched real transforms with plans
// cached per (device, precision, direction, nlon, rows), and the weighting / truncation of fft.cpp's
// A_w and B_w in a kernel around them. Plain arguments, as ops/elementwise_cuda.h.
#pragma once
#include <cstddef>
#include <cstdint>

namespace gs::cuda_kernels {

// Why a launcher returned false: the cuFFT call named `call` failed with cufftResult `cufft`,
// described by `result`.
struct FftStatus {
  int cufft = 0;
  const char* call = "";
  const char* result = "";
};

// Bytes of the scratch spectrum both directions need: rows * (n/2 + 1) complex values.
inline size_t fft_scratch_bytes(bool f64, int64_t rows, int64_t n) {
  return static_cast<size_t>(rows * (n / 2 + 1)) * (f64 ? 16 : 8);
}
// out (rows, M) complex = A_w of x (rows, n) real: w_m * sum_k x[k] e^{-2 pi i m k / n}, m < M.
// Returns false with *status filled when a cuFFT call fails.
bool rfft_rows(bool f64, const void* x, void* out, int64_t rows, int64_t n, int64_t M, double w_edge,
               double w_interior, void* scratch, void* stream, FftStatus* status);
// out (rows, n) real = B_w of X (rows, M) complex: Re sum_{m<M} w_m X[m] e^{+2 pi i m k / n}.
bool irfft_rows(bool f64, const void* X, void* out, int64_t rows, int64_t n, int64_t M, double w_edge,
                double w_interior, void* scratch, void* stream, FftStatus* status);

}  // namespace gs::cuda_kernels
