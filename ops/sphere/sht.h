// Spherical harmonic transforms as differentiable ops, torch-harmonics' conventions
// (RealSHT / InverseRealSHT; see ops/sphere/NOTES.md, sections "Legendre normalisation" and "SHT"):
//
//   sht:  f (..., nlat, nlon) real  ->  a (..., lmax, mmax) complex, zero where l < m
//         a_lm = sum_j w_j Pbar_l^m(x_j) (2 pi / nlon) sum_k f_jk e^{-i m phi_k}
//   isht: a (..., lmax, mmax)       ->  f (..., nlat, nlon) real
//         f_jk = Re sum_{l,m} c_m a_lm Pbar_l^m(x_j) e^{i m phi_k},  c_0 = 1, c_m = 2 (Nyquist once)
//
// Each is a longitude FFT (ops/sphere/fft.h) and a Legendre contraction in latitude; the two
// contractions are the ops with dedicated adjoint kernels (each one's backward is the other
// direction of the same table), so the gradients of gradients come for free.
#pragma once
#include <compare>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/tensor.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/legendre/functions.h"

namespace gs::sphere {

// A transform: the grid (nlat rows of `grid`, nlon equally spaced longitudes from phi = 0) and
// the exclusive spectral bounds l < lmax, m < mmax.
struct ShtSpec {
  GridKind grid = GridKind::legendre_gauss;
  int64_t nlat = 0;
  int64_t nlon = 0;
  int64_t lmax = 0;
  int64_t mmax = 0;
  Normalization norm = Normalization::ortho;
  bool csphase = true;

  auto operator<=>(const ShtSpec&) const = default;
  // "legendre-gauss 32x64, lmax 32, mmax 32, ortho"
  std::string str() const;
};

// Fills missing bounds with torch-harmonics' defaults (resolve_truncation in grids.h: triangular
// when neither is given) and rejects an lmax the grid's quadrature cannot resolve.
ShtSpec make_sht_spec(GridKind grid, int64_t nlat, int64_t nlon, std::optional<int64_t> lmax = {},
                      std::optional<int64_t> mmax = {}, Normalization norm = Normalization::ortho,
                      bool csphase = true, TruncationRule rule = TruncationRule::gradsphere);

// f (..., nlat, nlon) f32/f64 -> (..., lmax, mmax) c64/c128.
Tensor sht(const Tensor& x, const ShtSpec& spec);
// (..., lmax, mmax) c64/c128 -> (..., nlat, nlon) f32/f64. Entries with l < m are ignored (their
// gradient is zero), as is the imaginary part at m = 0 (and at the Nyquist order).
Tensor isht(const Tensor& coeffs, const ShtSpec& spec);

// The latitude halves, on longitude Fourier coefficients X (..., nlat, mmax) c64/c128:
//   legendre_analysis:  (..., nlat, mmax) -> (..., lmax, mmax),  out[l,m] = sum_j w_j Pbar_l^m(x_j) X[j,m]
//                       (zero where l < m)
//   legendre_synthesis: (..., lmax, mmax) -> (..., nlat, mmax),  out[j,m] = sum_{l>=m} Pbar_l^m(x_j) c[l,m]
// sht = legendre_analysis(rfft_lon(x, mmax)), isht = irfft_lon(legendre_synthesis(coeffs), nlon).
Tensor legendre_analysis(const Tensor& X, const ShtSpec& spec);
Tensor legendre_synthesis(const Tensor& coeffs, const ShtSpec& spec);

// The same contractions on a block of the orders, [m_begin, m_begin + count) with count the last
// dim of the input (0 is allowed): (..., nlat, count) -> (..., lmax, count) and back. Each order's
// column is computed by the same operations as in the full contraction (equal value for value; a
// zero's sign can differ, where one grouping of orders stores 0 and the other sums 0 * a), from a table that holds
// only the block's orders: what a process holding a block of m in the distributed SHT needs.
Tensor legendre_analysis_orders(const Tensor& X, const ShtSpec& spec, int64_t m_begin);
Tensor legendre_synthesis_orders(const Tensor& coeffs, const ShtSpec& spec, int64_t m_begin);

// The coefficient block (..., lmax, mmax) cut or zero-padded to (..., lmax_to, mmax_to).
Tensor truncate_or_pad_coeffs(const Tensor& coeffs, int64_t lmax_to, int64_t mmax_to);

// A field on grid `from` resampled onto grid `to` through the SHT:
// isht(truncate_or_pad_coeffs(sht(x, from), to.lmax, to.mmax), to). Exact for fields band-limited
// to the smaller of the two truncations. Both specs must share normalisation and csphase.
Tensor resample(const Tensor& x, const ShtSpec& from, const ShtSpec& to);

// Bytes of the cached Legendre table of one direction in `dtype` (f32 or f64: the real dtype of
// the data); builds the table if it is not cached yet. The analysis table serves sht and its backward; the
// synthesis table serves isht and its backward. A forward-and-inverse pair holds both. m_count >= 0:
// the table of orders [m_begin, m_begin + m_count) only.
size_t sht_table_bytes(const ShtSpec& spec, DType dtype, bool analysis, int64_t m_begin = 0, int64_t m_count = -1);

}  // namespace gs::sphere
