// The f64 foundation of the SHT: quadrature rules, truncation limits, area weights and the
// normalised associated Legendre tables (ops/sphere/). No tensors involved.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <numeric>
#include <string>
#include <vector>

#include "engine/error.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/legendre/functions.h"

using namespace gs::sphere;

namespace {

constexpr double kPi = std::numbers::pi;
constexpr GridKind kAllGrids[] = {GridKind::equiangular, GridKind::legendre_gauss, GridKind::lobatto};
constexpr Normalization kAllNorms[] = {Normalization::ortho, Normalization::four_pi, Normalization::schmidt};

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

// P_n(x) by Bonnet's recurrence, written independently of the library.
double legendre_p(int n, double x) {
  double prev = 1.0, cur = x;
  if (n == 0) return 1.0;
  for (int k = 1; k < n; ++k) {
    const double next = ((2 * k + 1) * x * cur - k * prev) / (k + 1);
    prev = cur;
    cur = next;
  }
  return cur;
}

// (1-x^2) P_n'(x) = n (P_{n-1} - x P_n)
double one_minus_x2_dp(int n, double x) { return n * (legendre_p(n - 1, x) - x * legendre_p(n, x)); }

// Closed forms of (1-x^2)^{m/2} d^m/dx^m P_l(x) for l <= 4, without the Condon-Shortley sign.
double closed_form_plm(int l, int m, double x) {
  const double s = std::sqrt((1.0 - x) * (1.0 + x));
  const double x2 = x * x;
  switch (l * 10 + m) {
    case 0: return 1.0;
    case 10: return x;
    case 11: return s;
    case 20: return 0.5 * (3 * x2 - 1);
    case 21: return 3 * x * s;
    case 22: return 3 * s * s;
    case 30: return 0.5 * (5 * x2 * x - 3 * x);
    case 31: return 1.5 * (5 * x2 - 1) * s;
    case 32: return 15 * x * s * s;
    case 33: return 15 * s * s * s;
    case 40: return (35 * x2 * x2 - 30 * x2 + 3) / 8;
    case 41: return 2.5 * (7 * x2 * x - 3 * x) * s;
    case 42: return 7.5 * (7 * x2 - 1) * s * s;
    case 43: return 105 * x * s * s * s;
    case 44: return 105 * s * s * s * s;
  }
  FAIL("no closed form for l = " << l << ", m = " << m);
  return 0;
}

double factorial(int n) { return n <= 1 ? 1.0 : n * factorial(n - 1); }

double expected_pbar(const LegendreSpec& spec, int l, int m, double x) {
  const double sign = (spec.csphase && m % 2 == 1) ? -1.0 : 1.0;
  const double ortho = sign * std::sqrt((2 * l + 1) / (4 * kPi) * factorial(l - m) / factorial(l + m)) * closed_form_plm(l, m, x);
  const double four_pi = std::sqrt(4 * kPi), degree = std::sqrt(2.0 * l + 1);
  switch (spec.norm) {
    case Normalization::ortho: return ortho;
    case Normalization::four_pi: return spec.inverse ? ortho / four_pi : ortho * four_pi;
    case Normalization::schmidt: return spec.inverse ? ortho / four_pi * degree : ortho * four_pi / degree;
  }
  return 0;
}

// max |2 pi sum_j w_j Pbar_l^m Pbar_l'^m - delta_ll'| over m <= l, l' < lmax.
double orthogonality_error(const Quadrature& q, const LegendreSpec& spec, int64_t m) {
  const std::vector<double> block = legendre_table_for_m(spec, q.cos_theta, m);
  const auto nlat = static_cast<size_t>(spec.nlat);
  const auto rows = static_cast<size_t>(spec.lmax - m);
  std::vector<double> weighted(block.size());
  for (size_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < nlat; ++j) weighted[r * nlat + j] = 2 * kPi * q.weights[j] * block[r * nlat + j];
  double worst = 0;
  for (size_t r1 = 0; r1 < rows; ++r1)
    for (size_t r2 = r1; r2 < rows; ++r2) {
      double dot = 0;
      for (size_t j = 0; j < nlat; ++j) dot += weighted[r1 * nlat + j] * block[r2 * nlat + j];
      worst = std::max(worst, std::abs(dot - (r1 == r2 ? 1.0 : 0.0)));
    }
  return worst;
}

// max over degrees k <= max_degree of |sum_j w_j x_j^k - integral_{-1}^{1} x^k dx|.
double polynomial_error(const Quadrature& q, int64_t max_degree) {
  std::vector<double> power(q.weights.size(), 1.0);
  double worst = 0;
  for (int64_t k = 0; k <= max_degree; ++k) {
    double integral = 0;
    for (size_t j = 0; j < power.size(); ++j) integral += q.weights[j] * power[j];
    const double exact = k % 2 == 1 ? 0.0 : 2.0 / static_cast<double>(k + 1);
    worst = std::max(worst, std::abs(integral - exact));
    for (size_t j = 0; j < power.size(); ++j) power[j] *= q.cos_theta[j];
  }
  return worst;
}

}  // namespace

TEST_CASE("sphere grids: names round-trip and bad names list the accepted ones") {
  for (GridKind g : kAllGrids) CHECK(parse_grid_kind(grid_name(g)) == g);
  CHECK(grid_name(GridKind::legendre_gauss) == "legendre-gauss");
  CHECK_THROWS_WITH_AS(parse_grid_kind("gaussian"),
                       doctest::Contains("unknown grid 'gaussian'; accepted grids: equiangular, legendre-gauss, lobatto"),
                       gs::Error);
  for (Normalization n : kAllNorms) CHECK(parse_normalization(normalization_name(n)) == n);
  CHECK(normalization_name(Normalization::four_pi) == "four-pi");
  CHECK_THROWS_WITH_AS(parse_normalization("unnorm"), doctest::Contains("accepted normalizations: ortho, four-pi, schmidt"),
                       gs::Error);
}

TEST_CASE("sphere grids: small rules match their textbook nodes and weights") {
  const Quadrature g3 = make_quadrature(GridKind::legendre_gauss, 3);
  CHECK(g3.cos_theta[0] == doctest::Approx(std::sqrt(0.6)).epsilon(1e-15));
  CHECK(g3.cos_theta[1] == 0.0);
  CHECK(g3.weights[0] == doctest::Approx(5.0 / 9).epsilon(1e-15));
  CHECK(g3.weights[1] == doctest::Approx(8.0 / 9).epsilon(1e-15));

  const Quadrature l5 = make_quadrature(GridKind::lobatto, 5);
  CHECK(l5.cos_theta[0] == 1.0);
  CHECK(l5.cos_theta[4] == -1.0);
  CHECK(l5.cos_theta[1] == doctest::Approx(std::sqrt(3.0 / 7)).epsilon(1e-15));
  CHECK(l5.weights[0] == doctest::Approx(0.1).epsilon(1e-15));
  CHECK(l5.weights[1] == doctest::Approx(49.0 / 90).epsilon(1e-15));
  CHECK(l5.weights[2] == doctest::Approx(32.0 / 45).epsilon(1e-15));

  const Quadrature cc3 = make_quadrature(GridKind::equiangular, 3);  // Simpson's rule
  CHECK(cc3.weights[0] == doctest::Approx(1.0 / 3).epsilon(1e-15));
  CHECK(cc3.weights[1] == doctest::Approx(4.0 / 3).epsilon(1e-15));
  CHECK(make_quadrature(GridKind::equiangular, 2).weights == std::vector<double>{1.0, 1.0});
  CHECK(make_quadrature(GridKind::legendre_gauss, 1).weights == std::vector<double>{2.0});
}

TEST_CASE("sphere grids: nodes run north to south, weights are positive and sum to 2") {
  for (GridKind g : kAllGrids)
    for (int64_t n : {2, 3, 4, 5, 8, 17, 64, 180, 361, 720, 721}) {
      CAPTURE(grid_name(g));
      CAPTURE(n);
      const Quadrature q = make_quadrature(g, n);
      REQUIRE(q.weights.size() == static_cast<size_t>(n));
      CHECK(std::abs(sum(q.weights) - 2.0) <= 1e-14);
      for (size_t j = 0; j < q.weights.size(); ++j) {
        CHECK(q.weights[j] > 0);
        CHECK(std::abs(std::cos(q.colatitude[j]) - q.cos_theta[j]) <= 1e-15);
        if (j > 0) CHECK(q.cos_theta[j] < q.cos_theta[j - 1]);
      }
      const bool has_poles = g != GridKind::legendre_gauss;
      CHECK((q.cos_theta.front() == 1.0) == has_poles);
      CHECK((q.colatitude.back() == kPi) == has_poles);
    }
}

TEST_CASE("sphere grids: Gauss nodes are the roots of P_n, interior Lobatto nodes those of P_{n-1}'") {
  // Each node must lie within about one ulp (in x) of the root: a Newton step from it, |f / f'|,
  // is below 3e-16.
  for (int n : {5, 64, 720, 2048}) {
    CAPTURE(n);
    const Quadrature g = make_quadrature(GridKind::legendre_gauss, n);
    for (double x : g.cos_theta) CHECK(std::abs(legendre_p(n, x) * (1 - x * x) / one_minus_x2_dp(n, x)) <= 3e-16);
    // At a root of P_n', (1-x^2) P_n'' = -n(n+1) P_n.
    const Quadrature l = make_quadrature(GridKind::lobatto, n + 1);
    for (size_t j = 1; j + 1 < l.cos_theta.size(); ++j) {
      const double x = l.cos_theta[j];
      CHECK(std::abs(one_minus_x2_dp(n, x) / (n * (n + 1.0) * legendre_p(n, x))) <= 3e-16);
    }
  }
}

TEST_CASE("sphere grids: each rule integrates polynomials up to its documented degree to 1e-13") {
  CHECK(exact_polynomial_degree(GridKind::legendre_gauss, 10) == 19);
  CHECK(exact_polynomial_degree(GridKind::lobatto, 10) == 17);
  CHECK(exact_polynomial_degree(GridKind::equiangular, 10) == 9);
  CHECK(exact_polynomial_degree(GridKind::equiangular, 11) == 11);
  for (GridKind g : kAllGrids) {
    for (int64_t n : {2, 3, 4, 5, 6, 9, 32, 33, 180, 720, 721}) {
      CAPTURE(grid_name(g));
      CAPTURE(n);
      const Quadrature q = make_quadrature(g, n);
      const int64_t degree = exact_polynomial_degree(g, n);
      CHECK(polynomial_error(q, degree) <= 1e-13);
      // The documented degree is the true one: the next (even) degree is not integrated exactly.
      if (n <= 6) CHECK(polynomial_error(q, degree + 1) > 1e-6);
    }
  }
}

TEST_CASE("sphere grids: supported and default truncation follow torch-harmonics") {
  CHECK(max_supported_lmax(GridKind::legendre_gauss, 180) == 180);
  CHECK(max_supported_lmax(GridKind::lobatto, 128) == 127);
  CHECK(max_supported_lmax(GridKind::equiangular, 721) == 361);
  CHECK(max_supported_lmax(GridKind::equiangular, 720) == 360);
  CHECK(default_lmax(GridKind::equiangular, 128) == 64);
  CHECK(default_mmax(256) == 129);
  CHECK(default_mmax(255) == 128);

  auto same = [](Truncation t, int64_t lmax, int64_t mmax) { return t.lmax == lmax && t.mmax == mmax; };
  // torch-harmonics' docstring examples (truncation.py)
  CHECK(same(resolve_truncation(GridKind::legendre_gauss, 128, 256), 128, 128));
  CHECK(same(resolve_truncation(GridKind::lobatto, 128, 256), 127, 127));
  CHECK(same(resolve_truncation(GridKind::equiangular, 128, 256), 64, 64));
  CHECK(same(resolve_truncation(GridKind::legendre_gauss, 128, 256, 32), 32, 32));
  CHECK(same(resolve_truncation(GridKind::legendre_gauss, 128, 256, 85, 43), 85, 43));
  CHECK(same(resolve_truncation(GridKind::legendre_gauss, 180, 360), 180, 180));
  CHECK(same(resolve_truncation(GridKind::equiangular, 721, 1440), 361, 361));
  CHECK(same(resolve_truncation(GridKind::legendre_gauss, 64, 32), 17, 17));
  CHECK(same(resolve_truncation(GridKind::legendre_gauss, 128, 256, std::nullopt, 20), 128, 20));
  // torch-harmonics 0.9.3's RealSHT always makes the truncation triangular, both bounds given or not.
  const auto th = gs::sphere::TruncationRule::torch_harmonics_0_9_3;
  CHECK(same(resolve_truncation(GridKind::legendre_gauss, 128, 256, 85, 43, th), 43, 43));
  CHECK(same(resolve_truncation(GridKind::legendre_gauss, 64, 128, 10, 20, th), 10, 10));
  CHECK(same(resolve_truncation(GridKind::legendre_gauss, 128, 256, std::nullopt, 20, th), 20, 20));
  CHECK(same(resolve_truncation(GridKind::legendre_gauss, 128, 256, 32, std::nullopt, th), 32, 32));
  CHECK(same(resolve_truncation(GridKind::equiangular, 128, 256, std::nullopt, std::nullopt, th), 64, 64));
  CHECK(gs::sphere::make_sht_spec(GridKind::legendre_gauss, 16, 32, 12, 8, gs::sphere::Normalization::ortho, true, th).lmax == 8);

  CHECK_THROWS_WITH_AS(resolve_truncation(GridKind::equiangular, 721, 1440, 721),
                       doctest::Contains("lmax = 721 is too large for a 'equiangular' grid with nlat = 721"), gs::Error);
  CHECK_THROWS_WITH_AS(resolve_truncation(GridKind::equiangular, 721, 1440, 721), doctest::Contains("lmax <= 361"), gs::Error);
  CHECK_THROWS_WITH_AS(resolve_truncation(GridKind::legendre_gauss, 64, 128, 10, 20),
                       doctest::Contains("mmax = 20 exceeds lmax = 10"), gs::Error);
  CHECK_THROWS_WITH_AS(resolve_truncation(GridKind::legendre_gauss, 64, 16, 64, 20),
                       doctest::Contains("mmax = 20 exceeds nlon/2 + 1 = 9"), gs::Error);
  CHECK_THROWS_WITH_AS(resolve_truncation(GridKind::legendre_gauss, 64, 128, 0), doctest::Contains("lmax must be >= 1, got 0"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(make_quadrature(GridKind::equiangular, 1),
                       doctest::Contains("'equiangular' grid needs nlat >= 2 (both poles are nodes), got nlat = 1"), gs::Error);
  CHECK_THROWS_WITH_AS(make_quadrature(GridKind::legendre_gauss, 0), doctest::Contains("needs nlat >= 1, got nlat = 0"),
                       gs::Error);
}

TEST_CASE("sphere grids: area weights sum to 1; equiangular rows weigh exactly their cell's area") {
  for (GridKind g : kAllGrids)
    for (int64_t n : {2, 3, 7, 180, 721}) {
      CAPTURE(grid_name(g));
      CAPTURE(n);
      const std::vector<double> w = area_weights_coslat(g, n);
      CHECK(std::abs(sum(w) - 1.0) <= 1e-14);
      for (double v : w) CHECK(v > 0);
      const Quadrature q = make_quadrature(g, n);
      const std::vector<double> qw = quadrature_area_weights(g, n);
      for (size_t j = 0; j < qw.size(); ++j) CHECK(std::abs(qw[j] - q.weights[j] / 2) <= 2e-16);
      // Away from the poles the weights are proportional to cos(latitude).
      if (n >= 7) {
        const size_t a = 1, b = static_cast<size_t>(n) / 2;
        CHECK(w[a] / w[b] == doctest::Approx(std::sin(q.colatitude[a]) / std::sin(q.colatitude[b])).epsilon(1e-14));
      }
    }
  for (int64_t n : {2, 3, 7, 721}) {
    const std::vector<double> w = area_weights_coslat(GridKind::equiangular, n);
    const double d = kPi / static_cast<double>(n - 1);
    for (int64_t j = 0; j < n; ++j) {
      const double theta = static_cast<double>(j) * d;
      const double top = std::max(theta - d / 2, 0.0), bottom = std::min(theta + d / 2, kPi);
      const double cell_fraction = (std::cos(top) - std::cos(bottom)) / 2;
      CHECK(std::abs(w[static_cast<size_t>(j)] - cell_fraction) <= 1e-15);
    }
  }
}

TEST_CASE("legendre: values match closed forms for l <= 4 under every normalisation") {
  const Quadrature g = make_quadrature(GridKind::legendre_gauss, 7);
  std::vector<double> xs = g.cos_theta;
  for (double x : {1.0, -1.0, 0.93, 0.41, -0.27, -0.999}) xs.push_back(x);
  for (Normalization norm : kAllNorms)
    for (bool csphase : {true, false})
      for (bool inverse : {false, true}) {
        const LegendreSpec spec{GridKind::legendre_gauss, static_cast<int64_t>(xs.size()), 5, 5, norm, csphase, inverse};
        CAPTURE(normalization_name(norm));
        CAPTURE(csphase);
        CAPTURE(inverse);
        const std::vector<double> table = legendre_table(spec, xs);
        REQUIRE(table.size() == spec.tri_size());
        for (int m = 0; m <= 4; ++m)
          for (int l = m; l <= 4; ++l)
            for (size_t j = 0; j < xs.size(); ++j) {
              const double expected = expected_pbar(spec, l, m, xs[j]);
              const double got = table[spec.tri_index(m, l, static_cast<int64_t>(j))];
              CAPTURE(l);
              CAPTURE(m);
              CAPTURE(xs[j]);
              CHECK(std::abs(got - expected) <= 1e-12 * std::abs(expected));
            }
      }
}

TEST_CASE("legendre: triangular layout, and the single-order table is the slice of the full one") {
  const LegendreSpec spec{GridKind::legendre_gauss, 3, 5, 4, Normalization::ortho, true, false};
  CHECK(spec.tri_offset(0) == 0);
  CHECK(spec.tri_offset(1) == 5 * 3);
  CHECK(spec.tri_offset(2) == (5 + 4) * 3);
  CHECK(spec.tri_size() == (5 + 4 + 3 + 2) * 3);
  CHECK(spec.tri_index(2, 3, 1) == (5 + 4) * 3 + 1 * 3 + 1);

  const Quadrature q = make_quadrature(GridKind::legendre_gauss, 96);
  for (Normalization norm : kAllNorms) {
    const LegendreSpec big{GridKind::legendre_gauss, 96, 96, 60, norm, true, false};
    const std::vector<double> table = legendre_table(big, q.cos_theta);
    for (int64_t m : {0, 1, 17, 59}) {
      const std::vector<double> block = legendre_table_for_m(big, q.cos_theta, m);
      const auto start = table.begin() + static_cast<std::ptrdiff_t>(big.tri_offset(m));
      CHECK(std::equal(block.begin(), block.end(), start));
    }
  }
}

TEST_CASE("legendre: discrete orthonormality on legendre-gauss, nlat = lmax = 720") {
  const Quadrature q = make_quadrature(GridKind::legendre_gauss, 720);
  const LegendreSpec spec{GridKind::legendre_gauss, 720, 720, 720, Normalization::ortho, true, false};
  for (int64_t m : {0, 1, 100, 500, 719}) {
    CAPTURE(m);
    CHECK(orthogonality_error(q, spec, m) <= 1e-12);
  }
}

TEST_CASE("legendre: discrete orthonormality on equiangular and lobatto at the supported lmax, not beyond") {
  for (int64_t nlat : {721, 720}) {
    const Quadrature q = make_quadrature(GridKind::equiangular, nlat);
    const int64_t lmax = max_supported_lmax(GridKind::equiangular, nlat);
    const LegendreSpec spec{GridKind::equiangular, nlat, lmax, lmax, Normalization::ortho, true, false};
    for (int64_t m : {int64_t{0}, int64_t{1}, int64_t{100}, lmax - 1}) {
      CAPTURE(nlat);
      CAPTURE(m);
      CHECK(orthogonality_error(q, spec, m) <= 1e-12);
    }
  }
  {
    const Quadrature q = make_quadrature(GridKind::lobatto, 257);
    const LegendreSpec spec{GridKind::lobatto, 257, 256, 256, Normalization::ortho, true, false};
    for (int64_t m : {0, 1, 128, 255}) CHECK(orthogonality_error(q, spec, m) <= 1e-12);
  }
  for (GridKind g : kAllGrids) {
    const int64_t nlat = 33, lmax = max_supported_lmax(g, nlat) + 1;
    const LegendreSpec spec{g, nlat, lmax, lmax, Normalization::ortho, true, false};
    CAPTURE(grid_name(g));
    CHECK(orthogonality_error(make_quadrature(g, nlat), spec, 0) > 1e-6);
  }
}

TEST_CASE("legendre: high degrees stay normalised where the sin^m seed underflows f64") {
  // At lmax = 2048, m = 1024 the diagonal seed sin^1024(theta) drops below 1e-308 near
  // sin(theta) = 0.5, where the degrees near lmax are of order one.
  const int64_t n = 2048;
  const Quadrature q = make_quadrature(GridKind::legendre_gauss, n);
  const LegendreSpec spec{GridKind::legendre_gauss, n, n, n, Normalization::ortho, false, false};
  for (int64_t m : {1024, 1800}) {
    CAPTURE(m);
    const std::vector<double> block = legendre_table_for_m(spec, q.cos_theta, m);
    double worst = 0;
    for (int64_t l = m; l < n; ++l) {
      double norm = 0;
      for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
        const double p = block[static_cast<size_t>(l - m) * static_cast<size_t>(n) + j];
        REQUIRE(std::isfinite(p));
        norm += 2 * kPi * q.weights[j] * p * p;
      }
      worst = std::max(worst, std::abs(norm - 1));
    }
    CHECK(worst <= 1e-11);
    // The diagonal against its closed form sqrt((2m+1)!! / (2m)!! / (4 pi)) sin^m, in logs.
    const double md = static_cast<double>(m);
    const double log_c = 0.5 * (std::lgamma(2 * md + 2) - 2 * md * std::log(2.0) - 2 * std::lgamma(md + 1) - std::log(4 * kPi));
    for (size_t j = 0; j < static_cast<size_t>(n); ++j) {
      const double p = block[j];
      if (p < 1e-250) continue;
      CHECK(std::abs(std::log(p) - (log_c + md * std::log(std::sin(q.colatitude[j])))) <= 1e-11);
    }
  }
}

TEST_CASE("legendre: bad specs and nodes throw with expected and received values") {
  const std::vector<double> x{0.5, 0.0, -0.5};
  auto spec = [](int64_t nlat, int64_t lmax, int64_t mmax) {
    return LegendreSpec{GridKind::legendre_gauss, nlat, lmax, mmax, Normalization::ortho, true, false};
  };
  CHECK_THROWS_WITH_AS(legendre_table(spec(3, 0, 1), x), doctest::Contains("lmax must be >= 1, got 0"), gs::Error);
  CHECK_THROWS_WITH_AS(legendre_table(spec(3, 4, 0), x), doctest::Contains("mmax must be >= 1, got 0"), gs::Error);
  CHECK_THROWS_WITH_AS(legendre_table(spec(3, 4, 5), x), doctest::Contains("mmax must be <= lmax"), gs::Error);
  CHECK_THROWS_WITH_AS(legendre_table(spec(3, 4, 5), x), doctest::Contains("got mmax = 5, lmax = 4"), gs::Error);
  CHECK_THROWS_WITH_AS(legendre_table(spec(4, 4, 4), x), doctest::Contains("expected nlat = 4 values of cos(theta), got 3"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(legendre_table(spec(3, 4, 4), std::vector<double>{0.5, 1.5, 0.0}),
                       doctest::Contains("cos_theta[1] = 1.5 is outside [-1, 1]"), gs::Error);
  CHECK_THROWS_AS(legendre_table(spec(3, 4, 4), std::vector<double>{0.5, std::nan(""), 0.0}), gs::Error);
  CHECK_THROWS_WITH_AS(legendre_table_for_m(spec(3, 4, 2), x, 2), doctest::Contains("order m must be in [0, mmax = 2), got m = 2"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(legendre_table_for_m(spec(3, 4, 2), x, -1), doctest::Contains("got m = -1"), gs::Error);
}
