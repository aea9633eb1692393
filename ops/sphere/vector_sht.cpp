// The vector SHT (torch-harmonics' RealVectorSHT / InverseRealVectorSHT) and the shallow-water
// spectral helpers. Conventions and derivations: vector_sht.h and ops/sphere/NOTES.md, "Vector SHT".
//
// The Legendre contractions of vector data, their tables (D = dPbar/dtheta, M = m Pbar / sin theta)
// and their adjoint pairing belong to ops/sphere/legendre/ (contraction.h, vector_table.h); the
// ops here check their inputs and call them.
#include "ops/sphere/vector_sht.h"

#include <cmath>
#include <vector>

#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/registry.h"
#include "ops/shape_ops.h"
#include "ops/sphere/fft.h"
#include "ops/sphere/legendre/contraction.h"
#include "ops/sphere/sht_common.h"
#include "ops/view.h"

namespace gs::sphere {
namespace {

using detail::check_spec;
using detail::table_key;
using legendre::Direction;

Tensor contract(const Tensor& x, const LegendreTableKey& key, Direction dir) {
  return legendre::contract(x, {key, legendre::Components::vector}, dir);
}

// x must be (..., 2, rows, cols) of a complex (or real) dtype.
void check_vector_input(const Tensor& x, const char* op, const char* what, bool complex_input, const char* rows_name,
                        int64_t rows, const char* cols_name, int64_t cols, const ShtSpec& spec) {
  kernels::check_defined(x, op);
  const bool dtype_ok = complex_input ? is_complex(x.dtype()) : is_floating(x.dtype());
  GS_CHECK(dtype_ok && x.dim() >= 3 && x.size(-3) == 2 && x.size(-2) == rows && x.size(-1) == cols,
           "{}: expected {} of shape (..., 2, {} = {}, {} = {}) with dtype {} for {}, got {}", op, what, rows_name,
           rows, cols_name, cols, complex_input ? "c64 or c128" : "f32 or f64", spec.str(), x.meta_str());
}

void check_scalar_coeffs(const Tensor& c, const char* op) {
  kernels::check_defined(c, op);
  GS_CHECK(is_complex(c.dtype()) && c.dim() >= 2,
           "{}: expected spectral coefficients of shape (..., lmax, mmax) with dtype c64 or c128, got {}", op,
           c.meta_str());
}

// A constant (lmax, 1) tensor of `dtype` (complex) on `device` holding f(l): broadcasts over (..., lmax, mmax).
template <typename F>
Tensor degree_factor(int64_t lmax, DType dtype, Device device, F f) {
  std::vector<c128> v(static_cast<size_t>(lmax));
  for (int64_t l = 0; l < lmax; ++l) v[static_cast<size_t>(l)] = c128(f(static_cast<double>(l)), 0.0);
  const Tensor t = cast_copy(from_vector(v, Shape{lmax, 1}), dtype);
  return device.is_cpu() ? t : to(t, device);
}

void check_radius(double radius, const char* op) {
  GS_CHECK(std::isfinite(radius) && radius > 0, "{}: expected a finite radius > 0, got {}", op, radius);
}

}  // namespace

Tensor vector_legendre_analysis(const Tensor& X, const ShtSpec& spec) {
  const char* op = "vector_legendre_analysis";
  check_spec(spec, op, true);
  check_vector_input(X, op, "longitude Fourier coefficients", true, "nlat", spec.nlat, "mmax", spec.mmax, spec);
  return contract(X, table_key(spec, LegendreTableKind::analysis, real_dtype(X.dtype())),
                  Direction::to_degree);
}

Tensor vector_legendre_synthesis(const Tensor& coeffs, const ShtSpec& spec) {
  const char* op = "vector_legendre_synthesis";
  check_spec(spec, op, false);
  check_vector_input(coeffs, op, "vector coefficients", true, "lmax", spec.lmax, "mmax", spec.mmax, spec);
  return contract(coeffs, table_key(spec, LegendreTableKind::synthesis, real_dtype(coeffs.dtype())),
                  Direction::to_latitude);
}

Tensor vector_legendre_analysis_orders(const Tensor& X, const ShtSpec& spec, int64_t m_begin) {
  const char* op = "vector_legendre_analysis_orders";
  check_spec(spec, op, true);
  check_vector_input(X, op, "longitude Fourier coefficients", true, "nlat", spec.nlat, "orders", X.defined() ? X.size(-1) : 0, spec);
  detail::check_order_block(spec, m_begin, X.size(-1), op);
  if (X.size(-1) == 0) return pad(X, {0, 0, 0, spec.lmax - spec.nlat});
  return contract(X, table_key(spec, LegendreTableKind::analysis, real_dtype(X.dtype()), m_begin, X.size(-1)),
                  Direction::to_degree);
}

Tensor vector_legendre_synthesis_orders(const Tensor& coeffs, const ShtSpec& spec, int64_t m_begin) {
  const char* op = "vector_legendre_synthesis_orders";
  check_spec(spec, op, false);
  check_vector_input(coeffs, op, "vector coefficients", true, "lmax", spec.lmax, "orders",
                     coeffs.defined() ? coeffs.size(-1) : 0, spec);
  detail::check_order_block(spec, m_begin, coeffs.size(-1), op);
  if (coeffs.size(-1) == 0) return pad(coeffs, {0, 0, 0, spec.nlat - spec.lmax});
  return contract(coeffs, table_key(spec, LegendreTableKind::synthesis, real_dtype(coeffs.dtype()), m_begin, coeffs.size(-1)),
                  Direction::to_latitude);
}

Tensor vector_sht(const Tensor& uv, const ShtSpec& spec) {
  check_spec(spec, "vector_sht", true);
  check_vector_input(uv, "vector_sht", "a real vector field (u eastward, v northward)", false, "nlat", spec.nlat,
                     "nlon", spec.nlon, spec);
  return vector_legendre_analysis(rfft_lon(uv, spec.mmax), spec);
}

Tensor ivector_sht(const Tensor& coeffs, const ShtSpec& spec) {
  check_spec(spec, "ivector_sht", false);
  check_vector_input(coeffs, "ivector_sht", "vector coefficients", true, "lmax", spec.lmax, "mmax", spec.mmax, spec);
  return irfft_lon(vector_legendre_synthesis(coeffs, spec), spec.nlon);
}

Tensor vorticity_divergence(const Tensor& uv, const ShtSpec& spec, double radius) {
  check_radius(radius, "vorticity_divergence");
  check_spec(spec, "vorticity_divergence", true);
  check_vector_input(uv, "vorticity_divergence", "winds (u eastward, v northward)", false, "nlat", spec.nlat, "nlon",
                     spec.nlon, spec);
  const Tensor c = vector_sht(uv, spec);
  return mul(c, degree_factor(spec.lmax, c.dtype(), c.device(), [&](double l) { return -l * (l + 1) / radius; }));
}

Tensor winds_from_vorticity_divergence(const Tensor& vd, const ShtSpec& spec, double radius) {
  const char* op = "winds_from_vorticity_divergence";
  check_radius(radius, op);
  check_spec(spec, op, false);
  check_vector_input(vd, op, "spectral vorticity and divergence", true, "lmax", spec.lmax, "mmax", spec.mmax, spec);
  const Tensor f = degree_factor(spec.lmax, vd.dtype(), vd.device(), [&](double l) { return l == 0 ? 0.0 : -radius / (l * (l + 1)); });
  return ivector_sht(mul(vd, f), spec);
}

Tensor spectral_laplacian(const Tensor& c, double radius) {
  check_radius(radius, "spectral_laplacian");
  check_scalar_coeffs(c, "spectral_laplacian");
  return mul(c, degree_factor(c.size(-2), c.dtype(), c.device(), [&](double l) { return -l * (l + 1) / (radius * radius); }));
}

Tensor inverse_spectral_laplacian(const Tensor& c, double radius) {
  check_radius(radius, "inverse_spectral_laplacian");
  check_scalar_coeffs(c, "inverse_spectral_laplacian");
  return mul(c, degree_factor(c.size(-2), c.dtype(), c.device(),
                              [&](double l) { return l == 0 ? 0.0 : -radius * radius / (l * (l + 1)); }));
}

Tensor spectral_gradient(const Tensor& c, const ShtSpec& spec, double radius) {
  const char* op = "spectral_gradient";
  check_radius(radius, op);
  check_spec(spec, op, false);
  check_scalar_coeffs(c, op);
  GS_CHECK(c.size(-2) == spec.lmax && c.size(-1) == spec.mmax,
           "{}: expected spectral coefficients of shape (..., lmax = {}, mmax = {}) for {}, got {}", op, spec.lmax,
           spec.mmax, spec.str(), c.meta_str());
  const Tensor t = mul(c, degree_factor(spec.lmax, c.dtype(), c.device(), [&](double) { return 1.0 / radius; }));
  return ivector_sht(stack({zeros_like(c), t}, c.dim() - 2), spec);
}

size_t vector_sht_table_bytes(const ShtSpec& spec, DType dtype, bool analysis, int64_t m_begin, int64_t m_count) {
  return detail::table_bytes(spec, dtype, analysis, m_begin, m_count, true, "vector_sht_table_bytes");
}

namespace {

using V = std::vector<Tensor>;
using detail::lmax_of, detail::mmax_of, detail::nlat_of, detail::nlon_of, detail::sample_spec_by_coeff_shape,
    detail::sample_spec_by_grid_shape, detail::sht_samples;

const OpRegistrar registrar{{
    {"vector_legendre_analysis", [](RandomKey k) { return sht_samples(k, DType::c128, true, nlat_of, mmax_of); },
     [](const V& x) { return V{vector_legendre_analysis(x[0], sample_spec_by_grid_shape(x[0]))}; }},
    {"vector_legendre_synthesis", [](RandomKey k) { return sht_samples(k, DType::c128, true, lmax_of, mmax_of); },
     [](const V& x) { return V{vector_legendre_synthesis(x[0], sample_spec_by_coeff_shape(x[0]))}; }},
    {"vector_sht", [](RandomKey k) { return sht_samples(k, DType::f64, true, nlat_of, nlon_of); },
     [](const V& x) { return V{vector_sht(x[0], sample_spec_by_grid_shape(x[0]))}; }},
    {"ivector_sht", [](RandomKey k) { return sht_samples(k, DType::c128, true, lmax_of, mmax_of); },
     [](const V& x) { return V{ivector_sht(x[0], sample_spec_by_coeff_shape(x[0]))}; }},
    {"vorticity_divergence", [](RandomKey k) { return sht_samples(k, DType::f64, true, nlat_of, nlon_of); },
     [](const V& x) { return V{vorticity_divergence(x[0], sample_spec_by_grid_shape(x[0]), 2.0)}; }},
    {"winds_from_vorticity_divergence", [](RandomKey k) { return sht_samples(k, DType::c128, true, lmax_of, mmax_of); },
     [](const V& x) { return V{winds_from_vorticity_divergence(x[0], sample_spec_by_coeff_shape(x[0]), 2.0)}; }},
    {"spectral_laplacian", [](RandomKey k) { return sht_samples(k, DType::c128, false, lmax_of, mmax_of); },
     [](const V& x) { return V{spectral_laplacian(x[0], 2.0)}; }},
    {"inverse_spectral_laplacian", [](RandomKey k) { return sht_samples(k, DType::c128, false, lmax_of, mmax_of); },
     [](const V& x) { return V{inverse_spectral_laplacian(x[0], 2.0)}; }},
    {"spectral_gradient", [](RandomKey k) { return sht_samples(k, DType::c128, false, lmax_of, mmax_of); },
     [](const V& x) { return V{spectral_gradient(x[0], sample_spec_by_coeff_shape(x[0]), 2.0)}; }},
}};

}  // namespace
}  // namespace gs::sphere
