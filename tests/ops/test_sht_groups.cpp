// The grouped route of the SHT (ops/sphere/sht_blocks.cpp): under no tape, when the Legendre
// contraction runs on the fly, the longitude FFT and the recurrence kernels exchange the spectra in
// the FFT's grouped lane layout (fft.h rfft_lon_groups, legendre/contraction.h contract_groups)
// instead of as X (fields, nlat, mmax). Checked bitwise against the two recorded stages over X
// (rfft_lon then legendre_analysis; legendre_synthesis then irfft_lon) on grids that reach every
// edge of the layout: nlat a multiple of the group or not (the mirror rows of a northern group in
// one southern group or straddling two), an equator row (odd nlat), fewer rows than a group, odd
// nlon (the odd-length FFT), orders whose first kept row falls inside a group, f32 (16 rows a group)
// and f64 (8), one field and several blocks, one and two threads.
#include <doctest/doctest.h>

#include <omp.h>

#include <complex>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "ops/ops.h"
#include "ops/sphere/fft.h"
#include "ops/sphere/legendre/contraction.h"
#include "ops/sphere/legendre/path.h"
#include "ops/sphere/legendre/recurrence_plan.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/sht_blocks.h"
#include "tests/ops/sht_test_util.h"
#include "tests/test_util.h"

namespace {

using gs::DType;
using gs::Tensor;
using gs::sphere::GridKind;
using gs::sphere::LegendrePath;
using gs::sphere::ShtSpec;

using gs_test::as_c128;
using Settings = gs_test::ShtSettings;

int64_t lanes_of(DType real) { return gs::sphere::detail::grouped_spectra_shape(1, 1, 1, real)[3]; }

// Whether some order's first kept row lies inside a group of `lanes` rows (not on its start).
bool first_row_inside_a_group(const ShtSpec& s, DType real, int64_t lanes) {
  const gs::sphere::LegendreTableKey key{s.grid, s.nlat, s.lmax, s.mmax, s.norm, s.csphase,
                                         gs::sphere::LegendreTableKind::analysis, real};
  const auto plan = gs::sphere::recurrence_plan_cached(key);
  for (int64_t m = 0; m < s.mmax; ++m) {
    const int64_t fr = gs::sphere::recurrence_first_row(*plan, m);
    if (fr % lanes != 0 && fr < s.nlat / 2) return true;
  }
  return false;
}

// sht and isht of `fields` fields (blocks of per_block) against the stages, bitwise.
void check_grouped(const ShtSpec& s, DType real, int64_t fields, int threads, int64_t per_block = 2) {
  const int64_t field_bytes = s.nlat * s.mmax * 2 * static_cast<int64_t>(gs::dtype_size(real));
  Settings settings(LegendrePath::recurrence, threads, per_block * field_bytes);
  gs::NoGradGuard no_grad;
  const Tensor x = gs::cast_copy(gs::randn({fields, s.nlat, s.nlon}, {71, 1}, DType::f64), real);
  if (fields <= per_block) {  // one block: only the grouped route returns one (the X route's blocks need two)
    REQUIRE(gs::sphere::detail::sht_in_blocks(x, s).defined());
    REQUIRE(gs::sphere::detail::isht_in_blocks(gs::sphere::sht(x, s), s).defined());
  }
  const Tensor a = gs::sphere::sht(x, s);
  const Tensor a_stages = gs::sphere::legendre_analysis(gs::sphere::rfft_lon(x, s.mmax), s);
  REQUIRE(a.sizes() == a_stages.sizes());
  CHECK(as_c128(a) == as_c128(a_stages));
  const Tensor y = gs::sphere::isht(a_stages, s);
  const Tensor y_stages = gs::sphere::irfft_lon(gs::sphere::legendre_synthesis(a_stages, s), s.nlon);
  REQUIRE(y.sizes() == y_stages.sizes());
  CHECK(as_c128(y) == as_c128(y_stages));

  // The two pieces directly, on one block of every field: the route sht takes.
  const gs::Shape grouped = gs::sphere::detail::grouped_spectra_shape(fields, s.nlat, s.mmax, real);
  const int64_t G = grouped[1], L = grouped[3];
  const Tensor groups = gs::empty(grouped, real);
  gs::sphere::detail::rfft_lon_groups(x, groups);
  const Tensor a_direct = gs::empty({fields, s.lmax, s.mmax}, gs::complex_dtype(real));
  const gs::sphere::LegendreTableKey ana{s.grid, s.nlat, s.lmax, s.mmax, s.norm, s.csphase,
                                         gs::sphere::LegendreTableKind::analysis, real};
  REQUIRE(gs::sphere::legendre::takes_groups(x, ana, fields));
  gs::sphere::legendre::contract_groups(ana, gs::sphere::legendre::Direction::to_degree, groups, a_direct);
  CHECK(as_c128(a_direct) == as_c128(a_stages));
  const gs::sphere::LegendreTableKey syn{s.grid, s.nlat, s.lmax, s.mmax, s.norm, s.csphase,
                                         gs::sphere::LegendreTableKind::synthesis, real};
  const Tensor back = gs::full(grouped, 7.0, real);  // every value is written
  gs::sphere::legendre::contract_groups(syn, gs::sphere::legendre::Direction::to_latitude, back, a_stages);
  const Tensor y_direct = gs::empty({fields, s.nlat, s.nlon}, real);
  gs::sphere::detail::irfft_lon_groups(back, y_direct);
  CHECK(as_c128(y_direct) == as_c128(y_stages));
  // The padding rows past nlat in the last group: zero.
  const std::vector<double> b = gs::cast_copy(back, DType::f64).to_vector<double>();
  for (int64_t f = 0; f < fields; ++f)
    for (int64_t k = 0; k < 2 * s.mmax; ++k)
      for (int64_t j = s.nlat; j < G * L; ++j)
        CHECK(b[static_cast<size_t>(((f * G + j / L) * 2 * s.mmax + k) * L + j % L)] == 0.0);
}

}  // namespace

TEST_CASE("sht groups: the grouped route equals the stages over X, bit for bit") {
  struct Grid {
    GridKind kind;
    int64_t nlat, nlon;
  };
  // nlat mod 8 / mod 16: 0 (LG 32, 48), 1 (equiangular 33, 49: an equator), 4 and 12 (LG 60 and 28),
  // 5 (equiangular 45), fewer rows than a group (LG 6, equiangular 13); odd nlon (LG 24 x 45).
  const std::vector<Grid> grids = {{GridKind::legendre_gauss, 32, 64},  {GridKind::equiangular, 33, 64},
                                   {GridKind::legendre_gauss, 60, 120}, {GridKind::equiangular, 45, 90},
                                   {GridKind::legendre_gauss, 28, 56},  {GridKind::legendre_gauss, 6, 12},
                                   {GridKind::equiangular, 13, 26},     {GridKind::legendre_gauss, 24, 45},
                                   {GridKind::legendre_gauss, 48, 96},  {GridKind::equiangular, 49, 96}};
  for (const Grid& g : grids) {
    const ShtSpec s = gs::sphere::make_sht_spec(g.kind, g.nlat, g.nlon);
    for (DType real : {DType::f64, DType::f32})
      for (int64_t fields : {1, 5})
        for (int threads : {1, 2}) {
          CAPTURE(s.str());
          CAPTURE(gs::dtype_name(real));
          CAPTURE(fields);
          CAPTURE(threads);
          check_grouped(s, real, fields, threads);
        }
  }
}

TEST_CASE("sht groups: orders whose first kept row lies inside a group") {
  // At 160 degrees the polar rows of high orders are skipped (recurrence_first_row), from rows that
  // are not all multiples of the group.
  const ShtSpec s = gs::sphere::make_sht_spec(GridKind::legendre_gauss, 160, 320);
  for (DType real : {DType::f64, DType::f32}) {
    CAPTURE(gs::dtype_name(real));
    REQUIRE(first_row_inside_a_group(s, real, lanes_of(real)));
    check_grouped(s, real, 3, 2);
  }
  // 161 rows: the mirror rows straddle two groups (in f32 too), with skipped polar rows.
  const ShtSpec e = gs::sphere::make_sht_spec(GridKind::equiangular, 161, 320);
  REQUIRE(first_row_inside_a_group(e, DType::f64, 8));
  check_grouped(e, DType::f64, 1, 1);
  REQUIRE(first_row_inside_a_group(e, DType::f32, 16));
  check_grouped(e, DType::f32, 3, 2);
}

TEST_CASE("sht groups: many fields in one block split by fields over the threads") {
  // 33 fields in one block at two threads: the recurrence gives each thread a run of fields
  // (for_chunks), so the groups are read and written from a field offset.
  const ShtSpec s = gs::sphere::make_sht_spec(GridKind::legendre_gauss, 28, 56);
  for (DType real : {DType::f64, DType::f32}) {
    CAPTURE(gs::dtype_name(real));
    check_grouped(s, real, 33, 2, 64);
  }
}

TEST_CASE("sht groups: the route's entries say what they expected") {
  const ShtSpec s = gs::sphere::make_sht_spec(GridKind::legendre_gauss, 8, 16);
  const Tensor x = gs::randn({3, s.nlat, s.nlon}, {72, 1}, DType::f64);
  const std::string fft = gs_test::error_of([&] {
    gs::sphere::detail::rfft_lon_groups(x, gs::empty({3, 1, 2 * s.mmax, 16}, DType::f64));  // 16 lanes of f64
  });
  CHECK(gs_test::contains(fft, "rfft_lon_groups: expected contiguous CPU tensors (fields, nlat, nlon) real and"));
  CHECK(gs_test::contains(fft, "(3, 1, 16, 16)"));
  const gs::sphere::LegendreTableKey key{s.grid, s.nlat, s.lmax, s.mmax, s.norm, s.csphase,
                                         gs::sphere::LegendreTableKind::analysis, DType::f64};
  const std::string con = gs_test::error_of([&] {
    gs::sphere::legendre::contract_groups(key, gs::sphere::legendre::Direction::to_degree,
                                          gs::empty({3, 1, 2 * s.mmax, 8}, DType::f64),
                                          gs::empty({3, s.lmax, s.mmax}, DType::c64));  // mixed precisions
  });
  CHECK(gs_test::contains(con, "legendre contract_groups: expected contiguous CPU groups"));
  const std::string complex_groups = gs_test::error_of([&] {  // groups must be real
    gs::sphere::legendre::contract_groups(key, gs::sphere::legendre::Direction::to_degree,
                                          gs::empty({3, 1, 2 * s.mmax, 8}, DType::c128),
                                          gs::empty({3, s.lmax, s.mmax}, DType::c128));
  });
  CHECK(gs_test::contains(complex_groups, "groups real"));
  const std::string undefined = gs_test::error_of([&] { gs::sphere::detail::rfft_lon_groups(x, Tensor{}); });
  CHECK(gs_test::contains(undefined, "rfft_lon_groups: expected contiguous CPU tensors"));
  CHECK(gs_test::contains(undefined, "an undefined tensor"));
  // A tape keeps the recorded stages: the route is for calls under no tape only.
  Tensor leaf = gs::sample_leaf({2, s.nlat, s.nlon}, {72, 2}, DType::f64);
  {
    Settings forced(LegendrePath::recurrence, 1, gs::sphere::detail::kShtBlockBytes);
    const Tensor a = gs::sphere::sht(leaf, s);
    REQUIRE(a.grad_fn());
    CHECK(a.grad_fn()->name() == "legendre_analysis");
  }
}
