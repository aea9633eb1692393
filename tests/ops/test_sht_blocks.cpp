// The SHT on blocks of fields (ops/sphere/sht_blocks.h): sht and isht of a large batch with no tape
// run both stages one block of fields at a time. Checked against the two recorded stages over the
// whole batch (rfft_lon then legendre_analysis; legendre_synthesis then irfft_lon): bitwise on a
// forced Legendre path (the same kernels see every field), to rounding on the automatic one (a
// block may take the other path), on both grids and dtypes, with leading dims, a short last block,
// a non-contiguous input, one and two threads (blocks in turn and blocks spread over the threads).
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <complex>
#include <string>
#include <utility>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "ops/ops.h"
#include "ops/sphere/fft.h"
#include "ops/sphere/legendre/contraction.h"
#include "ops/sphere/legendre/path.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/sht_blocks.h"
#include "tests/ops/sht_test_util.h"
#include "tests/test_util.h"

namespace {

using gs::c128;
using gs::DType;
using gs::Tensor;
using gs::sphere::GridKind;
using gs::sphere::LegendrePath;
using gs::sphere::ShtSpec;

using gs_test::as_c128;

// Largest |a - b| over the largest |b|.
double rel_diff(const std::vector<c128>& a, const std::vector<c128>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) num = std::max(num, std::abs(a[i] - b[i])), den = std::max(den, std::abs(b[i]));
  return num / den;
}

// One spec, dtype and path: blocked sht and isht against the two stages, for a batch (3, 5) whose
// blocks of `per_block` fields leave a short last one, and for a non-contiguous input.
void check_against_stages(const ShtSpec& s, DType real, LegendrePath path, int64_t per_block, int threads) {
  const int64_t field_bytes = s.nlat * s.mmax * 2 * static_cast<int64_t>(gs::dtype_size(real));
  gs_test::ShtSettings settings(path, threads, per_block * field_bytes);
  REQUIRE(gs::sphere::detail::sht_fields_per_block(s, real) == per_block);
  gs::NoGradGuard no_grad;
  const bool exact = path != LegendrePath::automatic;
  const double tol = real == DType::f64 ? 1e-12 : 2e-5;

  const Tensor x = gs::cast_copy(gs::randn({3, 5, s.nlat, s.nlon}, {61, 1}, DType::f64), real);
  const Tensor a = gs::sphere::detail::sht_in_blocks(x, s);  // the blocks, not a fallback
  REQUIRE(a.defined());
  CHECK(as_c128(gs::sphere::sht(x, s)) == as_c128(a));  // the path sht takes
  const Tensor a_stages = gs::sphere::legendre_analysis(gs::sphere::rfft_lon(x, s.mmax), s);
  REQUIRE(a.sizes() == a_stages.sizes());
  if (exact) CHECK(as_c128(a) == as_c128(a_stages));
  else CHECK(rel_diff(as_c128(a), as_c128(a_stages)) <= tol);

  const Tensor y = gs::sphere::detail::isht_in_blocks(a_stages, s);
  REQUIRE(y.defined());
  CHECK(as_c128(gs::sphere::isht(a_stages, s)) == as_c128(y));
  const Tensor y_stages = gs::sphere::irfft_lon(gs::sphere::legendre_synthesis(a_stages, s), s.nlon);
  REQUIRE(y.sizes() == y_stages.sizes());
  if (exact) CHECK(as_c128(y) == as_c128(y_stages));
  else CHECK(rel_diff(as_c128(y), as_c128(y_stages)) <= tol);

  // Fields along a non-contiguous dim: (nlat, 7, nlon) transposed.
  const Tensor xt = gs::transpose(gs::cast_copy(gs::randn({s.nlat, 7, s.nlon}, {61, 2}, DType::f64), real), 0, 1);
  const Tensor at = gs::sphere::detail::sht_in_blocks(xt, s);
  REQUIRE(at.defined());
  const Tensor at_stages = gs::sphere::legendre_analysis(gs::sphere::rfft_lon(gs::contiguous(xt), s.mmax), s);
  if (exact) CHECK(as_c128(at) == as_c128(at_stages));
  else CHECK(rel_diff(as_c128(at), as_c128(at_stages)) <= tol);
}

}  // namespace

TEST_CASE("sht blocks: blocked transforms equal the two stages over the whole batch") {
  // 32 longitudes take the lane FFT (and, on the recurrence, the grouped route of
  // test_sht_groups.cpp); 134 do not (67 is above the lane FFT's largest prime), so there the
  // blocks run the X layout on every path.
  for (const auto& [grid, nlon] : {std::pair{GridKind::legendre_gauss, 32}, std::pair{GridKind::equiangular, 32},
                                   std::pair{GridKind::legendre_gauss, 134}}) {
    const ShtSpec s = gs::sphere::make_sht_spec(grid, grid == GridKind::equiangular ? 17 : 16, nlon);
    for (DType real : {DType::f64, DType::f32})
      for (LegendrePath path : {LegendrePath::table, LegendrePath::recurrence, LegendrePath::automatic})
        for (int threads : {1, 2})
          for (int64_t per_block : {2, 4}) {  // 15 fields: 8 blocks (spread at 2 threads), or 4 (in turn)
            CAPTURE(gs::sphere::grid_name(grid));
            CAPTURE(gs::dtype_name(real));
            CAPTURE(static_cast<int>(path));
            CAPTURE(threads);
            CAPTURE(per_block);
            check_against_stages(s, real, path, per_block, threads);
          }
  }
}

TEST_CASE("sht blocks: a tape keeps the two recorded stages; one block is the plain path") {
  const ShtSpec s = gs::sphere::make_sht_spec(GridKind::legendre_gauss, 8, 16);
  gs_test::ShtSettings settings(gs::sphere::legendre_path(), 1, 2 * s.nlat * s.mmax * 16);  // two f64 fields a block
  Tensor x = gs::sample_leaf({6, s.nlat, s.nlon}, {62, 1}, DType::f64);
  const Tensor a = gs::sphere::sht(x, s);
  REQUIRE(a.grad_fn());
  CHECK(a.grad_fn()->name() == "legendre_analysis");
  Tensor c = gs::sample_leaf({6, s.lmax, s.mmax}, {62, 2}, DType::c128);
  const Tensor y = gs::sphere::isht(c, s);
  REQUIRE(y.grad_fn());
  CHECK(y.grad_fn()->name() == "irfft_lon");
  CHECK_FALSE(gs::sphere::detail::sht_in_blocks(x, s).defined());
  {
    gs::NoGradGuard no_grad;
    CHECK(gs::sphere::detail::sht_in_blocks(x, s).defined());
    CHECK_FALSE(gs::sphere::detail::sht_in_blocks(gs::narrow(x, 0, 0, 2), s).defined());  // one block
  }
  // The rule: at least two fields a block, else as many as the bytes hold.
  CHECK(gs::sphere::detail::sht_fields_per_block(s, DType::f64) == 2);
  gs::sphere::detail::set_sht_block_bytes(1);
  CHECK(gs::sphere::detail::sht_fields_per_block(s, DType::f64) == 2);
  CHECK(gs_test::contains(gs_test::error_of([] { gs::sphere::detail::set_sht_block_bytes(0); }),
                          "expected a positive number of bytes, got 0"));
  gs::sphere::detail::set_sht_block_bytes(10 * s.nlat * s.mmax * 8);
  CHECK(gs::sphere::detail::sht_fields_per_block(s, DType::f32) == 10);
  CHECK(gs::sphere::detail::sht_fields_per_block(s, DType::f64) == 5);
}

TEST_CASE("sht blocks: the unrecorded stage entries say what they expected") {
  const ShtSpec s = gs::sphere::make_sht_spec(GridKind::legendre_gauss, 8, 16);
  const Tensor x = gs::randn({3, s.nlat, s.nlon}, {63, 1}, DType::f64);
  const std::string fft = gs_test::error_of([&] {
    gs::sphere::detail::rfft_lon_into(x, gs::empty({3, s.nlat, s.nlon}, DType::c128));  // mmax > nlon/2 + 1
  });
  CHECK(gs_test::contains(fft, "rfft_lon_into: expected contiguous CPU tensors (rows, nlon) real and (rows, mmax)"));
  CHECK(gs_test::contains(fft, "(3, 8, 16)"));
  CHECK(gs_test::contains(gs_test::error_of([&] {
                            gs::sphere::detail::irfft_lon_into(gs::empty({3, s.nlat, s.mmax}, DType::c64), x);
                          }),
                          "irfft_lon_into: expected"));  // mixed precisions
  const gs::sphere::LegendreTableKey key{s.grid, s.nlat, s.lmax, s.mmax, s.norm, s.csphase,
                                 gs::sphere::LegendreTableKind::analysis, DType::f64};
  const Tensor X = gs::randn({3, s.nlat, s.mmax}, {63, 2}, DType::c128);
  const std::string con = gs_test::error_of([&] {
    gs::sphere::legendre::contract_into(X, {key}, gs::sphere::legendre::Direction::to_degree,
                                        gs::empty({3, s.lmax + 1, s.mmax}, DType::c128));
  });
  CHECK(gs_test::contains(con, "contract_into: expected a contiguous c128 output of shape (3, 8, 8)"));
}
