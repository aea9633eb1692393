// Latitude grids of the sphere: quadrature nodes and weights in cos(theta), the truncation each grid
// supports, and the area weights used for spatial means. Pure f64 numerics on std::vector; the
// tensor ops wrap these. Conventions and sources: ops/sphere/NOTES.md.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace gs::sphere {

// The latitude rule. Names follow torch-harmonics: "equiangular" (Clenshaw-Curtis, poles included),
// "legendre-gauss" (no poles), "lobatto" (Gauss-Lobatto-Legendre, poles included).
enum class GridKind { equiangular, legendre_gauss, lobatto };

std::string_view grid_name(GridKind grid);
// Throws gs::Error naming the accepted names when `name` is none of them.
GridKind parse_grid_kind(std::string_view name);

// One latitude rule on [-1, 1] in x = cos(theta). Rows run north to south: index 0 is theta = 0
// (x = +1) or the node nearest to it. sum(weights) == 2, so sum_j w_j f(x_j) ~ integral of f dx.
struct Quadrature {
  std::vector<double> colatitude;  // theta_j in [0, pi]
  std::vector<double> cos_theta;   // x_j = cos(theta_j), decreasing
  std::vector<double> weights;     // w_j > 0
};

// nlat >= 1 for legendre-gauss, nlat >= 2 for the grids that contain both poles.
Quadrature make_quadrature(GridKind grid, int64_t nlat);

// The highest polynomial degree in x that the rule integrates exactly (always odd):
// legendre-gauss 2n-1, lobatto 2n-3, equiangular n-1 (n even) or n (n odd).
int64_t exact_polynomial_degree(GridKind grid, int64_t nlat);

// The largest (exclusive) lmax for which the rule integrates P_l^m P_l'^m exactly for all
// l, l' < lmax. That product is a polynomial of degree l + l' <= 2 lmax - 2, so
// lmax = (exact_polynomial_degree + 1) / 2: legendre-gauss nlat, lobatto nlat - 1,
// equiangular (nlat + 1) / 2. Beyond it the forward SHT no longer inverts the inverse SHT.
int64_t max_supported_lmax(GridKind grid, int64_t nlat);

// Throws gs::Error when lmax exceeds max_supported_lmax(grid, nlat), saying what the limit is and why.
void check_lmax_supported(GridKind grid, int64_t nlat, int64_t lmax);

// torch-harmonics' defaults (truncation.py, v0.9 and later): lmax = max_supported_lmax (for
// equiangular this changed in v0.9.0 from nlat to (nlat+1)/2), mmax = the longitude Nyquist limit.
int64_t default_lmax(GridKind grid, int64_t nlat);
int64_t default_mmax(int64_t nlon);

// Exclusive bounds of the spectral coefficients (l < lmax, m < mmax).
struct Truncation {
  int64_t lmax;
  int64_t mmax;
};

// How the bounds are completed (NOTES.md, "Supported and default truncation"):
//   gradsphere: a missing lmax is default_lmax; a missing mmax is min(default_mmax, lmax); with
//     neither given the truncation is triangular, lmax = mmax = min of the two defaults; both
//     given are kept as given (a rectangular truncation is allowed).
//   torch_harmonics_0_9_3: missing bounds take the defaults, then always lmax = mmax = min(lmax,
//     mmax), even when both were given (RealSHT of torch-harmonics 0.9.3); use it where a
//     transform must match a torch-harmonics checkpoint.
enum class TruncationRule { gradsphere, torch_harmonics_0_9_3 };

// Fills the bounds the caller left out by `rule`. Throws when lmax < 1, mmax < 1, mmax > lmax,
// mmax > nlon/2 + 1 (more orders than the longitude FFT has) or lmax is beyond the grid's support.
Truncation resolve_truncation(GridKind grid, int64_t nlat, int64_t nlon, std::optional<int64_t> lmax = {},
                              std::optional<int64_t> mmax = {}, TruncationRule rule = TruncationRule::gradsphere);

// Per-row weights for area-weighted spatial means, normalised to sum to 1 (ACE's convention):
// proportional to sin(theta_j) = cos(latitude_j). A pole row would get 0 from that formula although
// it stands for a polar cap; it gets the cap's area instead (see NOTES.md), which on an equiangular
// grid makes every row's weight exactly its cell's share of the sphere.
std::vector<double> area_weights_coslat(GridKind grid, int64_t nlat);

// The quadrature weights of make_quadrature, normalised to sum to 1.
std::vector<double> quadrature_area_weights(GridKind grid, int64_t nlat);

}  // namespace gs::sphere
