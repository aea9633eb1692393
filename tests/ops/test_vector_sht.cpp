// The vector SHT and the shallow-water spectral helpers (ops/sphere/vector_sht.h): round trips on
// every grid, closed-form rotations and gradients, vorticity/divergence inversion, Laplacian
// eigenvalues, first and second derivatives, and error messages. gradcheck and gradgradcheck of
// each transform and helper are the registry walk's (test_registry.cpp), on every grid
// (ops/sphere/vector_sht.cpp's entries).
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/legendre/table.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/vector_sht.h"
#include "tests/test_util.h"

namespace {

using gs::c128;
using gs::DType;
using gs::Shape;
using gs::Tensor;
using gs::sphere::GridKind;
using gs::sphere::ShtSpec;
using gs_test::contains;
using gs_test::error_of;

constexpr double kPi = std::numbers::pi;
constexpr GridKind kGrids[] = {GridKind::equiangular, GridKind::legendre_gauss, GridKind::lobatto};

// Random band-limited vector coefficients (batch..., 2, lmax, mmax) c128: zero where l < m, at
// l = 0 and at the Nyquist order m = nlon/2 (which a real vector field cannot carry in general: see
// NOTES.md, "Vector SHT"), real at m = 0.
Tensor random_vector_coeffs(const Shape& batch, const ShtSpec& s, uint64_t seed, bool zero_l0 = true) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n(0.0, 1.0);
  Shape sizes = batch;
  sizes.push_back(2);
  sizes.push_back(s.lmax);
  sizes.push_back(s.mmax);
  int64_t count = 2;
  for (auto d : batch) count *= d;
  std::vector<c128> v(static_cast<size_t>(count * s.lmax * s.mmax));
  for (int64_t b = 0; b < count; ++b)
    for (int64_t l = 0; l < s.lmax; ++l)
      for (int64_t m = 0; m < s.mmax; ++m) {
        const bool real_only = m == 0;
        const double re = n(rng), im = n(rng);
        const bool zero = m > l || (zero_l0 && l == 0) || 2 * m == s.nlon;
        v[static_cast<size_t>((b * s.lmax + l) * s.mmax + m)] = zero ? c128(0, 0) : c128(re, real_only ? 0.0 : im);
      }
  return gs::from_vector(v, sizes);
}

std::vector<c128> cvals(const Tensor& t) { return gs::cast_copy(t, DType::c128).to_vector<c128>(); }
std::vector<double> rvals(const Tensor& t) { return gs::cast_copy(t, DType::f64).to_vector<double>(); }

template <typename V>
double rel_error(const V& a, const V& b) {
  REQUIRE(a.size() == b.size());
  double err = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) err = std::max(err, std::abs(a[i] - b[i])), scale = std::max(scale, std::abs(b[i]));
  return err / scale;
}
double max_abs(const std::vector<double>& a) {
  double r = 0;
  for (double x : a) r = std::max(r, std::abs(x));
  return r;
}

// A field (ncomp, nlat, nlon) f64 from f(component, phi = latitude, lambda).
Tensor grid_field(const ShtSpec& s, int64_t ncomp, const std::function<double(int64_t, double, double)>& f) {
  const auto q = gs::sphere::make_quadrature(s.grid, s.nlat);
  std::vector<double> v(static_cast<size_t>(ncomp * s.nlat * s.nlon));
  for (int64_t c = 0; c < ncomp; ++c)
    for (int64_t j = 0; j < s.nlat; ++j)
      for (int64_t k = 0; k < s.nlon; ++k) {
        const double phi = kPi / 2 - q.colatitude[static_cast<size_t>(j)];
        const double lam = 2 * kPi * static_cast<double>(k) / static_cast<double>(s.nlon);
        v[static_cast<size_t>((c * s.nlat + j) * s.nlon + k)] = f(c, phi, lam);
      }
  return gs::from_vector(v, ncomp == 1 ? Shape{s.nlat, s.nlon} : Shape{ncomp, s.nlat, s.nlon});
}

double vector_round_trip_error(const ShtSpec& s, DType real, uint64_t seed) {
  const Tensor a = random_vector_coeffs({3}, s, seed);
  const Tensor uv = gs::sphere::ivector_sht(gs::cast_copy(a, gs::complex_dtype(real)), s);
  CHECK(uv.dtype() == real);
  CHECK(uv.sizes() == Shape{3, 2, s.nlat, s.nlon});
  const Tensor back = gs::sphere::vector_sht(uv, s);
  CHECK(back.dtype() == gs::complex_dtype(real));
  CHECK(back.sizes() == Shape{3, 2, s.lmax, s.mmax});
  return rel_error(cvals(back), cvals(a));
}

}  // namespace

TEST_CASE("vector sht: ivector_sht then vector_sht recovers band-limited coefficients on every grid") {
  using gs::sphere::make_sht_spec;
  uint64_t seed = 1;
  for (GridKind grid : kGrids) {
    for (auto [nlat, nlon] : {std::pair<int64_t, int64_t>{24, 48}, {25, 48}}) {
      const ShtSpec s = make_sht_spec(grid, nlat, nlon);
      CAPTURE(s.str());
      CHECK(vector_round_trip_error(s, DType::f64, seed++) <= 1e-11);
      CHECK(vector_round_trip_error(s, DType::f32, seed++) <= 1e-5);
    }
  }
  // mmax = nlon/2 + 1: the orders below Nyquist still round-trip.
  const ShtSpec nyquist = make_sht_spec(GridKind::legendre_gauss, 17, 32, 17, 17);
  CHECK(vector_round_trip_error(nyquist, DType::f64, 99) <= 1e-11);
}

TEST_CASE("vector sht: solid-body rotations have the analytic vorticity and no divergence") {
  using gs::sphere::make_sht_spec;
  const double U = 3.0, a = 2.0;
  for (GridKind grid : kGrids) {
    const ShtSpec s = make_sht_spec(grid, 16, 32);
    CAPTURE(s.str());
    // About the polar axis: u = U cos(phi), v = 0 -> zeta = 2 U sin(phi) / a.
    const Tensor uv = grid_field(s, 2, [&](int64_t c, double phi, double) { return c == 0 ? U * std::cos(phi) : 0.0; });
    const Tensor vd = gs::sphere::vorticity_divergence(uv, s, a);
    CHECK(vd.sizes() == Shape{2, s.lmax, s.mmax});
    const Tensor zeta = gs::sphere::isht(gs::select(vd, 0, 0), s);
    const Tensor delta = gs::sphere::isht(gs::select(vd, 0, 1), s);
    const Tensor expect = grid_field(s, 1, [&](int64_t, double phi, double) { return 2 * U * std::sin(phi) / a; });
    CHECK(rel_error(rvals(zeta), rvals(expect)) <= 1e-12);
    CHECK(max_abs(rvals(delta)) <= 1e-12);
    // In spectral terms: zeta_10 = 2U/a sqrt(4 pi / 3), everything else zero.
    const auto z = cvals(gs::select(vd, 0, 0));
    CHECK(std::abs(z[static_cast<size_t>(1 * s.mmax + 0)] - c128(2 * U / a * std::sqrt(4 * kPi / 3), 0)) <= 1e-12);
    // And the stream function slot of the raw transform: S_10 = -(a/2) zeta_10.
    const auto S = cvals(gs::sphere::vector_sht(uv, s));
    CHECK(std::abs(S[static_cast<size_t>(1 * s.mmax)] - c128(-U * std::sqrt(4 * kPi / 3), 0)) <= 1e-12);

    // About the x axis (omega = U x-hat): u = -U sin(phi) cos(lambda), v = U sin(lambda)
    // -> zeta = 2 U cos(phi) cos(lambda) / a (an m = 1 field: checks the m P / sin(theta) table and its sign).
    const Tensor uv_x = grid_field(s, 2, [&](int64_t c, double phi, double lam) {
      return c == 0 ? -U * std::sin(phi) * std::cos(lam) : U * std::sin(lam);
    });
    const Tensor vd_x = gs::sphere::vorticity_divergence(uv_x, s, a);
    const Tensor expect_x =
        grid_field(s, 1, [&](int64_t, double phi, double lam) { return 2 * U * std::cos(phi) * std::cos(lam) / a; });
    CHECK(rel_error(rvals(gs::sphere::isht(gs::select(vd_x, 0, 0), s)), rvals(expect_x)) <= 1e-12);
    CHECK(max_abs(rvals(gs::sphere::isht(gs::select(vd_x, 0, 1), s))) <= 1e-12);

    // A potential flow: the gradient of f = cos(phi) cos(lambda) has divergence -2 f / a^2, no vorticity.
    const Tensor uv_g = grid_field(s, 2, [&](int64_t c, double phi, double lam) {
      return c == 0 ? -std::sin(lam) / a : -std::sin(phi) * std::cos(lam) / a;
    });
    const Tensor vd_g = gs::sphere::vorticity_divergence(uv_g, s, a);
    const Tensor expect_g =
        grid_field(s, 1, [&](int64_t, double phi, double lam) { return -2 * std::cos(phi) * std::cos(lam) / (a * a); });
    CHECK(max_abs(rvals(gs::sphere::isht(gs::select(vd_g, 0, 0), s))) <= 1e-12);
    CHECK(rel_error(rvals(gs::sphere::isht(gs::select(vd_g, 0, 1), s)), rvals(expect_g)) <= 1e-12);
  }
}

TEST_CASE("vector sht: spectral_gradient matches analytic gradients") {
  using gs::sphere::make_sht_spec;
  const double a = 1.5;
  for (GridKind grid : kGrids) {
    const ShtSpec s = make_sht_spec(grid, 12, 24);
    CAPTURE(s.str());
    // Y_1^0 = sqrt(3/(4 pi)) sin(phi): gradient (0, sqrt(3/(4 pi)) cos(phi) / a).
    std::vector<c128> c(static_cast<size_t>(s.lmax * s.mmax), c128(0, 0));
    c[static_cast<size_t>(1 * s.mmax + 0)] = 1.0;
    const Tensor g = gs::sphere::spectral_gradient(gs::from_vector(c, Shape{s.lmax, s.mmax}), s, a);
    CHECK(g.sizes() == Shape{2, s.nlat, s.nlon});
    const double k = std::sqrt(3 / (4 * kPi));
    const Tensor expect =
        grid_field(s, 2, [&](int64_t comp, double phi, double) { return comp == 0 ? 0.0 : k * std::cos(phi) / a; });
    CHECK(rel_error(rvals(g), rvals(expect)) <= 1e-12);

    // f = cos(phi) cos(lambda) + sin(phi)^2 (m = 1 and m = 0, l = 2), coefficients from the scalar SHT.
    const Tensor f = grid_field(s, 1, [](int64_t, double phi, double lam) {
      return std::cos(phi) * std::cos(lam) + std::sin(phi) * std::sin(phi);
    });
    const Tensor gf = gs::sphere::spectral_gradient(gs::sphere::sht(f, s), s, a);
    const Tensor expect_f = grid_field(s, 2, [&](int64_t comp, double phi, double lam) {
      return comp == 0 ? -std::sin(lam) / a : (-std::sin(phi) * std::cos(lam) + 2 * std::sin(phi) * std::cos(phi)) / a;
    });
    CHECK(rel_error(rvals(gf), rvals(expect_f)) <= 1e-12);
  }
}

TEST_CASE("vector sht: winds_from_vorticity_divergence inverts vorticity_divergence") {
  using gs::sphere::make_sht_spec;
  const double a = 6.371e6;
  uint64_t seed = 10;
  for (GridKind grid : kGrids) {
    const ShtSpec s = make_sht_spec(grid, 20, 40);
    CAPTURE(s.str());
    // Band-limited winds (no l = 0 part, which a wind field cannot have anyway).
    const Tensor uv = gs::sphere::ivector_sht(random_vector_coeffs({2}, s, seed++), s);
    const Tensor vd = gs::sphere::vorticity_divergence(uv, s, a);
    const Tensor back = gs::sphere::winds_from_vorticity_divergence(vd, s, a);
    CHECK(rel_error(rvals(back), rvals(uv)) <= 1e-11);
    // The other way round: random (zeta, delta) without a global mean come back.
    const Tensor vd2 = random_vector_coeffs({2}, s, seed++);
    const Tensor vd2_back =
        gs::sphere::vorticity_divergence(gs::sphere::winds_from_vorticity_divergence(vd2, s, a), s, a);
    CHECK(rel_error(cvals(vd2_back), cvals(vd2)) <= 1e-11);
    // A global-mean vorticity (l = 0) has no wind.
    const Tensor with_mean = random_vector_coeffs({}, s, seed++, false);
    const Tensor w1 = gs::sphere::winds_from_vorticity_divergence(with_mean, s, a);
    const Tensor w2 = gs::sphere::winds_from_vorticity_divergence(
        gs::sphere::vorticity_divergence(w1, s, a), s, a);
    CHECK(rel_error(rvals(w2), rvals(w1)) <= 1e-11);
  }
}

TEST_CASE("vector sht: spectral Laplacian eigenvalues and its inverse") {
  using gs::sphere::make_sht_spec;
  const ShtSpec s = make_sht_spec(GridKind::legendre_gauss, 10, 20);
  const double a = 3.0;
  const Tensor c = gs::select(random_vector_coeffs({}, s, 5, false), 0, 0);
  const auto cv = cvals(c);
  const auto lap = cvals(gs::sphere::spectral_laplacian(c, a));
  const auto inv = cvals(gs::sphere::inverse_spectral_laplacian(c, a));
  for (int64_t l = 0; l < s.lmax; ++l)
    for (int64_t m = 0; m < s.mmax; ++m) {
      const size_t i = static_cast<size_t>(l * s.mmax + m);
      const double ll = static_cast<double>(l * (l + 1));
      CHECK(std::abs(lap[i] - cv[i] * (-ll / (a * a))) <= 1e-13 * (1 + std::abs(cv[i]) * ll));
      CHECK(std::abs(inv[i] - (l == 0 ? c128(0, 0) : cv[i] * (-a * a / ll))) <= 1e-13 * (1 + std::abs(cv[i]) * a * a));
    }
  // On the grid: the Laplacian of sin(phi) (l = 1) is -2 sin(phi) / a^2.
  const Tensor f = grid_field(s, 1, [](int64_t, double phi, double) { return std::sin(phi); });
  const Tensor lf = gs::sphere::isht(gs::sphere::spectral_laplacian(gs::sphere::sht(f, s), a), s);
  CHECK(rel_error(rvals(lf), rvals(gs::mul(f, -2 / (a * a)))) <= 1e-12);
  // f32 coefficients stay c64.
  CHECK(gs::sphere::spectral_laplacian(gs::cast_copy(c, DType::c64), a).dtype() == DType::c64);
}

TEST_CASE("vector sht: table size; batched results equal per-field ones") {
  using gs::sphere::make_sht_spec;
  const ShtSpec small = make_sht_spec(GridKind::legendre_gauss, 8, 16);
  // Two tables (D and M) in the blocked layout of the scalar tables: northern rows only, blocks of
  // 4 orders (f64), nothing skipped at this size. The earlier dense layout (every row, every
  // (l, m) pair, both tables) took 2 * 8 * (8 * 9 / 2) doubles = 4608 bytes.
  const gs::sphere::LegendreTableKey key{GridKind::legendre_gauss, 8, 8, 8, gs::sphere::Normalization::ortho,
                                         true, gs::sphere::LegendreTableKind::analysis, DType::f64};
  CHECK(gs::sphere::vector_sht_table_bytes(small, DType::f64, true) == 2 * gs::sphere::LegendreTable::estimated_bytes(key));
  CHECK(gs::sphere::vector_sht_table_bytes(small, DType::f64, true) < 4608);
  // A batched transform (large enough for the threaded path) equals the per-field ones bitwise:
  // the kernels give every field the same operations whatever the batch.
  const ShtSpec s = make_sht_spec(GridKind::legendre_gauss, 32, 64);
  const Tensor a = random_vector_coeffs({4}, s, 7);
  const Tensor all = gs::sphere::ivector_sht(a, s);
  const Tensor all_back = gs::sphere::vector_sht(all, s);
  for (int64_t i = 0; i < 4; ++i) {
    const Tensor one = gs::sphere::ivector_sht(gs::contiguous(gs::select(a, 0, i)), s);
    CHECK(rvals(gs::select(all, 0, i)) == rvals(one));
    const Tensor one_back = gs::sphere::vector_sht(gs::contiguous(gs::select(all, 0, i)), s);
    CHECK(cvals(gs::select(all_back, 0, i)) == cvals(one_back));
  }
}

TEST_CASE("vector sht: clear errors for bad shapes, dtypes and specs") {
  using gs::sphere::make_sht_spec;
  const ShtSpec s = make_sht_spec(GridKind::legendre_gauss, 8, 16);
  const std::string e1 = error_of([&] { gs::sphere::vector_sht(gs::zeros({8, 16}, DType::f64), s); });
  CHECK(contains(e1, "vector_sht"));
  CHECK(contains(e1, "(..., 2, nlat = 8, nlon = 16)"));
  const std::string e2 = error_of([&] { gs::sphere::vector_sht(gs::zeros({3, 8, 16}, DType::f64), s); });
  CHECK(contains(e2, "(..., 2, nlat = 8, nlon = 16)"));
  const std::string e3 = error_of([&] { gs::sphere::vector_sht(gs::zeros({2, 8, 16}, DType::c128), s); });
  CHECK(contains(e3, "f32 or f64"));
  const std::string e4 = error_of([&] { gs::sphere::ivector_sht(gs::zeros({2, 8, 9}, DType::c128), s); });
  CHECK(contains(e4, "ivector_sht"));
  CHECK(contains(e4, "(..., 2, lmax = 8, mmax = 8)"));
  const std::string e5 = error_of([&] { gs::sphere::ivector_sht(gs::zeros({2, 8, 8}, DType::f64), s); });
  CHECK(contains(e5, "c64 or c128"));
  const std::string e6 =
      error_of([&] { gs::sphere::winds_from_vorticity_divergence(gs::zeros({8, 8}, DType::c128), s); });
  CHECK(contains(e6, "winds_from_vorticity_divergence"));
  const std::string e7 = error_of([&] { gs::sphere::spectral_laplacian(gs::zeros({8, 8}, DType::f64)); });
  CHECK(contains(e7, "spectral_laplacian"));
  CHECK(contains(e7, "c64 or c128"));
  const std::string e8 = error_of([&] { gs::sphere::spectral_gradient(gs::zeros({7, 8}, DType::c128), s); });
  CHECK(contains(e8, "spectral_gradient"));
  CHECK(contains(e8, "lmax = 8"));
  const std::string e9 =
      error_of([&] { gs::sphere::vorticity_divergence(gs::zeros({2, 8, 16}, DType::f64), s, -1.0); });
  CHECK(contains(e9, "radius"));
  ShtSpec too_big = s;
  too_big.lmax = 9;
  too_big.mmax = 8;
  const std::string e10 = error_of([&] { gs::sphere::vector_sht(gs::zeros({2, 8, 16}, DType::f64), too_big); });
  CHECK(contains(e10, "vector_sht"));
  CHECK(e10 != "(no error)");
}

TEST_CASE("vector sht: every normalisation and Condon-Shortley setting round-trips and scales as its degree factor") {
  using gs::sphere::make_sht_spec;
  using gs::sphere::Normalization;
  for (Normalization norm : {Normalization::ortho, Normalization::four_pi, Normalization::schmidt})
    for (bool cs : {true, false})
      for (GridKind grid : kGrids) {
        const ShtSpec s = make_sht_spec(grid, 24, 48, {}, {}, norm, cs);
        CAPTURE(s.str());
        CAPTURE(cs);
        CHECK(vector_round_trip_error(s, DType::f64, 7) <= 1e-11);
      }
  // One coefficient (l, m) synthesised under each normalisation: both components scale by that
  // normalisation's degree factor relative to ortho on the synthesis side (four-pi 1/sqrt(4 pi),
  // Schmidt sqrt((2l+1)/(4 pi))), as the scalar functions do. The independent fact checked: M and D
  // carry the same factor.
  const ShtSpec ortho = make_sht_spec(GridKind::legendre_gauss, 16, 32, {}, {}, Normalization::ortho, true);
  for (auto [l, m] : {std::pair<int64_t, int64_t>{1, 1}, {3, 2}, {6, 5}, {7, 0}}) {
    CAPTURE(l);
    CAPTURE(m);
    Tensor a = gs::zeros({2, ortho.lmax, ortho.mmax}, DType::c128);
    a.data<c128>()[l * ortho.mmax + m] = c128(0.7, 0.2);                          // spheroidal
    a.data<c128>()[(ortho.lmax + l) * ortho.mmax + m] = c128(-0.3, 0.5);          // toroidal
    const auto ref = rvals(gs::sphere::ivector_sht(a, ortho));
    for (auto [norm, factor] : {std::pair<Normalization, double>{Normalization::four_pi, 1 / std::sqrt(4 * kPi)},
                                {Normalization::schmidt, std::sqrt((2.0 * l + 1) / (4 * kPi))}}) {
      const ShtSpec s = make_sht_spec(GridKind::legendre_gauss, 16, 32, {}, {}, norm, true);
      auto got = rvals(gs::sphere::ivector_sht(a, s));
      for (auto& v : got) v /= factor;
      CHECK(rel_error(got, ref) <= 1e-12);
    }
  }
}
