// The SHT's Legendre contractions (forward kernels and their adjoints) and the composite
// transforms built on them.
//
//   to_degree   (analysis table):  A (..., lmax, mmax) [l,m] = sum_j T_m[l,j] X[j,m]   legendre_analysis
//   to_latitude (synthesis table): X (..., nlat, mmax) [j,m] = sum_l T_m[l,j] A[l,m]   legendre_synthesis
//
// With a real table, to_latitude with table T is the adjoint of to_degree with the same T (under
// PyTorch's complex-gradient convention, the adjoint of z -> T z is g -> T^T g). So
// legendre_analysis' backward is a to_latitude contraction with the analysis table (a synthesis
// with the weights folded in), legendre_synthesis' backward a to_degree contraction with the
// synthesis table (an analysis without weights), and each backward is itself recorded with the
// other direction as its backward: derivatives of every order, one kernel pair.
//
// The contraction itself, its paths and its tables belong to ops/sphere/legendre/ (contraction.h).
#include "ops/sphere/sht.h"

#include <vector>

#include "ops/kernels.h"
#include "ops/registry.h"
#include "ops/shape_ops.h"
#include "ops/sphere/fft.h"
#include "ops/sphere/legendre/contraction.h"
#include "ops/sphere/sht_blocks.h"
#include "ops/sphere/sht_common.h"

namespace gs::sphere {
namespace {

using detail::check_order_block;
using detail::check_spec;
using detail::table_key;
using legendre::Direction;

Tensor contract(const Tensor& x, const LegendreTableKey& key, Direction dir) {
  return legendre::contract(x, {key, legendre::Components::scalar}, dir);
}

// x must be (..., rows, mmax) complex (any number of columns when `any_columns`: a
// block of the orders).
void check_spectral_input(const Tensor& x, const char* op, const char* what, const char* rows_name, int64_t rows,
                          const ShtSpec& spec, bool any_columns = false) {
  kernels::check_defined(x, op);
  GS_CHECK(is_complex(x.dtype()) && x.dim() >= 2 && x.size(-2) == rows && (any_columns || x.size(-1) == spec.mmax),
           "{}: expected {} of shape (..., {} = {}, {}) with dtype c64 or c128 for {}, got {}", op, what, rows_name,
           rows, any_columns ? std::string("orders") : fmt::format("mmax = {}", spec.mmax), spec.str(),
           x.meta_str());
}

// The contraction of a block of orders [m_begin, m_begin + x.size(-1)); an empty block is an empty
// result, still on the tape (pad crops or extends the rows).
Tensor contract_orders(const Tensor& x, const ShtSpec& spec, LegendreTableKind kind, Direction dir, int64_t m_begin,
                       const char* op) {
  const int64_t count = x.size(-1);
  check_order_block(spec, m_begin, count, op);
  const int64_t rows_out = dir == Direction::to_degree ? spec.lmax : spec.nlat;
  if (count == 0) return pad(x, {0, 0, 0, rows_out - x.size(-2)});
  return contract(x, table_key(spec, kind, real_dtype(x.dtype()), m_begin, count), dir);
}

}  // namespace

std::string ShtSpec::str() const {
  return fmt::format("{} {}x{}, lmax {}, mmax {}, {}{}", grid_name(grid), nlat, nlon, lmax, mmax,
                     normalization_name(norm), csphase ? "" : ", no csphase");
}

ShtSpec make_sht_spec(GridKind grid, int64_t nlat, int64_t nlon, std::optional<int64_t> lmax,
                      std::optional<int64_t> mmax, Normalization norm, bool csphase, TruncationRule rule) {
  const Truncation t = resolve_truncation(grid, nlat, nlon, lmax, mmax, rule);
  return {grid, nlat, nlon, t.lmax, t.mmax, norm, csphase};
}

Tensor legendre_analysis(const Tensor& X, const ShtSpec& spec) {
  check_spec(spec, "legendre_analysis", true);
  check_spectral_input(X, "legendre_analysis", "longitude Fourier coefficients", "nlat", spec.nlat, spec);
  return contract(X, table_key(spec, LegendreTableKind::analysis, real_dtype(X.dtype())), Direction::to_degree);
}

Tensor legendre_synthesis(const Tensor& coeffs, const ShtSpec& spec) {
  check_spec(spec, "legendre_synthesis", false);
  check_spectral_input(coeffs, "legendre_synthesis", "spectral coefficients", "lmax", spec.lmax, spec);
  return contract(coeffs, table_key(spec, LegendreTableKind::synthesis, real_dtype(coeffs.dtype())),
                  Direction::to_latitude);
}

Tensor legendre_analysis_orders(const Tensor& X, const ShtSpec& spec, int64_t m_begin) {
  check_spec(spec, "legendre_analysis_orders", true);
  check_spectral_input(X, "legendre_analysis_orders", "longitude Fourier coefficients", "nlat", spec.nlat, spec, true);
  return contract_orders(X, spec, LegendreTableKind::analysis, Direction::to_degree, m_begin, "legendre_analysis_orders");
}

Tensor legendre_synthesis_orders(const Tensor& coeffs, const ShtSpec& spec, int64_t m_begin) {
  check_spec(spec, "legendre_synthesis_orders", false);
  check_spectral_input(coeffs, "legendre_synthesis_orders", "spectral coefficients", "lmax", spec.lmax, spec, true);
  return contract_orders(coeffs, spec, LegendreTableKind::synthesis, Direction::to_latitude, m_begin,
                         "legendre_synthesis_orders");
}

Tensor sht(const Tensor& x, const ShtSpec& spec) {
  check_spec(spec, "sht", true);
  kernels::check_defined(x, "sht");
  GS_CHECK(is_floating(x.dtype()),
           "sht: expected a real field (f32 or f64) of shape (..., nlat = {}, nlon = {}), got {}; the SHT here "
           "is the real transform (transform the real and imaginary parts of a complex field separately)",
           spec.nlat, spec.nlon, x.meta_str());
  GS_CHECK(x.dim() >= 2 && x.size(-2) == spec.nlat && x.size(-1) == spec.nlon,
           "sht: expected a field of shape (..., nlat = {}, nlon = {}) for {}, got {}", spec.nlat, spec.nlon,
           spec.str(), x.meta_str());
  if (Tensor blocked = detail::sht_in_blocks(x, spec); blocked.defined()) return blocked;
  return legendre_analysis(rfft_lon(x, spec.mmax), spec);
}

Tensor isht(const Tensor& coeffs, const ShtSpec& spec) {
  check_spec(spec, "isht", false);
  check_spectral_input(coeffs, "isht", "spectral coefficients", "lmax", spec.lmax, spec);
  if (Tensor blocked = detail::isht_in_blocks(coeffs, spec); blocked.defined()) return blocked;
  return irfft_lon(legendre_synthesis(coeffs, spec), spec.nlon);
}

Tensor truncate_or_pad_coeffs(const Tensor& coeffs, int64_t lmax_to, int64_t mmax_to) {
  kernels::check_defined(coeffs, "truncate_or_pad_coeffs");
  GS_CHECK(coeffs.dim() >= 2, "truncate_or_pad_coeffs: expected coefficients (..., lmax, mmax), got {}",
           coeffs.meta_str());
  GS_CHECK(lmax_to >= 1 && mmax_to >= 1 && mmax_to <= lmax_to,
           "truncate_or_pad_coeffs: expected 1 <= mmax <= lmax for the target, got lmax = {}, mmax = {}", lmax_to,
           mmax_to);
  const int64_t dl = lmax_to - coeffs.size(-2), dm = mmax_to - coeffs.size(-1);
  if (dl == 0 && dm == 0) return coeffs;
  // Negative pads crop; zero where l < m is preserved either way.
  return pad(coeffs, {0, dm, 0, dl});
}

Tensor resample(const Tensor& x, const ShtSpec& from, const ShtSpec& to) {
  GS_CHECK(from.norm == to.norm && from.csphase == to.csphase,
           "resample: both specs must share the normalisation and csphase (coefficients of one are not those of "
           "the other), got {} and {}",
           from.str(), to.str());
  if (from == to) return x;
  return isht(truncate_or_pad_coeffs(sht(x, from), to.lmax, to.mmax), to);
}

size_t sht_table_bytes(const ShtSpec& spec, DType dtype, bool analysis, int64_t m_begin, int64_t m_count) {
  return detail::table_bytes(spec, dtype, analysis, m_begin, m_count, false, "sht_table_bytes");
}

namespace {

using V = std::vector<Tensor>;
using detail::lmax_of, detail::mmax_of, detail::nlat_of, detail::nlon_of, detail::sample_spec_by_coeff_shape,
    detail::sample_spec_by_grid_shape, detail::sht_samples;

const OpRegistrar registrar{{
    {"legendre_analysis",
     [](RandomKey k) { return sht_samples(k, DType::c128, false, nlat_of, mmax_of); },
     [](const V& x) { return V{legendre_analysis(x[0], sample_spec_by_grid_shape(x[0]))}; }},
    {"legendre_synthesis",
     [](RandomKey k) { return sht_samples(k, DType::c128, false, lmax_of, mmax_of); },
     [](const V& x) { return V{legendre_synthesis(x[0], sample_spec_by_coeff_shape(x[0]))}; }},
    {"sht",
     [](RandomKey k) { return sht_samples(k, DType::f64, false, nlat_of, nlon_of); },
     [](const V& x) { return V{sht(x[0], sample_spec_by_grid_shape(x[0]))}; }},
    {"isht",
     [](RandomKey k) { return sht_samples(k, DType::c128, false, lmax_of, mmax_of); },
     [](const V& x) { return V{isht(x[0], sample_spec_by_coeff_shape(x[0]))}; }},
}};

}  // namespace
}  // namespace gs::sphere
