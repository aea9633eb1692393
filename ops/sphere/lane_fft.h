// Real FFTs of many rows at once, one row per SIMD lane: the kernels behind rfft_lon / irfft_lon
// (ops/sphere/fft.h) for the lengths they support. Internal to ops/sphere.
//
// Why not FFTW for every row: an SHT transforms hundreds of rows of the same length, and FFTW
// (ESTIMATE plans, one row per call) took 1.3 us per 360-point row here, a third of a whole SHT at
// 180x360. Transforming L rows side by side (L = 8 doubles or 16 floats, one 512-bit register) needs
// no shuffles at all, and every lane runs the same instructions, so a row's result does not depend
// on its lane, its neighbours or the thread split. Decisions and measurements: ops/sphere/NOTES.md,
// "Longitude FFT".
//
// A real row of even length n = 2h is packed as z[k] = x[2k] + i x[2k+1] and transformed with a
// complex FFT of length h (Stockham, radices 4, 2, 3, 5 and small odd primes); the half-length
// spectrum is then split into the even- and odd-sample spectra and recombined. A row of odd length
// (an SFNO's internal grid: 256 / 3 = 85 longitudes) goes through a complex FFT of length n with
// zero imaginary parts, whose largest prime stage (first forward, last inverse; a prime >= 7) skips
// the half of its work that the real inputs or outputs make unnecessary; still several times faster than
// FFTW's ESTIMATE plans one row at a time (ops/sphere/NOTES.md). Lengths with a prime factor above
// kMaxRadix (of n/2 for even n, of n for odd n) stay with FFTW.
#pragma once
#include <complex>
#include <cstdint>
#include <memory>

namespace gs::sphere::detail {

// The largest prime factor the lane FFT handles (a direct DFT of that size per stage, about r/4
// multiply-adds per value and row). Up to 61 it still beats FFTW one row at a time: the 43-point
// rows of an SFNO's internal grid at 64x128 (128 / 3 = 42.7 -> 43) took 0.46 us a row with FFTW
// against ~0.1 in lanes (ops/sphere/NOTES.md, "Longitude FFT").
inline constexpr int64_t kMaxRadix = 61;

// Rows transformed side by side: one 64-byte register of R (8 doubles, 16 floats).
template <typename R>
inline constexpr int64_t kLaneRows = 64 / static_cast<int64_t>(sizeof(R));

// Whether the lane FFT handles rows of length n >= 2: every prime factor of n/2 (even n) or of n
// (odd n) <= kMaxRadix.
bool lane_fft_supports(int64_t n);

template <typename R>
struct LanePlan;

// One thread's transformer for rows of length n (lane_fft_supports(n) must hold): the cached
// plan and the group buffers, allocated here so that the parallel loops that use it allocate
// nothing.
template <typename R>
class LaneRowFft {
 public:
  explicit LaneRowFft(int64_t n);
  ~LaneRowFft();
  LaneRowFft(LaneRowFft&&) noexcept;
  LaneRowFft(const LaneRowFft&) = delete;
  LaneRowFft& operator=(const LaneRowFft&) = delete;
  LaneRowFft& operator=(LaneRowFft&&) = delete;

  // Rows [0, rows) of x (rows, n) -> X (rows, M), 1 <= M <= n/2 + 1 (integer division):
  //   X[m] = w_m sum_k x[k] e^{-2 pi i m k / n},  w_m = w_edge at m = 0 and, for even n only, at the
  //   Nyquist mode m = n/2; w_int otherwise.
  void forward(const R* x, std::complex<R>* X, int64_t rows, int64_t M, double w_edge, double w_int);
  // Rows [0, rows) of X (rows, M) -> x (rows, n), 1 <= M <= n/2 + 1:
  //   x[k] = Re sum_{m<M} w_m X[m] e^{2 pi i m k / n}, the same weights; the imaginary parts of the
  // edge modes are ignored (the real part of a Hermitian sum).
  void inverse(const std::complex<R>* X, R* x, int64_t rows, int64_t M, double w_edge, double w_int);

  // The same transforms of rows [r0, r1) of one field (x: its row 0) with the spectra grouped:
  // rows in groups of L = kLaneRows<R>, each group's M modes as [m][re/im][lane] (the transform's
  // own layout), group after group: mode m of row j at groups[((j / L) 2M + 2m + re/im) L + j % L].
  // r0 is a multiple of L. forward writes the lanes of a last partial group too (copies of its
  // last row); inverse reads them (they must be finite) and drops their results.
  void forward_groups(const R* x, R* groups, int64_t r0, int64_t r1, int64_t M, double w_edge, double w_int);
  void inverse_groups(const R* groups, R* x, int64_t r0, int64_t r1, int64_t M, double w_edge, double w_int);

 private:
  struct Buffers;
  std::shared_ptr<const LanePlan<R>> plan_;
  std::unique_ptr<Buffers> buffers_;
};

}  // namespace gs::sphere::detail
