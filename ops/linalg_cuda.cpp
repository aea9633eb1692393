#include "ops/linalg_cuda.h"

#include <atomic>

#include "engine/cuda_runtime.h"
#include "gradsphere_config.h"

#if GS_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <mutex>
#include <vector>
#endif

namespace gs {
namespace {
std::atomic<bool> g_allow_tf32{false};
}

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

namespace cuda_blas {

#if GS_HAVE_CUDA
namespace {

void check_blas(cublasStatus_t s, const char* call, const char* op) {
  if (s != CUBLAS_STATUS_SUCCESS) fail("{}: {} failed: {} (cuBLAS status {})", op, call, cublasGetStatusString(s), static_cast<int>(s));
}

// One handle per device and host thread (a cuBLAS handle must not be shared between threads
// running GEMMs at once), created on first use and kept for the thread's life.
cublasHandle_t handle_for(int device) {
  thread_local std::vector<cublasHandle_t> handles;
  if (device >= static_cast<int>(handles.size())) handles.resize(device + 1, nullptr);
  if (!handles[device]) check_blas(cublasCreate(&handles[device]), "cublasCreate", "matmul");
  return handles[device];
}

// When every matrix follows the previous at one fixed distance (contiguous or broadcast batches),
// one strided-batched call does the whole batch; otherwise the distance is 0 and there is a call
// per matrix.
bool uniform_stride(const std::vector<int64_t>& offs, int64_t* stride) {
  *stride = offs.size() > 1 ? offs[1] - offs[0] : 0;
  for (size_t i = 2; i < offs.size(); ++i)
    if (offs[i] - offs[i - 1] != *stride) return false;
  return true;
}

template <typename T>
cudaDataType_t cuda_type() {
  if constexpr (std::is_same_v<T, float>) return CUDA_R_32F;
  else if constexpr (std::is_same_v<T, double>) return CUDA_R_64F;
  else if constexpr (std::is_same_v<T, c64>) return CUDA_C_32F;
  else return CUDA_C_64F;
}

template <typename T>
cublasComputeType_t compute_type() {
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, c64>)
    return allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  else return CUBLAS_COMPUTE_64F;
}

}  // namespace

void batched_gemm(const Tensor& out, const GemmOperand& a, const GemmOperand& b, int64_t n, int64_t k, int64_t m) {
  const Device d = out.device();
  cuda::require_device(d, "matmul");
  cublasHandle_t h = handle_for(d.index);
  check_blas(cublasSetStream(h, static_cast<cudaStream_t>(cuda::current_stream(d.index).handle)), "cublasSetStream",
             "matmul");
  // cuBLAS is column-major: the row-major out (n, m) is the column-major (m, n) = B' A', where a
  // row-major operand read column-major is its transpose (no op) and a column-major one needs op T.
  const cublasOperation_t op_b = b.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t op_a = a.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const int64_t batch = static_cast<int64_t>(a.offsets.size());
  GS_CHECK(n <= INT32_MAX && k <= INT32_MAX && m <= INT32_MAX && a.ld <= INT32_MAX && b.ld <= INT32_MAX &&
               batch <= INT32_MAX,
           "matmul: a GEMM of ({}, {}) @ ({}, {}) exceeds cuBLAS's 32-bit sizes", n, k, k, m);
  dispatch_float_complex(out.dtype(), "matmul", [&]<typename T>() {
    const T one(1), zero(0);
    const auto ty = cuda_type<T>();
    const auto ct = compute_type<T>();
    char* pa = static_cast<char*>(a.tensor->storage()->data());
    char* pb = static_cast<char*>(b.tensor->storage()->data());
    T* pc = out.device_data<T>();
    int64_t sa = 0, sb = 0;
    if (uniform_stride(a.offsets, &sa) && uniform_stride(b.offsets, &sb)) {
      check_blas(cublasGemmStridedBatchedEx(h, op_b, op_a, int(m), int(n), int(k), &one,
                                            pb + b.offsets[0] * sizeof(T), ty, int(b.ld), sb,
                                            pa + a.offsets[0] * sizeof(T), ty, int(a.ld), sa, &zero, pc, ty, int(m),
                                            n * m, int(batch), ct, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmStridedBatchedEx", "matmul");
      return;
    }
    for (int64_t i = 0; i < batch; ++i)
      check_blas(cublasGemmEx(h, op_b, op_a, int(m), int(n), int(k), &one, pb + b.offsets[i] * sizeof(T), ty,
                              int(b.ld), pa + a.offsets[i] * sizeof(T), ty, int(a.ld), &zero, pc + i * n * m, ty,
                              int(m), ct, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx", "matmul");
  });
  cuda::check_launch("gemm", "matmul");
}

void raw_square_gemm(const Tensor& out, const Tensor& a, const Tensor& b) {
  cuda::require_device(out.device(), "gemm baseline");
  const int n = static_cast<int>(a.size(0));
  cublasHandle_t h = handle_for(out.device().index);
  check_blas(cublasSetStream(h, static_cast<cudaStream_t>(cuda::current_stream(out.device().index).handle)),
             "cublasSetStream", "gemm baseline");
  dispatch_float(out.dtype(), "gemm baseline", [&]<typename T>() {
    const T one(1), zero(0);
    check_blas(cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b.device_data<T>(), cuda_type<T>(), n,
                            a.device_data<T>(), cuda_type<T>(), n, &zero, out.device_data<T>(), cuda_type<T>(), n,
                            compute_type<T>(), CUBLAS_GEMM_DEFAULT),
               "cublasGemmEx", "gemm baseline");
  });
}

#else

void raw_square_gemm(const Tensor& out, const Tensor&, const Tensor&) {
  fail("gemm baseline: {} needs CUDA, and this gradsphere was built without it", out.device());
}

void batched_gemm(const Tensor& out, const GemmOperand&, const GemmOperand&, int64_t, int64_t, int64_t) {
  fail("matmul: {} needs CUDA, and this gradsphere was built without it", out.device());
}

#endif

}  // namespace cuda_blas
}  // namespace gs
