// The recurrence (as in torch-harmonics' legpoly, after Schaeffer 2013), in the ortho normalisation:
//   Pbar_0^0     = 1 / sqrt(4 pi)
//   Pbar_m^m     = sqrt((2m+1) / (2m)) sin(theta) Pbar_{m-1}^{m-1}
//   Pbar_l^m     = a_lm x Pbar_{l-1}^m - b_lm Pbar_{l-2}^m,
//   a_lm = sqrt((2l-1)(2l+1) / ((l-m)(l+m))),  b_lm = sqrt((l+m-1)(l-m-1)(2l+1) / ((l-m)(l+m)(2l-3))).
// The diagonal seed ~ sin^m(theta) underflows f64 near the poles long before the values it seeds do:
// at lmax = 2048, m = 1024 the seed drops below 1e-308 at sin(theta) ~ 0.5, where Pbar_2047^1024 is
// of order one. Seeds are therefore carried as mantissa * 2^exponent until the recurrence has
// grown them back into range.
#include "ops/sphere/legendre/functions.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "engine/error.h"

namespace gs::sphere {
namespace {

constexpr double kPi = std::numbers::pi;

using detail::advance_diagonal;
using detail::kFoldExponent;
using detail::ScaledValue;

ScaledValue scaled(double v) {
  ScaledValue s{};
  s.mant = std::frexp(v, &s.exp);
  return s;
}

double seed_00(const LegendreSpec& spec) { return detail::seed_00(spec.norm, spec.inverse); }

double row_factor(const LegendreSpec& spec, int64_t m, int64_t l) {
  return detail::row_factor(spec.norm, spec.csphase, spec.inverse, m, l);
}

std::vector<double> sin_theta_of(const std::vector<double>& x) {
  std::vector<double> s(x.size());
  for (size_t j = 0; j < x.size(); ++j) s[j] = std::sqrt((1.0 - x[j]) * (1.0 + x[j]));
  return s;
}

void check_nodes(const LegendreSpec& spec, const std::vector<double>& cos_theta) {
  GS_CHECK(static_cast<int64_t>(cos_theta.size()) == spec.nlat,
           "legendre_table: expected nlat = {} values of cos(theta), got {}", spec.nlat, cos_theta.size());
  for (size_t j = 0; j < cos_theta.size(); ++j)
    GS_CHECK(std::abs(cos_theta[j]) <= 1.0, "legendre_table: cos_theta[{}] = {} is outside [-1, 1]", j, cos_theta[j]);
}

// Block m, rows l = m..lmax-1, from the diagonal seeds. The main loop over nodes is branch-free;
// nodes whose value is still scaled are fixed up after it.
void fill_block(const LegendreSpec& spec, const std::vector<double>& x, int64_t m,
                const std::vector<ScaledValue>& diagonal, double* out) {
  const auto nlat = static_cast<size_t>(spec.nlat);
  std::vector<double> p_prev(nlat, 0.0), p_cur(nlat);  // rows l-2 and l-1, in units of 2^scale
  std::vector<int> scale(nlat, 0);
  std::vector<size_t> scaled_nodes;
  for (size_t j = 0; j < nlat; ++j) {
    const ScaledValue d = diagonal[j];
    if (d.exp >= kFoldExponent) {
      p_cur[j] = std::ldexp(d.mant, d.exp);
    } else {
      p_cur[j] = d.mant;
      scale[j] = d.exp;
      scaled_nodes.push_back(j);
    }
  }

  auto emit_row = [&](int64_t l) {
    double* row = out + static_cast<size_t>(l - m) * nlat;
    const double f = row_factor(spec, m, l);
    for (size_t j = 0; j < nlat; ++j) row[j] = f * p_cur[j];
    for (size_t j : scaled_nodes) row[j] = f * std::ldexp(p_cur[j], scale[j]);
  };

  emit_row(m);
  const double md = static_cast<double>(m);
  for (int64_t l = m + 1; l < spec.lmax; ++l) {
    const double ld = static_cast<double>(l);
    const double a = std::sqrt((2.0 * ld - 1.0) * (2.0 * ld + 1.0) / ((ld - md) * (ld + md)));
    const double b = l - m < 2 ? 0.0
                               : std::sqrt((ld + md - 1.0) * (ld - md - 1.0) * (2.0 * ld + 1.0) /
                                           ((ld - md) * (ld + md) * (2.0 * ld - 3.0)));
    for (size_t j = 0; j < nlat; ++j) {
      const double next = a * x[j] * p_cur[j] - b * p_prev[j];
      p_prev[j] = p_cur[j];
      p_cur[j] = next;
    }
    // Renormalise the scaled nodes; fold a node back into plain f64 once its value is in range.
    size_t kept = 0;
    for (size_t j : scaled_nodes) {
      int e = 0;
      std::frexp(std::max(std::abs(p_cur[j]), std::abs(p_prev[j])), &e);
      p_cur[j] = std::ldexp(p_cur[j], -e);
      p_prev[j] = std::ldexp(p_prev[j], -e);
      scale[j] += e;
      if (scale[j] >= kFoldExponent) {
        p_cur[j] = std::ldexp(p_cur[j], scale[j]);
        p_prev[j] = std::ldexp(p_prev[j], scale[j]);
        scale[j] = 0;
      } else {
        scaled_nodes[kept++] = j;
      }
    }
    scaled_nodes.resize(kept);
    emit_row(l);
  }
}

}  // namespace

std::string_view normalization_name(Normalization norm) {
  switch (norm) {
    case Normalization::ortho: return "ortho";
    case Normalization::four_pi: return "four-pi";
    case Normalization::schmidt: return "schmidt";
  }
  gs::fail("internal error: invalid Normalization {}", static_cast<int>(norm));
}

Normalization parse_normalization(std::string_view name) {
  for (Normalization n : {Normalization::ortho, Normalization::four_pi, Normalization::schmidt})
    if (name == normalization_name(n)) return n;
  gs::fail("unknown normalization '{}'; accepted normalizations: ortho, four-pi, schmidt", name);
}

void validate(const LegendreSpec& spec) {
  GS_CHECK(spec.nlat >= 1, "Legendre table: nlat must be >= 1, got {}", spec.nlat);
  GS_CHECK(spec.lmax >= 1, "Legendre table: lmax must be >= 1, got {}", spec.lmax);
  GS_CHECK(spec.mmax >= 1, "Legendre table: mmax must be >= 1, got {}", spec.mmax);
  GS_CHECK(spec.mmax <= spec.lmax,
           "Legendre table: mmax must be <= lmax (orders m >= lmax have no degree l < lmax), got mmax = {}, lmax = {}",
           spec.mmax, spec.lmax);
}

std::vector<double> legendre_table(const LegendreSpec& spec, const std::vector<double>& cos_theta) {
  validate(spec);
  check_nodes(spec, cos_theta);
  std::vector<double> table(spec.tri_size());
  const std::vector<double> sin_theta = sin_theta_of(cos_theta);
  std::vector<ScaledValue> diagonal(cos_theta.size(), scaled(seed_00(spec)));
  for (int64_t m = 0; m < spec.mmax; ++m) {
    if (m > 0)
      for (size_t j = 0; j < diagonal.size(); ++j) advance_diagonal(diagonal[j], m, sin_theta[j]);
    fill_block(spec, cos_theta, m, diagonal, table.data() + spec.tri_offset(m));
  }
  return table;
}

std::vector<double> legendre_table_for_m(const LegendreSpec& spec, const std::vector<double>& cos_theta, int64_t m) {
  validate(spec);
  check_nodes(spec, cos_theta);
  GS_CHECK(m >= 0 && m < spec.mmax, "legendre_table_for_m: order m must be in [0, mmax = {}), got m = {}", spec.mmax, m);
  const std::vector<double> sin_theta = sin_theta_of(cos_theta);
  std::vector<ScaledValue> diagonal(cos_theta.size(), scaled(seed_00(spec)));
  for (size_t j = 0; j < diagonal.size(); ++j)
    for (int64_t k = 1; k <= m; ++k) advance_diagonal(diagonal[j], k, sin_theta[j]);
  std::vector<double> block(static_cast<size_t>(spec.lmax - m) * cos_theta.size());
  fill_block(spec, cos_theta, m, diagonal, block.data());
  return block;
}

namespace detail {

void advance_diagonal(ScaledValue& v, int64_t k, double sin_theta) {
  const double kd = static_cast<double>(k);
  int e = 0;
  v.mant = std::frexp(v.mant * (std::sqrt((2.0 * kd + 1.0) / (2.0 * kd)) * sin_theta), &e);
  v.exp += e;
}

double seed_00(Normalization norm, bool inverse) {
  const double four_pi_factor = norm == Normalization::ortho ? 1.0 : std::sqrt(4.0 * kPi);
  return (inverse ? 1.0 / four_pi_factor : four_pi_factor) / std::sqrt(4.0 * kPi);
}

double row_factor(Normalization norm, bool csphase, bool inverse, int64_t m, int64_t l) {
  double f = (csphase && m % 2 == 1) ? -1.0 : 1.0;
  if (norm == Normalization::schmidt) {
    const double root = std::sqrt(2.0 * static_cast<double>(l) + 1.0);
    f = inverse ? f * root : f / root;
  }
  return f;
}

}  // namespace detail

}  // namespace gs::sphere
