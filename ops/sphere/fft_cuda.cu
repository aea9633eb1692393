#include <cufft.h>

#include <memory>
#include <mutex>
#include <tuple>

#include "engine/cuda_types.cuh"
#include "engine/keyed_cache.h"
#include "ops/sphere/fft_cuda.h"

namespace gs::cuda_kernels {
namespace {

// Edge modes (m = 0 and, for even n, the Nyquist mode n/2) take w_edge, the others w_interior.
__host__ __device__ inline bool edge_mode(int64_t m, int64_t n) { return m == 0 || (n % 2 == 0 && 2 * m == n); }

// out[r, m] = w_m Y[r, m] for m < M, from the full half spectrum Y (rows, n/2 + 1).
template <typename C>
__global__ void weigh_analysis(const C* Y, C* out, int64_t rows, int64_t half, int64_t M, int64_t n, double we,
                               double wi) {
  using R = typename C::value_type;
  GS_GRID_STRIDE(i, rows * M) {
    const int64_t r = i / M, m = i % M;
    out[i] = Y[r * half + m] * static_cast<R>(edge_mode(m, n) ? we : wi);
  }
}

// Z[r, m] for cuFFT's complex-to-real transform, which sums Z[0] + 2 Re sum_{0<m<n/2} Z[m] e^.. +
// Z[n/2] (-1)^k from the half spectrum (ignoring the imaginary parts of the edge modes, as B_w's
// real part does): w_m X[m] on edge modes, w_m X[m] / 2 on interior ones, 0 beyond M.
template <typename C>
__global__ void weigh_synthesis(const C* X, C* Z, int64_t rows, int64_t half, int64_t M, int64_t n, double we,
                                double wi) {
  using R = typename C::value_type;
  GS_GRID_STRIDE(i, rows * half) {
    const int64_t r = i / half, m = i % half;
    Z[i] = m < M ? X[r * M + m] * static_cast<R>(edge_mode(m, n) ? we : 0.5 * wi) : C(0);
  }
}

const char* cufft_result_name(int result);

// A cuFFT plan handle, destroyed with the plan.
struct CufftPlan {
  cufftHandle handle = 0;
  bool made = false;
  CufftPlan() = default;
  CufftPlan(const CufftPlan&) = delete;
  CufftPlan& operator=(const CufftPlan&) = delete;
  ~CufftPlan() {
    if (made) cufftDestroy(handle);
  }
};

// What a failed plan build throws (caught in plan_for: these launchers report through FftStatus).
struct CufftPlanFailure {
  int result;
};

using PlanKey = std::tuple<int, bool, bool, int64_t, int64_t>;  // device, f64, forward, n, rows

std::shared_ptr<const CufftPlan> make_plan(const PlanKey& key) {
  const bool f64 = std::get<1>(key), forward = std::get<2>(key);
  const int64_t n = std::get<3>(key), rows = std::get<4>(key);
  int len = static_cast<int>(n);
  const cufftType type = forward ? (f64 ? CUFFT_D2Z : CUFFT_R2C) : (f64 ? CUFFT_Z2D : CUFFT_C2R);
  auto plan = std::make_shared<CufftPlan>();
  cufftResult r = cufftPlanMany(&plan->handle, 1, &len, nullptr, 1, 0, nullptr, 1, 0, type, static_cast<int>(rows));
  if (r != CUFFT_SUCCESS) throw CufftPlanFailure{static_cast<int>(r)};
  plan->made = true;
  return plan;
}

// Plans are made once per (device, f64, forward, n, rows) and kept (a KeyedCache, as PyTorch's
// cuFFT plan cache). A plan is bound to one stream at a time, so g_plan_mutex serialises their use.
std::mutex g_plan_mutex;

bool plan_for(bool f64, bool forward, int64_t n, int64_t rows, std::shared_ptr<const CufftPlan>* plan,
              FftStatus* status) {
  static auto* plans = new KeyedCache<PlanKey, CufftPlan>(make_plan);
  int device = 0;
  cudaGetDevice(&device);
  try {
    *plan = plans->get(std::make_tuple(device, f64, forward, n, rows));
    return true;
  } catch (const CufftPlanFailure& f) {
    *status = {f.result, "cufftPlanMany", cufft_result_name(f.result)};
    return false;
  }
}

// Fills *status for a failed cuFFT call; false.
bool failed(cufftResult r, const char* call, FftStatus* status) {
  *status = {static_cast<int>(r), call, cufft_result_name(static_cast<int>(r))};
  return false;
}

const char* cufft_result_name(int result) {
  switch (static_cast<cufftResult>(result)) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED (out of device memory for the plan's work area)";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    default: return "an unknown cufftResult";
  }
}

}  // namespace

bool rfft_rows(bool f64, const void* x, void* out, int64_t rows, int64_t n, int64_t M, double w_edge,
               double w_interior, void* scratch, void* stream, FftStatus* status) {
  const int64_t half = n / 2 + 1;
  auto s = static_cast<cudaStream_t>(stream);
  {
    std::lock_guard<std::mutex> lock(g_plan_mutex);
    std::shared_ptr<const CufftPlan> plan;
    if (!plan_for(f64, true, n, rows, &plan, status)) return false;
    if (cufftResult r = cufftSetStream(plan->handle, s); r != CUFFT_SUCCESS) return failed(r, "cufftSetStream", status);
    // cuFFT does not write its real input, but its interface takes a non-const pointer.
    cufftResult r = f64 ? cufftExecD2Z(plan->handle, static_cast<cufftDoubleReal*>(const_cast<void*>(x)),
                                       static_cast<cufftDoubleComplex*>(scratch))
                        : cufftExecR2C(plan->handle, static_cast<cufftReal*>(const_cast<void*>(x)),
                                       static_cast<cufftComplex*>(scratch));
    if (r != CUFFT_SUCCESS) return failed(r, f64 ? "cufftExecD2Z" : "cufftExecR2C", status);
  }
  if (f64) {
    using C = device_t<DType::c128>;
    weigh_analysis<C><<<blocks_for(rows * M), kThreads, 0, s>>>(static_cast<const C*>(scratch), static_cast<C*>(out),
                                                                rows, half, M, n, w_edge, w_interior);
  } else {
    using C = device_t<DType::c64>;
    weigh_analysis<C><<<blocks_for(rows * M), kThreads, 0, s>>>(static_cast<const C*>(scratch), static_cast<C*>(out),
                                                                rows, half, M, n, w_edge, w_interior);
  }
  return true;
}

bool irfft_rows(bool f64, const void* X, void* out, int64_t rows, int64_t n, int64_t M, double w_edge,
                double w_interior, void* scratch, void* stream, FftStatus* status) {
  const int64_t half = n / 2 + 1;
  auto s = static_cast<cudaStream_t>(stream);
  if (f64) {
    using C = device_t<DType::c128>;
    weigh_synthesis<C><<<blocks_for(rows * half), kThreads, 0, s>>>(static_cast<const C*>(X), static_cast<C*>(scratch),
                                                                    rows, half, M, n, w_edge, w_interior);
  } else {
    using C = device_t<DType::c64>;
    weigh_synthesis<C><<<blocks_for(rows * half), kThreads, 0, s>>>(static_cast<const C*>(X), static_cast<C*>(scratch),
                                                                    rows, half, M, n, w_edge, w_interior);
  }
  std::lock_guard<std::mutex> lock(g_plan_mutex);
  std::shared_ptr<const CufftPlan> plan;
  if (!plan_for(f64, false, n, rows, &plan, status)) return false;
  if (cufftResult r = cufftSetStream(plan->handle, s); r != CUFFT_SUCCESS) return failed(r, "cufftSetStream", status);
  // The complex-to-real transform overwrites its input: the scratch spectrum, never X.
  cufftResult r = f64 ? cufftExecZ2D(plan->handle, static_cast<cufftDoubleComplex*>(scratch),
                                     static_cast<cufftDoubleReal*>(out))
                      : cufftExecC2R(plan->handle, static_cast<cufftComplex*>(scratch), static_cast<cufftReal*>(out));
  if (r != CUFFT_SUCCESS) return failed(r, f64 ? "cufftExecZ2D" : "cufftExecC2R", status);
  return true;
}

}  // namespace gs::cuda_kernels
