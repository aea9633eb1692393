// The longitude FFT (rfft_lon, irfft_lon): kernels (the lane FFT of lane_fft.h where it supports the
// length, FFTW with a plan cache otherwise) and backward rules.
//
// Both ops are instances of two weighted transforms over the last dim (n = nlon, M = mmax,
// "edge" modes are m = 0 and, for even n, the Nyquist mode m = n/2; all others are "interior"):
//   analysis   A_w: X[m] = w_m Σ_k x[k] e^{-2πi mk/n},         m < M
//   synthesis  B_w: x[k] = Re Σ_{m<M} w_m X[m] e^{+2πi mk/n}
// with w_m = w_edge on edge modes and w_int on interior ones. Under the real inner product
// <u, v> = Re Σ conj(u) v (PyTorch's convention for complex gradients, dL/dRe + i dL/dIm),
// A_w and B_w are each other's adjoints for the SAME weights. So:
//   rfft_lon  = A_w with w = (2π/n, 2π/n); its backward is B_w with the same w,
//   irfft_lon = B_w with w = (1, 2);       its backward is A_w with the same w,
// and each backward is again a recorded op whose backward is the original transform: double
// backward (and any higher order) works without a generic-op derivation.
#include "ops/sphere/fft.h"

#include <fftw3.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <complex>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <numbers>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "engine/keyed_cache.h"
#include "ops/kernels.h"
#include "ops/registry.h"
#include "ops/sphere/fft_cuda.h"
#include "ops/sphere/lane_fft.h"

namespace gs::sphere {

std::mutex& fftw_planner_mutex() {
  static std::mutex m;
  return m;
}

namespace {

// FFTW_ESTIMATE, measured against FFTW_MEASURE (NOTES.md, "Longitude FFT"): MEASURE plans take
// 0.05-4 s to make per (nlon, direction) and run at best 1.7x faster, on a stage that is a few
// percent of an SHT at most; and they are chosen by timing, so which plan (and which rounding) a
// process gets varies from run to run. ESTIMATE plans take < 20 ms and are deterministic.
constexpr unsigned kPlanFlags = FFTW_ESTIMATE;
// An FFT row costs ~5 log2(n) flops per element, several times an element-wise op, so rows go
// parallel from a smaller total size than kernels::kParallelGrain.
constexpr int64_t kFftParallelGrain = 8192;
// Scratch and planning buffers share this alignment, so FFTW's new-array execute functions see
// arrays aligned exactly as at planning time (a requirement of that interface).
constexpr std::align_val_t kAlign{64};

template <typename T>
class AlignedBuffer {
 public:
  explicit AlignedBuffer(int64_t n)
      : p_(static_cast<T*>(::operator new(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T), kAlign))) {}
  ~AlignedBuffer() { ::operator delete(p_, kAlign); }
  AlignedBuffer(AlignedBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(AlignedBuffer&&) = delete;
  T* get() const { return p_; }

 private:
  T* p_;
};

// FFTW's API for one precision. std::complex<R> is layout-compatible with fftw(f)_complex.
template <typename R>
struct Fftw;
template <>
struct Fftw<double> {
  using Plan = fftw_plan;
  static Plan plan_r2c(int n, double* in, std::complex<double>* out) {
    return fftw_plan_dft_r2c_1d(n, in, reinterpret_cast<fftw_complex*>(out), kPlanFlags);
  }
  static Plan plan_c2r(int n, std::complex<double>* in, double* out) {
    return fftw_plan_dft_c2r_1d(n, reinterpret_cast<fftw_complex*>(in), out, kPlanFlags);
  }
  static void r2c(Plan p, double* in, std::complex<double>* out) {
    fftw_execute_dft_r2c(p, in, reinterpret_cast<fftw_complex*>(out));
  }
  static void c2r(Plan p, std::complex<double>* in, double* out) {
    fftw_execute_dft_c2r(p, reinterpret_cast<fftw_complex*>(in), out);
  }
};
template <>
struct Fftw<float> {
  using Plan = fftwf_plan;
  static Plan plan_r2c(int n, float* in, std::complex<float>* out) {
    return fftwf_plan_dft_r2c_1d(n, in, reinterpret_cast<fftwf_complex*>(out), kPlanFlags);
  }
  static Plan plan_c2r(int n, std::complex<float>* in, float* out) {
    return fftwf_plan_dft_c2r_1d(n, reinterpret_cast<fftwf_complex*>(in), out, kPlanFlags);
  }
  static void r2c(Plan p, float* in, std::complex<float>* out) {
    fftwf_execute_dft_r2c(p, in, reinterpret_cast<fftwf_complex*>(out));
  }
  static void c2r(Plan p, std::complex<float>* in, float* out) {
    fftwf_execute_dft_c2r(p, reinterpret_cast<fftwf_complex*>(in), out);
  }
};

enum class Direction { r2c, c2r };

// One out-of-place plan per (n, precision, direction), made on first use and kept (a KeyedCache
// that is never destroyed: ops may run from static destructors after a cache would be gone).
template <typename R>
struct FftwPlan {
  typename Fftw<R>::Plan plan = nullptr;
  FftwPlan() = default;
  FftwPlan(const FftwPlan&) = delete;
  FftwPlan& operator=(const FftwPlan&) = delete;
  ~FftwPlan();
};

template <typename R>
std::shared_ptr<const FftwPlan<R>> make_fftw_plan(const std::pair<int64_t, Direction>& key) {
  const auto [n, dir] = key;
  std::lock_guard<std::mutex> lock(fftw_planner_mutex());  // FFTW's planner is not thread-safe
  // Planning arrays are scratch, never user data (planners other than ESTIMATE overwrite them).
  AlignedBuffer<R> real(n);
  AlignedBuffer<std::complex<R>> spec(n / 2 + 1);
  auto p = std::make_shared<FftwPlan<R>>();
  p->plan = dir == Direction::r2c ? Fftw<R>::plan_r2c(static_cast<int>(n), real.get(), spec.get())
                                  : Fftw<R>::plan_c2r(static_cast<int>(n), spec.get(), real.get());
  GS_CHECK(p->plan != nullptr, "longitude FFT: FFTW could not plan a {} transform of length {}",
           dir == Direction::r2c ? "real-to-complex" : "complex-to-real", n);
  return p;
}

template <typename R>
FftwPlan<R>::~FftwPlan() {
  if (!plan) return;
  std::lock_guard<std::mutex> lock(fftw_planner_mutex());
  if constexpr (std::is_same_v<R, double>) fftw_destroy_plan(plan);
  else fftwf_destroy_plan(plan);
}

// The plan stays alive while the returned pointer is held (a concurrent clear cannot free it).
template <typename R>
std::shared_ptr<const FftwPlan<R>> cached_plan(int64_t n, Direction dir) {
  static auto* cache = new KeyedCache<std::pair<int64_t, Direction>, FftwPlan<R>>(make_fftw_plan<R>);
  return cache->get({n, dir});
}

bool is_edge(int64_t m, int64_t n) { return m == 0 || 2 * m == n; }

// How many threads a transform of `rows` rows of length n should use (one inside a parallel
// region: the SHT's blocks of fields run the transform on each thread).
int threads_for(int64_t rows, int64_t n) {
  if (rows < 2 || rows * n < kFftParallelGrain || omp_in_parallel()) return 1;
  return static_cast<int>(std::min<int64_t>(omp_get_max_threads(), rows));
}

// Runs body(thread, lo, hi) over [0, rows) split across up to `nthreads` OpenMP threads; the
// caller sizes per-thread scratch for `nthreads` (scratch is allocated before the parallel region,
// so an allocation failure throws here rather than inside it).
template <typename Body>
void over_rows(int64_t rows, int nthreads, Body&& body) {
  if (nthreads <= 1) {
    body(0, int64_t{0}, rows);
    return;
  }
#pragma omp parallel num_threads(nthreads)
  {
    const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const int64_t lo = rows * t / nt, hi = rows * (t + 1) / nt;
    if (hi > lo) body(static_cast<int>(t), lo, hi);
  }
}

// The calling thread's lane-FFT transformer for rows of length n, kept between calls for the last
// few lengths the thread used: made per call, its group buffers (2 x 92 KB at n = 1440 in f64)
// were allocated, zeroed and faulted in every time (4% of a 720x1440 SHT at two threads).
template <typename R>
detail::LaneRowFft<R>& thread_lane_fft(int64_t n) {
  constexpr size_t kLengths = 8;
  thread_local std::vector<std::pair<int64_t, std::unique_ptr<detail::LaneRowFft<R>>>> kept;
  for (auto& [len, fft] : kept)
    if (len == n) return *fft;
  if (kept.size() == kLengths) kept.erase(kept.begin());
  kept.emplace_back(n, std::make_unique<detail::LaneRowFft<R>>(n));
  return *kept.back().second;
}

// over_rows with each thread's lane-FFT transformer. The first thread's is made before the region,
// and an exception from another's (out of memory) is carried out of it and thrown here.
template <typename R, typename Body>
void over_lane_rows(int64_t rows, int64_t n, int nthreads, Body&& body) {
  thread_lane_fft<R>(n);
  std::exception_ptr error;
  std::mutex error_mutex;
  over_rows(rows, nthreads, [&](int, int64_t lo, int64_t hi) {
    try {
      body(thread_lane_fft<R>(n), lo, hi);
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  });
  if (error) std::rethrow_exception(error);
}

// (rows, n) real -> (rows, M) complex: X[m] = w_m Σ_k x[k] e^{-2πi mk/n}.
template <typename R>
void analysis_rows(const R* x, std::complex<R>* X, int64_t rows, int64_t n, int64_t M, double w_edge,
                   double w_int) {
  using C = std::complex<R>;
  const int nthreads = threads_for(rows, n);
  if (detail::lane_fft_supports(n)) {
    over_lane_rows<R>(rows, n, nthreads, [&](detail::LaneRowFft<R>& fft, int64_t lo, int64_t hi) {
      fft.forward(x + lo * n, X + lo * M, hi - lo, M, w_edge, w_int);
    });
    return;
  }
  const auto plan = cached_plan<R>(n, Direction::r2c);
  const R we = static_cast<R>(w_edge), wi = static_cast<R>(w_int);
  std::vector<AlignedBuffer<R>> in;
  std::vector<AlignedBuffer<C>> out;
  for (int t = 0; t < nthreads; ++t) in.emplace_back(n), out.emplace_back(n / 2 + 1);
  over_rows(rows, nthreads, [&](int t, int64_t lo, int64_t hi) {
    R* buf = in[t].get();
    C* spec = out[t].get();
    for (int64_t r = lo; r < hi; ++r) {
      std::memcpy(buf, x + r * n, static_cast<size_t>(n) * sizeof(R));
      Fftw<R>::r2c(plan->plan, buf, spec);
      C* dst = X + r * M;
      for (int64_t m = 0; m < M; ++m) dst[m] = spec[m] * (is_edge(m, n) ? we : wi);
    }
  });
}

// (rows, M) complex -> (rows, n) real: x[k] = Re Σ_{m<M} w_m X[m] e^{2πi mk/n}, modes m >= M zero.
template <typename R>
void synthesis_rows(const std::complex<R>* X, R* x, int64_t rows, int64_t n, int64_t M, double w_edge,
                    double w_int) {
  using C = std::complex<R>;
  const int nthreads = threads_for(rows, n);
  if (detail::lane_fft_supports(n)) {
    over_lane_rows<R>(rows, n, nthreads, [&](detail::LaneRowFft<R>& fft, int64_t lo, int64_t hi) {
      fft.inverse(X + lo * M, x + lo * n, hi - lo, M, w_edge, w_int);
    });
    return;
  }
  const auto plan = cached_plan<R>(n, Direction::c2r);
  const int64_t h = n / 2 + 1;
  // FFTW's c2r sums the Hermitian extension: Y_0 + 2 Re Σ_{0<m<n/2} Y_m e^{..} + Y_{n/2} (-1)^k,
  // so interior modes get half their weight, and edge modes only their real part.
  const R we = static_cast<R>(w_edge), wi_half = static_cast<R>(w_int / 2);
  std::vector<AlignedBuffer<C>> in;
  std::vector<AlignedBuffer<R>> out;
  for (int t = 0; t < nthreads; ++t) in.emplace_back(h), out.emplace_back(n);
  over_rows(rows, nthreads, [&](int t, int64_t lo, int64_t hi) {
    C* spec = in[t].get();
    R* buf = out[t].get();
    for (int64_t r = lo; r < hi; ++r) {
      const C* src = X + r * M;
      for (int64_t m = 0; m < M; ++m) spec[m] = is_edge(m, n) ? C(src[m].real() * we, R(0)) : src[m] * wi_half;
      for (int64_t m = M; m < h; ++m) spec[m] = C(0);
      Fftw<R>::c2r(plan->plan, spec, buf);  // destroys spec: it is rebuilt for every row
      std::memcpy(x + r * n, buf, static_cast<size_t>(n) * sizeof(R));
    }
  });
}

struct Weights {
  double edge;
  double interior;
};

Tensor synthesis(const Tensor& X, int64_t nlon, Weights w, const std::string& name);

// The CUDA twin of analysis_rows (forward) or synthesis_rows: cuFFT with the weights applied in a
// kernel (ops/sphere/fft_cuda.cu). `in` is contiguous, (rows, n) real or (rows, M) complex.
void cuda_rows(bool forward, const Tensor& in, const Tensor& out, int64_t rows, int64_t n, int64_t M, Weights w,
               const std::string& name) {
  GS_CHECK(rows <= INT_MAX, "{}: {} rows exceed cuFFT's batch limit of {}", name, rows, INT_MAX);
  const bool f64 = real_dtype(in.dtype()) == DType::f64;
  kernels::launch_cuda(name.c_str(), forward ? "rfft_rows" : "irfft_rows", in, [&](void* stream) {
    const size_t bytes = cuda_kernels::fft_scratch_bytes(f64, rows, n);
    const Tensor scratch = empty({static_cast<int64_t>((bytes + 7) / 8)}, DType::f64, in.device());
    cuda_kernels::FftStatus st;
    const bool ok =
        forward ? GS_CUDA_CALL(cuda_kernels::rfft_rows(f64, in.raw_data(), out.raw_data(), rows, n, M, w.edge,
                                                       w.interior, scratch.raw_data(), stream, &st))
                : GS_CUDA_CALL(cuda_kernels::irfft_rows(f64, in.raw_data(), out.raw_data(), rows, n, M, w.edge,
                                                        w.interior, scratch.raw_data(), stream, &st));
    GS_CHECK(ok, "{}: {} failed for {} rows of nlon {}: {}", name, st.call, rows, n, st.result);
    return true;
  });
}

// A_w over the last dim of real x (..., n) -> (..., M), recorded as `name`.
Tensor analysis(const Tensor& x, int64_t mmax, Weights w, const std::string& name) {
  kernels::check_defined(x, name.c_str());
  GS_CHECK(is_floating(x.dtype()) && x.dim() >= 1,
           "{}: expected a real input (f32 or f64) of shape (..., nlon), got {}", name, x.meta_str());
  const int64_t n = x.size(-1);
  GS_CHECK(n >= 1 && n <= INT_MAX, "{}: nlon (the last dim) must be in [1, {}], got {}", name, INT_MAX, n);
  GS_CHECK(mmax >= 1 && mmax <= n / 2 + 1,
           "{}: mmax = {} is out of range for nlon = {}: expected 1 <= mmax <= nlon/2 + 1 = {}", name, mmax, n,
           n / 2 + 1);
  Shape out_sizes = x.sizes();
  out_sizes.back() = mmax;
  Tensor out = empty(out_sizes, complex_dtype(x.dtype()), x.device());
  const int64_t rows = x.numel() / n;
  if (rows > 0 && kernels::on_cuda(x)) {
    cuda_rows(true, contiguous_copy(x), out, rows, n, mmax, w, name);
  } else if (rows > 0) {
    kernels::check_cpu(x, name.c_str());
    Tensor xc = contiguous_copy(x);
    dispatch_float(x.dtype(), name, [&]<typename R>() {
      analysis_rows<R>(xc.data<R>(), out.data<std::complex<R>>(), rows, n, mmax, w.edge, w.interior);
    });
  }
  if (should_record({x}))
    record_op(name, {x}, {&out}, {}, {}, [n, w, name](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{synthesis(g[0], n, w, name + "_backward")};
    });
  return out;
}

// B_w over the last dim of complex X (..., M) -> (..., nlon), recorded as `name`.
Tensor synthesis(const Tensor& X, int64_t nlon, Weights w, const std::string& name) {
  kernels::check_defined(X, name.c_str());
  GS_CHECK(is_complex(X.dtype()) && X.dim() >= 1,
           "{}: expected a complex input (c64 or c128) of shape (..., mmax), got {}", name, X.meta_str());
  GS_CHECK(nlon >= 1 && nlon <= INT_MAX, "{}: nlon must be in [1, {}], got {}", name, INT_MAX, nlon);
  const int64_t M = X.size(-1);
  GS_CHECK(M >= 1 && M <= nlon / 2 + 1,
           "{}: mmax = {} (the last dim of {}) is out of range for nlon = {}: expected 1 <= mmax <= nlon/2 + 1 = {}",
           name, M, X.meta_str(), nlon, nlon / 2 + 1);
  Shape out_sizes = X.sizes();
  out_sizes.back() = nlon;
  Tensor out = empty(out_sizes, real_dtype(X.dtype()), X.device());
  const int64_t rows = X.numel() / M;
  if (rows > 0 && kernels::on_cuda(X)) {
    cuda_rows(false, contiguous_copy(X), out, rows, nlon, M, w, name);
  } else if (rows > 0) {
    kernels::check_cpu(X, name.c_str());
    Tensor Xc = contiguous_copy(X);
    dispatch_float(real_dtype(X.dtype()), name, [&]<typename R>() {
      synthesis_rows<R>(Xc.data<std::complex<R>>(), out.data<R>(), rows, nlon, M, w.edge, w.interior);
    });
  }
  if (should_record({X}))
    record_op(name, {X}, {&out}, {}, {}, [M, w, name](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{analysis(g[0], M, w, name + "_backward")};
    });
  return out;
}

}  // namespace

Tensor rfft_lon(const Tensor& x, int64_t mmax) {
  const double s = x.defined() && x.dim() >= 1 && x.size(-1) >= 1 ? 2.0 * std::numbers::pi / x.size(-1) : 1.0;
  return analysis(x, mmax, {s, s}, "rfft_lon");
}

Tensor irfft_lon(const Tensor& X, int64_t nlon) { return synthesis(X, nlon, {1.0, 2.0}, "irfft_lon"); }

namespace detail {

namespace {

// The checks the recorded ops make on their inputs, for the raw entries below: both contiguous on the
// CPU, matching dtypes, the same rows, and 1 <= mmax <= nlon/2 + 1.
void check_into(const char* op, const Tensor& real, const Tensor& spectral) {
  const bool placed = real.defined() && spectral.defined() && real.device().type == DeviceType::cpu &&
                      spectral.device().type == DeviceType::cpu && real.is_contiguous() && spectral.is_contiguous();
  const bool typed = placed && is_floating(real.dtype()) && spectral.dtype() == complex_dtype(real.dtype());
  const bool shaped = typed && real.dim() >= 1 && spectral.dim() == real.dim() && real.size(-1) >= 1 &&
                      spectral.size(-1) >= 1 && spectral.size(-1) <= real.size(-1) / 2 + 1 &&
                      real.numel() / real.size(-1) == spectral.numel() / spectral.size(-1);
  GS_CHECK(shaped,
           "{}: expected contiguous CPU tensors (rows, nlon) real and (rows, mmax) complex of one precision with "
           "1 <= mmax <= nlon/2 + 1, got {} and {}",
           op, real.meta_str(), spectral.meta_str());
}

}  // namespace

void rfft_lon_into(const Tensor& x, const Tensor& out) {
  check_into("rfft_lon_into", x, out);
  const int64_t n = x.size(-1), mmax = out.size(-1), rows = x.numel() / n;
  const double s = 2.0 * std::numbers::pi / static_cast<double>(n);
  dispatch_float(x.dtype(), "rfft_lon", [&]<typename R>() {
    analysis_rows<R>(x.data<R>(), out.data<std::complex<R>>(), rows, n, mmax, s, s);
  });
}

namespace {

// Runs body(fft, field, r0, r1) over every group of kLaneRows rows of every field, the groups split
// over the threads as rows are.
template <typename R, typename Body>
void over_field_groups(int64_t fields, int64_t nlat, int64_t n, Body&& body) {
  constexpr int64_t L = kLaneRows<R>;
  const int64_t groups = (nlat + L - 1) / L;
  over_lane_rows<R>(fields * groups, n, threads_for(fields * nlat, n),
                    [&](detail::LaneRowFft<R>& fft, int64_t lo, int64_t hi) {
                      for (int64_t u = lo; u < hi; ++u) {
                        const int64_t b = u / groups, r0 = u % groups * L;
                        body(fft, b, r0, std::min(nlat, r0 + L));
                      }
                    });
}

// Checks a (fields, nlat, nlon) real and (fields, ceil(nlat / L), 2 mmax, L) grouped pair and
// returns mmax.
int64_t check_groups(const char* op, const Tensor& real, const Tensor& groups) {
  const bool placed = real.defined() && groups.defined() && real.device().type == DeviceType::cpu &&
                      groups.device().type == DeviceType::cpu && real.is_contiguous() && groups.is_contiguous() &&
                      is_floating(real.dtype()) && groups.dtype() == real.dtype() && real.dim() == 3 &&
                      groups.dim() == 4;
  const int64_t mmax = placed ? groups.size(2) / 2 : 0;
  const bool ok = placed && mmax >= 1 && mmax <= real.size(2) / 2 + 1 && detail::lane_fft_supports(real.size(2)) &&
                  groups.sizes() == grouped_spectra_shape(real.size(0), real.size(1), mmax, real.dtype());
  GS_CHECK(ok,
           "{}: expected contiguous CPU tensors (fields, nlat, nlon) real and (fields, ceil(nlat / L), 2 mmax, L) of "
           "the same dtype (L = 64 bytes of it), 1 <= mmax <= nlon/2 + 1, nlon a length the lane FFT handles; got {} "
           "and {}",
           op, real.defined() ? real.meta_str() : "an undefined tensor",
           groups.defined() ? groups.meta_str() : "an undefined tensor");
  return mmax;
}

}  // namespace

Shape grouped_spectra_shape(int64_t fields, int64_t nlat, int64_t mmax, DType real) {
  const int64_t lanes = 64 / static_cast<int64_t>(dtype_size(real));
  return {fields, (nlat + lanes - 1) / lanes, 2 * mmax, lanes};
}

void rfft_lon_groups(const Tensor& x, const Tensor& groups) {
  const int64_t mmax = check_groups("rfft_lon_groups", x, groups);
  const int64_t fields = x.size(0), nlat = x.size(1), n = x.size(2);
  if (fields == 0) return;
  const int64_t field = groups.numel() / fields;
  const double s = 2.0 * std::numbers::pi / static_cast<double>(n);
  dispatch_float(x.dtype(), "rfft_lon_groups", [&]<typename R>() {
    const R* in = x.data<R>();
    R* out = groups.data<R>();
    over_field_groups<R>(fields, nlat, n, [&](detail::LaneRowFft<R>& fft, int64_t b, int64_t r0, int64_t r1) {
      fft.forward_groups(in + b * nlat * n, out + b * field, r0, r1, mmax, s, s);
    });
  });
}

void irfft_lon_groups(const Tensor& groups, const Tensor& out) {
  const int64_t mmax = check_groups("irfft_lon_groups", out, groups);
  const int64_t fields = out.size(0), nlat = out.size(1), n = out.size(2);
  if (fields == 0) return;
  const int64_t field = groups.numel() / fields;
  dispatch_float(out.dtype(), "irfft_lon_groups", [&]<typename R>() {
    const R* in = groups.data<R>();
    R* x = out.data<R>();
    over_field_groups<R>(fields, nlat, n, [&](detail::LaneRowFft<R>& fft, int64_t b, int64_t r0, int64_t r1) {
      fft.inverse_groups(in + b * field, x + b * nlat * n, r0, r1, mmax, 1.0, 2.0);
    });
  });
}

void irfft_lon_into(const Tensor& X, const Tensor& out) {
  check_into("irfft_lon_into", out, X);
  const int64_t M = X.size(-1), nlon = out.size(-1), rows = X.numel() / M;
  dispatch_float(real_dtype(X.dtype()), "irfft_lon", [&]<typename R>() {
    synthesis_rows<R>(X.data<std::complex<R>>(), out.data<R>(), rows, nlon, M, 1.0, 2.0);
  });
}

}  // namespace detail

namespace {

using V = std::vector<Tensor>;


// Each registered function returns several transforms of one input, so one sample covers the full
// spectrum (Nyquist included for even nlon) and truncation / zero-padding.
const OpRegistrar registrar{
    {"rfft_lon",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"even nlon, batch dims", {sample_leaf({2, 3, 8}, sub_key(k, 1))}},
           {"odd nlon", {sample_leaf({3, 7}, sub_key(k, 2))}},
           {"nlon = 2 (DC and Nyquist only)", {sample_leaf({4, 2}, sub_key(k, 3))}},
           {"non-contiguous", {sample_leaf_transposed({3, 6}, sub_key(k, 4))}},
       };
     },
     [](const V& x) {
       const int64_t n = x[0].size(-1);
       return V{rfft_lon(x[0], n / 2 + 1), rfft_lon(x[0], std::max<int64_t>(1, n / 3))};
     }},
    {"irfft_lon",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"batch dims", {sample_leaf({2, 3, 5}, sub_key(k, 5), DType::c128)}},
           {"mmax = 1", {sample_leaf({3, 1}, sub_key(k, 6), DType::c128)}},
           {"non-contiguous", {sample_leaf_transposed({2, 4}, sub_key(k, 7), DType::c128)}},
       };
     },
     [](const V& x) {
       const int64_t M = x[0].size(-1);
       // even nlon with the Nyquist mode, odd nlon with every mode, and zero-padding
       return V{irfft_lon(x[0], std::max<int64_t>(1, 2 * M - 2)), irfft_lon(x[0], 2 * M - 1),
                irfft_lon(x[0], 2 * M + 2)};
     }},
};

}  // namespace
}  // namespace gs::sphere
