// The distributed sphere ops against the one-process ops: every rank builds the whole input from
// the same key, runs the one-process op on it, and compares its own block with the distributed
// result. The transforms are data movement around the one-process kernels on full rows and
// columns, so they agree exactly (value for value); the statistics to rounding.
#include <doctest/doctest.h>

#include "distributed/sphere_blocks.h"
#include "distributed/sphere_transforms.h"
#include "engine/factory.h"
#include "ops/ops.h"
#include "ops/sphere/sfno_blocks.h"
#include "ops/sphere/vector_sht.h"
#include "tests/distributed/dist_test_util.h"
#include "tests/tensor_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::dist;
using sphere::GridKind;
using sphere::ShtSpec;

namespace {

// This rank's block of the last two dims of a whole tensor.
Tensor tile_of(const Tensor& whole, Block rows, Block cols) {
  return contiguous(narrow(narrow(whole, -2, rows.start, rows.count), -1, cols.start, cols.count));
}
Tensor field_tile(const Tensor& whole, const ProcessGrid& g) {
  return tile_of(whole, g.local_lat(whole.size(-2)), g.local_lon(whole.size(-1)));
}
Tensor coeff_block(const Tensor& whole, const ProcessGrid& g) {
  return tile_of(whole, local_degrees(g, whole.size(-2)), local_orders(g, whole.size(-1)));
}

std::vector<ShtSpec> specs() {
  return {sphere::make_sht_spec(GridKind::legendre_gauss, 17, 32, 17, 17),
          sphere::make_sht_spec(GridKind::equiangular, 9, 18, 5, 5),
          sphere::make_sht_spec(GridKind::equiangular, 9, 17, 5, 5),  // odd nlon
          sphere::make_sht_spec(GridKind::lobatto, 11, 20, 9, 9)};
}

}  // namespace

TEST_CASE("distributed sht: equal to one process value for value, every grid, scalar and vector, f32 and f64") {
  gs::test::for_each_grid([](const ProcessGrid& g) {
    for (const ShtSpec& spec : specs())
      for (DType dt : {DType::f64, DType::f32}) {
        CAPTURE(spec.str());
        CAPTURE(dtype_name(dt));
        // 2 x 1 fields: fewer fields than some groups.
        const Tensor x = randn({2, 1, spec.nlat, spec.nlon}, RandomKey{5, 1}, dt);
        const Tensor a = sht(field_tile(x, g), spec, g);
        CHECK(gs_test::exactly_equal(a, coeff_block(sphere::sht(x, spec), g)));
        const Tensor c = randn({1, 3, spec.lmax, spec.mmax}, RandomKey{5, 2}, complex_dtype(dt));
        CHECK(gs_test::exactly_equal(isht(coeff_block(c, g), spec, g), field_tile(sphere::isht(c, spec), g)));
        const Tensor uv = randn({2, 2, spec.nlat, spec.nlon}, RandomKey{5, 3}, dt);
        CHECK(gs_test::exactly_equal(vector_sht(field_tile(uv, g), spec, g), coeff_block(sphere::vector_sht(uv, spec), g)));
        const Tensor vc = randn({2, spec.lmax, spec.mmax}, RandomKey{5, 4}, complex_dtype(dt));
        CHECK(gs_test::exactly_equal(ivector_sht(coeff_block(vc, g), spec, g), field_tile(sphere::ivector_sht(vc, spec), g)));
      }
  });
}

TEST_CASE("distributed sht: gradients equal one process value for value") {
  gs::test::for_each_grid([](const ProcessGrid& g) {
    const ShtSpec spec = sphere::make_sht_spec(GridKind::legendre_gauss, 9, 16, 9, 9);
    const Tensor x = randn({1, 2, spec.nlat, spec.nlon}, RandomKey{6, 1}, DType::f64);
    const Tensor gy = randn({1, 2, spec.lmax, spec.mmax}, RandomKey{6, 2}, DType::c128);
    Tensor xw = clone(x);
    xw.set_requires_grad();
    backward(std::vector<Tensor>{sphere::sht(xw, spec)}, std::vector<Tensor>{gy});
    Tensor xt = field_tile(x, g);
    xt.set_requires_grad();
    backward(std::vector<Tensor>{sht(xt, spec, g)}, std::vector<Tensor>{coeff_block(gy, g)});
    CHECK(gs_test::exactly_equal(xt.grad(), field_tile(xw.grad(), g)));
  });
}

TEST_CASE("distributed sht: each rank holds only its orders' slice of the tables") {
  gs::test::for_each_grid([](const ProcessGrid& g) {
    const ShtSpec spec = sphere::make_sht_spec(GridKind::legendre_gauss, 32, 64, 32, 32);
    for (bool vector : {false, true}) {
      const size_t full = vector ? sphere::vector_sht_table_bytes(spec, DType::f64, true)
                                 : sphere::sht_table_bytes(spec, DType::f64, true);
      const size_t mine = sht_table_bytes(spec, DType::f64, true, vector, g);
      if (g.w_size() == 1) CHECK(mine == full);
      else CHECK(mine < full);
      // Summed over one row of the w group, the slices hold the whole table (plus padding per slice).
      Tensor total = from_vector(std::vector<double>{static_cast<double>(mine)});
      g.comm(Group::w)->all_reduce(total, ReduceOp::sum);
      CHECK(total.item<double>() >= static_cast<double>(full) - 1e-9);
      CHECK(total.item<double>() <= static_cast<double>(full) * 1.25 + 1024);
    }
  });
}

TEST_CASE("distributed sphere blocks: norms, the 3x3 convolution and the losses equal one process") {
  gs::test::for_each_grid([](const ProcessGrid& g) {
    const int64_t nlat = 9, nlon = 18;
    const Tensor x = randn({2, 3, nlat, nlon}, RandomKey{7, 1}, DType::f64);
    const Tensor w = randn({3}, RandomKey{7, 2}, DType::f64), b = randn({3}, RandomKey{7, 3}, DType::f64);
    const Tensor q = from_vector(sphere::make_quadrature(GridKind::equiangular, nlat).weights);
    for (const Tensor& quad : {Tensor(), q}) {
      const Tensor ref = sphere::instance_norm_sphere(x, w, b, 1e-5, quad);
      CHECK(gs_test::max_abs_diff(instance_norm(field_tile(x, g), w, b, 1e-5, quad, nlat, nlon, g), field_tile(ref, g)) <
            1e-13);
    }
    const Tensor cw = randn({4, 3, 3, 3}, RandomKey{7, 4}, DType::f64), cb = randn({4}, RandomKey{7, 5}, DType::f64);
    CHECK(gs_test::max_abs_diff(local_conv3x3(field_tile(x, g), cw, cb, nlat, nlon, g),
                                field_tile(sphere::local_conv3x3(x, cw, cb), g)) < 1e-13);
    const std::vector<double> aw = sphere::make_quadrature(GridKind::equiangular, nlat).weights;
    const Tensor t = randn({2, 3, nlat, nlon}, RandomKey{7, 6}, DType::f64);
    const double mse = area_weighted_mse(field_tile(x, g), field_tile(t, g), aw, nlon, g).item<double>();
    CHECK(mse == doctest::Approx(sphere::area_weighted_mse(x, t, aw).item<double>()).epsilon(1e-13));
    CHECK(gs_test::max_abs_diff(area_weighted_mean(field_tile(x, g), aw, nlon, g), sphere::area_weighted_mean(x, aw)) <
          1e-14);
    // Random tiles: the one-process field cut to this rank's tile, bitwise.
    CHECK(gs_test::exactly_equal(randn_tile({2, 3}, nlat, nlon, RandomKey{8, 1}, DType::f32, g),
                                 field_tile(randn({2, 3, nlat, nlon}, RandomKey{8, 1}, DType::f32), g)));
    CHECK(gs_test::exactly_equal(randn_coeff_block({2}, 5, 4, RandomKey{8, 2}, DType::f64, g),
                                 coeff_block(randn({2, 5, 4}, RandomKey{8, 2}, DType::f64), g)));
  });
}

TEST_CASE("distributed sht: a tile of the wrong shape is refused with the expected shape") {
  gs::test::for_each_grid([](const ProcessGrid& g) {
    const ShtSpec spec = sphere::make_sht_spec(GridKind::legendre_gauss, 9, 16, 9, 9);
    const Tensor wrong = zeros({1, spec.nlat + 1, spec.nlon}, DType::f64);
    CHECK(gs_test::contains(gs_test::error_of([&] { sht(wrong, spec, g); }), "expected a field of this rank's tile"));
  });
}
