// The sphere ops' composite paths, the code they run on CUDA until their kernels land (batched
// GEMMs for the Legendre and spectral contractions, tensor ops for the norms; ops/composite_path.h),
// run here on the CPU: each op's registry samples against its native CPU kernels, then gradcheck
// and gradgradcheck of the composite path itself. And the 3x3 stencil's CUDA index rules
// (ops/sphere/neighbours_math.h) against the CPU gather and scatter-add.
#include <doctest/doctest.h>

#include <algorithm>
#include <complex>
#include <string>
#include <vector>

#include "ops/composite_path.h"
#include "ops/ops.h"
#include "ops/sphere/legendre/path.h"
#include "ops/sphere/legendre/gemm.h"
#include "ops/sphere/neighbours_math.h"
#include "ops/sphere/sfno_blocks.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/sht_common.h"
#include "tests/ops/path_check.h"

namespace {

const gs::RandomKey kKey{4321, 7};

// While it lives: the composite paths on this thread's CPU, in the gemm form (whatever
// GS_DEVICE_SPHERE says; the kernels form has its own suite, test_sphere_device_kernels.cpp).
class GemmCompositePaths {
 public:
  GemmCompositePaths() : prev_(gs::sphere::set_device_sphere_form(gs::sphere::DeviceSphereForm::gemm)) {}
  ~GemmCompositePaths() { gs::sphere::set_device_sphere_form(prev_); }

 private:
  gs::sphere::DeviceSphereForm prev_;
  gs::CompositePathsOnCpu composite_;
};

// The ops that have a composite path (the rest of ops/sphere/ is built from other ops, or, for the
// 3x3 stencil, has CUDA kernels of its own).
const char* const kCompositeOps[] = {
    "legendre_analysis", "legendre_synthesis", "sht", "isht",
    "vector_legendre_analysis", "vector_legendre_synthesis", "vector_sht", "ivector_sht",
    "vorticity_divergence", "winds_from_vorticity_divergence", "spectral_gradient",
    "spectral_conv_dh", "spectral_conv_diagonal", "spectral_conv_adjoint", "spectral_conv_weight_grad",
    "layer_norm_channels", "instance_norm_sphere", "conditional_layer_norm",
};

}  // namespace

TEST_CASE("composite paths: every sphere op's composite path matches its CPU kernels and passes gradcheck") {
  for (const char* name : kCompositeOps) gs_test::check_samples_in_scope<GemmCompositePaths>(name, kKey, 1e-12);
}

TEST_CASE("composite paths: the GEMM Legendre contraction equals the table kernels in f32, on a larger grid") {
  const auto spec = gs::sphere::make_sht_spec(gs::sphere::GridKind::equiangular, 33, 64);
  const gs::Tensor f = gs::rand({3, 33, 64}, kKey, gs::DType::f32);
  const gs::Tensor a = gs::sphere::sht(f, spec);
  gs::Tensor a_comp, f_comp;
  {
    GemmCompositePaths composite;
    a_comp = gs::sphere::sht(f, spec);
    f_comp = gs::sphere::isht(a_comp, spec);
  }
  CHECK(gs_test::relative_difference(a, a_comp) < 1e-5);
  CHECK(gs_test::relative_difference(gs::sphere::isht(a, spec), f_comp) < 1e-5);
}

TEST_CASE("composite paths: the dense Legendre table is cached per table and device, and read-only") {
  const auto spec = gs::sphere::make_sht_spec(gs::sphere::GridKind::legendre_gauss, 5, 8);
  const auto tab = gs::sphere::legendre_table_cached(
      gs::sphere::detail::table_key(spec, gs::sphere::LegendreTableKind::synthesis, gs::DType::f64));
  const gs::Tensor d1 = gs::sphere::detail::dense_legendre_table(tab, gs::Device::cpu());
  const gs::Tensor d2 = gs::sphere::detail::dense_legendre_table(tab, gs::Device::cpu());
  CHECK(d1.raw_data() == d2.raw_data());
  CHECK(d1.sizes() == gs::Shape{spec.mmax, spec.lmax, spec.nlat});
  // Row l = m = 0 is Pbar_0^0 = 1 / sqrt(4 pi) at every latitude (ortho); l < m is zero.
  const auto v = d1.to_vector<double>();
  for (int64_t j = 0; j < spec.nlat; ++j) CHECK(v[static_cast<size_t>(j)] == doctest::Approx(0.28209479177387814));
  CHECK(v[static_cast<size_t>((1 * spec.lmax + 0) * spec.nlat)] == 0.0);
  gs::Tensor w = d1;
  CHECK_THROWS_WITH_AS(gs::fill_(w, 0.0), doctest::Contains("dense Legendre table"), gs::Error);
}

TEST_CASE("composite paths: the 3x3 stencil's CUDA index rules equal the CPU gather and scatter-add") {
  for (const auto& hw : std::vector<std::pair<int64_t, int64_t>>{{1, 2}, {2, 4}, {3, 6}, {5, 8}}) {
    const int64_t H = hw.first, W = hw.second;
    CAPTURE(H);
    CAPTURE(W);
    gs::Tensor x = gs::rand({2, 1, H, W}, kKey, gs::DType::f64);
    x.set_requires_grad();
    const gs::Tensor cols = gs::sphere::sphere_neighbours3x3(x);  // (2, 1, 3, 3, H, W)
    const auto xv = x.to_vector<double>(), cv = cols.to_vector<double>();
    for (int64_t p = 0; p < 2; ++p)
      for (int64_t t = 0; t < 9; ++t)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t w = 0; w < W; ++w) {
            const auto s = gs::sphere::neighbours::source(h, w, t / 3, t % 3, H, W, 3);
            CHECK(cv[static_cast<size_t>(((p * 9 + t) * H + h) * W + w)] == xv[static_cast<size_t>((p * H + s.row) * W + s.col)]);
          }
    // The scatter-add is the gather's backward.
    const gs::Tensor g = gs::rand(cols.sizes(), {kKey.seed, 99}, gs::DType::f64);
    cols.backward(g);
    const auto gx = x.grad().to_vector<double>(), gv = g.to_vector<double>();
    for (int64_t p = 0; p < 2; ++p)
      for (int64_t r = 0; r < H; ++r)
        for (int64_t c = 0; c < W; ++c)
          CHECK(gs::sphere::neighbours::scatter_point(gv.data() + p * 9 * H * W, r, c, H, W) ==
                doctest::Approx(gx[static_cast<size_t>((p * H + r) * W + c)]).epsilon(1e-14));
  }
}
