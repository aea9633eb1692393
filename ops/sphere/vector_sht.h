// The vector spherical harmonic transform and the spectral helpers of a shallow-water solver, as
// differentiable ops. Conventions follow torch-harmonics' RealVectorSHT / InverseRealVectorSHT
// (torch_harmonics/sht.py, _precompute_dlegpoly in legendre.py), so coefficients compare one to
// one; decisions and derivations: ops/sphere/NOTES.md, section "Vector SHT".
//
// Layout (as torch-harmonics): a vector field is ONE tensor (..., 2, nlat, nlon), real, with
//   [..., 0, :, :] = u, the eastward component, and [..., 1, :, :] = v, the northward component
// (the layout of torch-harmonics' shallow-water solver). Its coefficients are (..., 2, lmax, mmax),
// complex, zero where l < m and at l = 0:
//   [..., 0, :, :] = S (torch-harmonics' "spheroidal" slot): the stream function psi / a,
//   [..., 1, :, :] = T (its "toroidal" slot): the velocity potential chi / a,
// such that, on the sphere of radius a (grad_1 the gradient on the unit sphere, k the local
// vertical), with phi the latitude and lambda the longitude,
//   (u, v) = k x grad_1 S + grad_1 T
//   u = -dS/dphi + 1/cos(phi) dT/dlambda,   v = 1/cos(phi) dS/dlambda + dT/dphi,
// and the vorticity and divergence are zeta_lm = -l(l+1)/a S_lm, delta_lm = -l(l+1)/a T_lm.
// (torch-harmonics' slot names fit the other ordering, (-v, u) = (colatitude, longitude
// components), for which slot 0 is the spheroidal potential; the numbers are the same.)
#pragma once
#include <cstdint>

#include "engine/tensor.h"
#include "ops/sphere/sht.h"

namespace gs::sphere {

// (..., 2, nlat, nlon) f32/f64 -> (..., 2, lmax, mmax) c64/c128: RealVectorSHT.
//   S_lm = 1/(l(l+1)) sum_j w_j [dPbar_l^m/dtheta U_m(j) - i m Pbar_l^m/sin(theta) V_m(j)]
//   T_lm = 1/(l(l+1)) sum_j w_j [-i m Pbar_l^m/sin(theta) U_m(j) - dPbar_l^m/dtheta V_m(j)]
// with U_m, V_m = rfft_lon(u, v) (2 pi/nlon scaling), theta the colatitude; l = 0 gives 0.
// Requires lmax within the grid's supported limit (as sht).
Tensor vector_sht(const Tensor& uv, const ShtSpec& spec);

// (..., 2, lmax, mmax) c64/c128 -> (..., 2, nlat, nlon) f32/f64: InverseRealVectorSHT.
//   U_m(j) = sum_l dPbar/dtheta S_lm + i m Pbar/sin(theta) T_lm,
//   V_m(j) = sum_l i m Pbar/sin(theta) S_lm - dPbar/dtheta T_lm,   then irfft_lon.
// Entries with l < m and the l = 0 row are ignored (zero gradient), as are the imaginary parts at
// m = 0 and at the Nyquist order.
Tensor ivector_sht(const Tensor& coeffs, const ShtSpec& spec);

// The latitude halves on longitude Fourier coefficients (the kernels with dedicated adjoints):
//   vector_legendre_analysis:  (..., 2, nlat, mmax) -> (..., 2, lmax, mmax)
//   vector_legendre_synthesis: (..., 2, lmax, mmax) -> (..., 2, nlat, mmax)
// vector_sht = vector_legendre_analysis(rfft_lon(uv, mmax)),
// ivector_sht = irfft_lon(vector_legendre_synthesis(coeffs), nlon).
Tensor vector_legendre_analysis(const Tensor& X, const ShtSpec& spec);
Tensor vector_legendre_synthesis(const Tensor& coeffs, const ShtSpec& spec);

// The same on a block of the orders [m_begin, m_begin + count), count the input's last dim (may be
// 0), from tables of those orders only; each column equal to the full contraction's value for
// value (as legendre_analysis_orders).
Tensor vector_legendre_analysis_orders(const Tensor& X, const ShtSpec& spec, int64_t m_begin);
Tensor vector_legendre_synthesis_orders(const Tensor& coeffs, const ShtSpec& spec, int64_t m_begin);

// Winds (..., 2, nlat, nlon) -> (..., 2, lmax, mmax): [0] = zeta_lm (vorticity), [1] = delta_lm
// (divergence), coefficients in the scalar SHT's convention (isht of them gives the grid fields).
// = -l(l+1)/radius * vector_sht(uv). torch-harmonics' ShallowWaterSolver.vrtdivspec.
Tensor vorticity_divergence(const Tensor& uv, const ShtSpec& spec, double radius = 1.0);

// The inverse: (..., 2, lmax, mmax) [zeta, delta] -> winds (..., 2, nlat, nlon)
// = ivector_sht(-radius/(l(l+1)) * vd) (l = 0 -> 0: a mean vorticity or divergence has no wind).
// torch-harmonics' ShallowWaterSolver.getuv.
Tensor winds_from_vorticity_divergence(const Tensor& vd, const ShtSpec& spec, double radius = 1.0);

// c (..., lmax, mmax) complex -> -l(l+1)/radius^2 c (the Laplacian of the field isht(c)).
Tensor spectral_laplacian(const Tensor& c, double radius = 1.0);
// c (..., lmax, mmax) complex -> -radius^2/(l(l+1)) c, and 0 at l = 0.
Tensor inverse_spectral_laplacian(const Tensor& c, double radius = 1.0);

// c (..., lmax, mmax) complex, the scalar SHT of f -> the gradient of f on the grid,
// (..., 2, nlat, nlon) = (1/(a cos phi) df/dlambda, 1/a df/dphi) (eastward, northward), computed
// as ivector_sht of the purely potential field (S = 0, T = c / radius), exactly (no pole division).
Tensor spectral_gradient(const Tensor& c, const ShtSpec& spec, double radius = 1.0);

// Bytes of the cached derivative tables of one direction (both dP/dtheta and m P/sin theta).
// m_count >= 0: the tables of orders [m_begin, m_begin + m_count) only.
size_t vector_sht_table_bytes(const ShtSpec& spec, DType dtype, bool analysis, int64_t m_begin = 0,
                              int64_t m_count = -1);

}  // namespace gs::sphere
