// The longitude FFT: the first stage of the SHT (rfft_lon) and the last stage of the inverse SHT
// (irfft_lon), as differentiable ops over the last dim. Scaling follows torch-harmonics exactly
// (RealSHT: 2π·rfft(norm="forward")[..., :mmax]; InverseRealSHT: irfft(n=nlon, norm="forward")), so
//   irfft_lon(rfft_lon(x, nlon/2 + 1), nlon) == 2π x,   rfft_lon(irfft_lon(X, nlon), mmax) == 2π X
// (the second for X with real X[0] and real Nyquist term). The 2π is cancelled by the Legendre
// contraction: with orthonormal Y_lm, sum_j w_j Pbar_l^m(x_j) Pbar_l'^m(x_j) = δ_ll' / (2π).
// Details and the FFTW plan choice: ops/sphere/NOTES.md, "Longitude FFT".
#pragma once
#include <cstdint>
#include <mutex>

#include "engine/tensor.h"

namespace gs::sphere {

// x (..., nlon) f32/f64 -> X (..., mmax) c64/c128, for 1 <= mmax <= nlon/2 + 1:
//   X[m] = (2π/nlon) Σ_k x[k] e^{-2πi m k/nlon},  m < mmax.
// Non-contiguous x is copied to contiguous first. Backward: an irfft-like op (see fft.cpp).
Tensor rfft_lon(const Tensor& x, int64_t mmax);

// X (..., mmax) c64/c128 -> x (..., nlon) f32/f64, for nlon >= 1 and 1 <= mmax <= nlon/2 + 1:
//   x[k] = Re( Σ_{m<mmax} c_m X[m] e^{2πi m k/nlon} ),
// c_0 = 1, c_m = 2 for 0 < m < nlon/2, c_{nlon/2} = 1 (the Nyquist term, nlon even). Modes
// m >= mmax are zero (zero-padding); the imaginary parts of X[0] and of the Nyquist term are ignored.
Tensor irfft_lon(const Tensor& X, int64_t nlon);

namespace detail {
// The CPU kernels of rfft_lon and irfft_lon alone, recorded nowhere: x (rows, nlon) into out
// (rows, mmax), X (rows, mmax) into out (rows, nlon), all contiguous on the CPU with the sizes
// already checked. For composites that run the SHT's stages on blocks of fields (sht_blocks.h).
void rfft_lon_into(const Tensor& x, const Tensor& out);
void irfft_lon_into(const Tensor& X, const Tensor& out);
// The same transforms of x (fields, nlat, nlon) with the spectra grouped as the lane FFT holds
// them (lane_fft.h, forward_groups): groups (fields, G = ceil(nlat / L), 2 mmax, L) with L rows of
// 64 bytes, mode m of row j at [j / L][2m + re/im][j % L]; the layout the on-the-fly Legendre
// kernels read and write (legendre/recurrence.h). The rows past nlat in the last group are padding
// (the forward writes copies into them; the inverse reads them, which must be finite, and drops
// their results). Lane-FFT lengths only (lane_fft_supports(nlon)).
void rfft_lon_groups(const Tensor& x, const Tensor& groups);
// The grouped spectra's shape for `fields` fields of nlat rows and mmax orders in dtype `real`:
// (fields, ceil(nlat / L), 2 mmax, L), L = 64 bytes of `real` (the one place the layout is sized).
Shape grouped_spectra_shape(int64_t fields, int64_t nlat, int64_t mmax, DType real);
void irfft_lon_groups(const Tensor& groups, const Tensor& out);
}  // namespace detail

// FFTW's planner (fftw_plan_*, fftw_destroy_plan, for every precision) is not thread-safe; only
// its execute functions are. Any code in gradsphere that plans FFTW transforms of its own must hold
// this mutex while it does, so that it cannot race with the plan cache of these ops.
std::mutex& fftw_planner_mutex();

}  // namespace gs::sphere
