// Normalised associated Legendre functions on a latitude grid, the f64 tables behind the spherical
// harmonic transform. Conventions match torch-harmonics' legpoly (torch_harmonics/legendre.py);
// see ops/sphere/NOTES.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ops/sphere/grids.h"

namespace gs::sphere {

// With s = +-1 the optional Condon-Shortley sign (-1)^m and P_l^m the unnormalised function
// (1-x^2)^{m/2} d^m/dx^m P_l(x):
//   ortho:   Pbar = s sqrt((2l+1)/(4 pi) (l-m)!/(l+m)!) P_l^m, so that Y_lm = Pbar(cos theta) e^{i m phi}
//            is orthonormal on the unit sphere: 2 pi * integral_{-1}^{1} Pbar^2 dx = 1.
//   four_pi: sqrt(4 pi) * ortho (mean of |Y_lm|^2 over the sphere is 1).
//   schmidt: sqrt(4 pi / (2l+1)) * ortho (s sqrt((l-m)!/(l+m)!) P_l^m, Schmidt semi-normalised).
// Names as torch-harmonics spells them: "ortho", "four-pi", "schmidt".
enum class Normalization { ortho, four_pi, schmidt };

std::string_view normalization_name(Normalization norm);
Normalization parse_normalization(std::string_view name);

// What a table is built for. lmax and mmax are exclusive (l < lmax, m < mmax) and mmax <= lmax.
// grid is carried for the cache key and messages; the values depend only on the nodes passed in.
// inverse mirrors torch-harmonics' `inverse=` flag: for four_pi and schmidt the synthesis (inverse
// SHT) table divides by the factor that the analysis table multiplies by, so that the pair
// round-trips; for ortho both tables are the same.
struct LegendreSpec {
  GridKind grid = GridKind::legendre_gauss;
  int64_t nlat = 0;
  int64_t lmax = 0;
  int64_t mmax = 0;
  Normalization norm = Normalization::ortho;
  bool csphase = true;  // torch-harmonics' default
  bool inverse = false;

  // Triangular layout: one contiguous block per m in [0, mmax) of (lmax - m) rows l = m..lmax-1,
  // each row nlat values (row-major, latitude fastest). Block m starts at tri_offset(m).
  size_t tri_offset(int64_t m) const {
    const int64_t rows_before = m * lmax - m * (m - 1) / 2;  // sum of (lmax - k) for k < m
    return static_cast<size_t>(rows_before) * static_cast<size_t>(nlat);
  }
  size_t tri_size() const { return tri_offset(mmax); }
  size_t tri_index(int64_t m, int64_t l, int64_t j) const {
    return tri_offset(m) + static_cast<size_t>(l - m) * static_cast<size_t>(nlat) + static_cast<size_t>(j);
  }
};

// Throws gs::Error, stating expected and received values, unless 1 <= mmax <= lmax and nlat >= 1.
void validate(const LegendreSpec& spec);

// The whole triangular table Pbar_l^m(x_j), size spec.tri_size(), built by the three-term recurrence
// in f64: seeds on the diagonal l = m, then upward in l. cos_theta must hold nlat values in [-1, 1].
std::vector<double> legendre_table(const LegendreSpec& spec, const std::vector<double>& cos_theta);

// Block m of that table alone ((lmax - m) x nlat), bitwise equal to the slice of legendre_table;
// for callers and tests that need a few orders of a large table.
std::vector<double> legendre_table_for_m(const LegendreSpec& spec, const std::vector<double>& cos_theta, int64_t m);

// Shared by the tables (functions.cpp) and the on-the-fly path (recurrence.cpp), so both
// compute the same values with the same operations.
namespace detail {
// Below 2^-600 a value is kept scaled; from there on the recurrence cannot push it to subnormals.
inline constexpr int kFoldExponent = -600;
// mant * 2^exp with mant in [0.5, 1) or 0: the diagonal Pbar_m^m underflows f64 near the poles.
struct ScaledValue {
  double mant;
  int exp;
};
// Pbar_{k-1}^{k-1} -> Pbar_k^k.
void advance_diagonal(ScaledValue& v, int64_t k, double sin_theta);
// Pbar_0^0 of a table; torch-harmonics scales the seed and nothing else for four-pi.
double seed_00(Normalization norm, bool inverse);
// The output factor of row l of order m: the Condon-Shortley sign and the Schmidt degree factor.
double row_factor(Normalization norm, bool csphase, bool inverse, int64_t m, int64_t l);
}  // namespace detail

}  // namespace gs::sphere
