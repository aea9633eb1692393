// Quadrature rules in x = cos(theta), computed in f64 without external libraries.
// Gauss and Lobatto nodes are found by Newton iteration in theta rather than in x: the roots are
// nearly evenly spaced in theta, so the classical first guesses converge fast at every node, and
// the colatitudes come out directly instead of through acos, which is ill-conditioned at the poles.
#include "ops/sphere/grids.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "engine/error.h"

namespace gs::sphere {
namespace {

constexpr double kPi = std::numbers::pi;

int64_t min_nlat(GridKind grid) { return grid == GridKind::legendre_gauss ? 1 : 2; }

void check_nlat(GridKind grid, int64_t nlat, std::string_view caller) {
  GS_CHECK(nlat >= min_nlat(grid), "{}: a '{}' grid needs nlat >= {}{}, got nlat = {}", caller, grid_name(grid),
           min_nlat(grid), grid == GridKind::legendre_gauss ? "" : " (both poles are nodes)", nlat);
}

// P_n(x) and P_{n-1}(x) by Bonnet's recurrence, n >= 1.
struct LegendrePair {
  double p_n;
  double p_n_minus_1;
};

LegendrePair legendre_pair(int64_t n, double x) {
  double prev = 1.0, cur = x;
  for (int64_t k = 1; k < n; ++k) {
    const double next = (static_cast<double>(2 * k + 1) * x * cur - static_cast<double>(k) * prev) /
                        static_cast<double>(k + 1);
    prev = cur;
    cur = next;
  }
  return {cur, prev};
}

// d/dtheta P_n(cos theta) = n (x P_n - P_{n-1}) / sin(theta), from the derivative identity
// (x^2 - 1) P_n'(x) = n (x P_n - P_{n-1}).
double legendre_dtheta(int64_t n, double x, double sin_theta, const LegendrePair& p) {
  return static_cast<double>(n) * (x * p.p_n - p.p_n_minus_1) / sin_theta;
}

// Newton on theta from `guess`: stops once the step is below 1e-11, then takes one more step, which
// quadratic convergence turns into a correction at rounding level. (The polynomial is evaluated at
// x = cos(theta), rounded to 1e-16 absolute, so steps near a pole stall around 1e-16 / sin(theta);
// a relative test on theta would never be met there.)
template <typename Step>
double newton_theta(double guess, Step step) {
  double theta = guess;
  for (int iter = 0; iter < 100; ++iter) {
    const double delta = step(theta);
    theta -= delta;
    if (std::abs(delta) <= 1e-11) return theta - step(theta);
  }
  gs::fail("internal error: Newton iteration for quadrature nodes did not converge from theta = {}", guess);
}

// Rows k and n-1-k mirror each other through the equator; filling them from one computation makes
// the rule exactly symmetric, so odd polynomials integrate to zero up to summation rounding.
void set_mirrored(Quadrature& q, int64_t k, double theta, double weight) {
  const auto n = static_cast<int64_t>(q.weights.size());
  const auto north = static_cast<size_t>(k), south = static_cast<size_t>(n - 1 - k);
  q.colatitude[north] = theta;
  q.colatitude[south] = kPi - theta;
  q.cos_theta[north] = std::cos(theta);
  q.cos_theta[south] = -q.cos_theta[north];
  q.weights[north] = q.weights[south] = weight;
}

void set_equator(Quadrature& q, double weight) {
  const size_t mid = q.weights.size() / 2;
  q.colatitude[mid] = kPi / 2;
  q.cos_theta[mid] = 0.0;
  q.weights[mid] = weight;
}

// Nodes: the n roots of P_n. Weights: 2 / (d/dtheta P_n)^2 at each root.
Quadrature legendre_gauss(int64_t n) {
  Quadrature q{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
  auto newton_step = [n](double theta) {
    const double x = std::cos(theta), s = std::sin(theta);
    const LegendrePair p = legendre_pair(n, x);
    return p.p_n / legendre_dtheta(n, x, s, p);
  };
  const double nd = static_cast<double>(n);
  for (int64_t k = 0; k < n / 2; ++k) {
    // Tricomi's first-order estimate of the k-th root counted from the north pole.
    const double theta = newton_theta(kPi * (static_cast<double>(k) + 0.75) / (nd + 0.5), newton_step);
    const double x = std::cos(theta);
    const double dp = legendre_dtheta(n, x, std::sin(theta), legendre_pair(n, x));
    set_mirrored(q, k, theta, 2.0 / (dp * dp));
  }
  if (n % 2 == 1) {
    const double dp = nd * legendre_pair(n, 0.0).p_n_minus_1;  // |d/dtheta P_n| at theta = pi/2
    set_equator(q, 2.0 / (dp * dp));
  }
  return q;
}

// n = N + 1 nodes: the poles and the N - 1 roots of P_N'. Weights: 2 / (N (N+1) P_N(x)^2).
Quadrature lobatto(int64_t n) {
  Quadrature q{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
  const int64_t big_n = n - 1;
  const double nn1 = static_cast<double>(big_n) * static_cast<double>(big_n + 1);
  auto weight_at = [&](double x) {
    const double p = legendre_pair(big_n, x).p_n;
    return 2.0 / (nn1 * p * p);
  };
  // Roots of h(theta) = d/dtheta P_N; Legendre's equation in theta gives
  // h' = -cot(theta) h - N (N+1) P_N.
  auto newton_step = [&](double theta) {
    const double x = std::cos(theta), s = std::sin(theta);
    const LegendrePair p = legendre_pair(big_n, x);
    const double h = legendre_dtheta(big_n, x, s, p);
    return h / (-(x / s) * h - nn1 * p.p_n);
  };
  set_mirrored(q, 0, 0.0, 2.0 / nn1);
  const double bnd = static_cast<double>(big_n);
  for (int64_t k = 1; k < n / 2; ++k) {
    // Roots of P_N' interlace those of P_N: start midway between the k-1-th and k-th Gauss estimates.
    const double theta = newton_theta(kPi * (static_cast<double>(k) + 0.25) / (bnd + 0.5), newton_step);
    set_mirrored(q, k, theta, weight_at(std::cos(theta)));
  }
  if (n % 2 == 1) set_equator(q, weight_at(0.0));
  return q;
}

// Clenshaw-Curtis on theta_k = k pi / N, k = 0..N (N = n - 1), with the exact weights
//   w_k = (c_k / N) (1 - sum_{j=1}^{N/2} b_j cos(2 j theta_k) / (4 j^2 - 1)),
// c_k = 1 at the poles and 2 elsewhere, b_j = 1 for j = N/2 and 2 otherwise (Waldvogel 2006,
// Trefethen's clencurt). O(n^2), run once per grid; the cosines come from one table indexed by
// (2 j k) mod 2N, so every angle is reduced exactly.
Quadrature clenshaw_curtis(int64_t n) {
  Quadrature q{std::vector<double>(n), std::vector<double>(n), std::vector<double>(n)};
  const int64_t big_n = n - 1;
  const double bnd = static_cast<double>(big_n);
  std::vector<double> cos_table(static_cast<size_t>(2 * big_n));
  for (int64_t r = 0; r < 2 * big_n; ++r) cos_table[static_cast<size_t>(r)] = std::cos(kPi * static_cast<double>(r) / bnd);

  auto weight = [&](int64_t k) {
    double sum = 0.0;
    for (int64_t j = 1; 2 * j <= big_n; ++j) {
      const double b = (2 * j == big_n) ? 1.0 : 2.0;
      const double jd = static_cast<double>(j);
      sum += b / (4.0 * jd * jd - 1.0) * cos_table[static_cast<size_t>((2 * j * k) % (2 * big_n))];
    }
    const double c = (k == 0 || k == big_n) ? 1.0 : 2.0;
    return c / bnd * (1.0 - sum);
  };
  for (int64_t k = 0; k < n / 2; ++k) set_mirrored(q, k, kPi * static_cast<double>(k) / bnd, weight(k));
  if (n % 2 == 1) set_equator(q, weight(big_n / 2));
  return q;
}

}  // namespace

std::string_view grid_name(GridKind grid) {
  switch (grid) {
    case GridKind::equiangular: return "equiangular";
    case GridKind::legendre_gauss: return "legendre-gauss";
    case GridKind::lobatto: return "lobatto";
  }
  gs::fail("internal error: invalid GridKind {}", static_cast<int>(grid));
}

GridKind parse_grid_kind(std::string_view name) {
  for (GridKind g : {GridKind::equiangular, GridKind::legendre_gauss, GridKind::lobatto})
    if (name == grid_name(g)) return g;
  gs::fail("unknown grid '{}'; accepted grids: equiangular, legendre-gauss, lobatto", name);
}

Quadrature make_quadrature(GridKind grid, int64_t nlat) {
  check_nlat(grid, nlat, "make_quadrature");
  switch (grid) {
    case GridKind::equiangular: return clenshaw_curtis(nlat);
    case GridKind::legendre_gauss: return legendre_gauss(nlat);
    case GridKind::lobatto: return lobatto(nlat);
  }
  gs::fail("internal error: invalid GridKind {}", static_cast<int>(grid));
}

int64_t exact_polynomial_degree(GridKind grid, int64_t nlat) {
  check_nlat(grid, nlat, "exact_polynomial_degree");
  switch (grid) {
    // N + 1 = nlat nodes integrate degree N exactly; for even N, degree N + 1 is odd and the
    // symmetric rule gets it right too.
    case GridKind::equiangular: return nlat % 2 == 1 ? nlat : nlat - 1;
    case GridKind::legendre_gauss: return 2 * nlat - 1;
    case GridKind::lobatto: return 2 * nlat - 3;
  }
  gs::fail("internal error: invalid GridKind {}", static_cast<int>(grid));
}

int64_t max_supported_lmax(GridKind grid, int64_t nlat) { return (exact_polynomial_degree(grid, nlat) + 1) / 2; }

void check_lmax_supported(GridKind grid, int64_t nlat, int64_t lmax) {
  const int64_t limit = max_supported_lmax(grid, nlat);
  GS_CHECK(lmax <= limit,
           "lmax = {} is too large for a '{}' grid with nlat = {}: its quadrature is exact for degree {}, "
           "so products of two degree < lmax functions integrate exactly only for lmax <= {}",
           lmax, grid_name(grid), nlat, exact_polynomial_degree(grid, nlat), limit);
}

int64_t default_lmax(GridKind grid, int64_t nlat) { return max_supported_lmax(grid, nlat); }

int64_t default_mmax(int64_t nlon) {
  GS_CHECK(nlon >= 1, "default_mmax: nlon must be >= 1, got {}", nlon);
  return nlon / 2 + 1;
}

Truncation resolve_truncation(GridKind grid, int64_t nlat, int64_t nlon, std::optional<int64_t> lmax,
                              std::optional<int64_t> mmax, TruncationRule rule) {
  const bool triangular = rule == TruncationRule::torch_harmonics_0_9_3 || (!lmax && !mmax);
  int64_t l = lmax.value_or(default_lmax(grid, nlat));
  int64_t m = mmax.value_or(rule == TruncationRule::torch_harmonics_0_9_3 ? default_mmax(nlon)
                                                                          : std::min(default_mmax(nlon), l));
  if (triangular) l = m = std::min(l, m);
  GS_CHECK(l >= 1, "lmax must be >= 1, got {}", l);
  GS_CHECK(m >= 1, "mmax must be >= 1, got {}", m);
  GS_CHECK(m <= l, "mmax = {} exceeds lmax = {}: orders m >= lmax have no degree l < lmax", m, l);
  GS_CHECK(m <= default_mmax(nlon), "mmax = {} exceeds nlon/2 + 1 = {}: a longitude FFT of {} points has no higher orders",
           m, default_mmax(nlon), nlon);
  check_lmax_supported(grid, nlat, l);
  return {l, m};
}

std::vector<double> area_weights_coslat(GridKind grid, int64_t nlat) {
  const Quadrature q = make_quadrature(grid, nlat);
  const auto n = static_cast<size_t>(nlat);
  std::vector<double> w(n);
  for (size_t j = 0; j < n; ++j) w[j] = std::sin(q.colatitude[j]);
  if (grid != GridKind::legendre_gauss) {
    // A pole row stands for the cap reaching halfway to the next row, theta < d/2. Measured in the
    // units of the other rows (a band of width d around theta has area 4 pi sin(theta) sin(d/2)),
    // the cap 4 pi sin^2(d/4) weighs tan(d/4) / 2.
    const double d = q.colatitude[1];
    w.front() = w.back() = std::tan(d / 4) / 2;
  }
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& v : w) v /= total;
  return w;
}

std::vector<double> quadrature_area_weights(GridKind grid, int64_t nlat) {
  std::vector<double> w = make_quadrature(grid, nlat).weights;
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  for (double& v : w) v /= total;
  return w;
}

}  // namespace gs::sphere
