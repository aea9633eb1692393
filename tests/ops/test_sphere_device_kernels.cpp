// The sphere ops' hand-written device kernels (DeviceSphereForm::kernels, ops/sphere/legendre/path.h):
// the arithmetic the CUDA kernels run (legendre/blocked_math.h, spectral_conv_math.h), here run by
// the CPU loops, against the native CPU kernels. The Legendre contractions on grids of both
// parities of nlat, both table parities (the vector SHT's dPbar/dtheta tables are odd), a block of
// the orders, f64 and f32; then every SHT and spectral-convolution op's registry samples through
// the kernels with gradcheck. On a GPU, the transforms' comparisons again on CUDA.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <complex>
#include <string>
#include <vector>

#include "engine/cuda_runtime.h"
#include "ops/composite_path.h"
#include "ops/ops.h"
#include "ops/sphere/legendre/path.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/spectral_conv.h"
#include "ops/sphere/vector_sht.h"
#include "tests/ops/path_check.h"

namespace {

using gs::sphere::DeviceSphereForm;
using gs::sphere::GridKind;

const gs::RandomKey kKey{9876, 3};

// While it lives: the composite paths on this thread's CPU, in the kernels form (process-wide).
class KernelsForm {
 public:
  KernelsForm() : prev_(gs::sphere::set_device_sphere_form(DeviceSphereForm::kernels)) {}
  ~KernelsForm() { gs::sphere::set_device_sphere_form(prev_); }

 private:
  DeviceSphereForm prev_;
  gs::CompositePathsOnCpu composite_;
};

gs::Tensor randn_complex(const gs::Shape& sizes, uint64_t stream, gs::DType real) {
  return gs::complex(gs::randn(sizes, {kKey.seed, stream}, real), gs::randn(sizes, {kKey.seed, stream + 100}, real));
}

struct Grid {
  GridKind kind;
  int64_t nlat, nlon;
};
// Even and odd nlat (an odd one has an equator row without a mirror), each grid family, and a
// truncation below the grid's (orders past mmax, degrees below lmax).
const Grid kGrids[] = {{GridKind::legendre_gauss, 16, 32}, {GridKind::equiangular, 17, 32},
                       {GridKind::equiangular, 33, 64}, {GridKind::lobatto, 13, 24}};

double tolerance(gs::DType dt) { return dt == gs::DType::f64 ? 1e-12 : 3e-6; }

// `run` on the CPU natively and on `device` in the kernels form; returns the relative difference.
template <typename F>
double kernels_against_native(const gs::Tensor& input, gs::Device device, F&& run) {
  const gs::Tensor native = run(input);
  gs::Tensor kernels;
  {
    KernelsForm form;
    kernels = run(gs::to(input, device));
  }
  CHECK(kernels.device() == device);
  return gs_test::relative_difference(native, kernels);
}

void check_transforms(gs::Device device) {
  for (const Grid& g : kGrids) {
    for (gs::DType dt : {gs::DType::f64, gs::DType::f32}) {
      for (bool truncated : {false, true}) {
        const auto full = gs::sphere::make_sht_spec(g.kind, g.nlat, g.nlon);
        const int64_t lmax = full.lmax - 3, mmax = std::min(full.mmax, lmax) - 2;
        const auto spec = truncated ? gs::sphere::make_sht_spec(g.kind, g.nlat, g.nlon, lmax, mmax) : full;
        INFO(spec.str() << ", " << gs::dtype_name(dt));
        const gs::Tensor f = gs::randn({3, g.nlat, g.nlon}, kKey, dt);
        CHECK(kernels_against_native(f, device, [&](const gs::Tensor& x) { return gs::sphere::sht(x, spec); }) <
              tolerance(dt));
        const gs::Tensor a = gs::sphere::sht(f, spec);
        CHECK(kernels_against_native(a, device, [&](const gs::Tensor& x) { return gs::sphere::isht(x, spec); }) <
              tolerance(dt));
        // The vector transforms: their tables are dPbar/dtheta (odd about the equator) and m Pbar / sin.
        const gs::Tensor uv = gs::randn({2, 2, g.nlat, g.nlon}, {kKey.seed, 11}, dt);
        CHECK(kernels_against_native(uv, device, [&](const gs::Tensor& x) { return gs::sphere::vector_sht(x, spec); }) <
              tolerance(dt));
        const gs::Tensor c = gs::sphere::vector_sht(uv, spec);
        CHECK(kernels_against_native(c, device, [&](const gs::Tensor& x) { return gs::sphere::ivector_sht(x, spec); }) <
              tolerance(dt));
        // A block of the orders from m0 = 3 (a sliced table: m_begin != 0), its last block of lanes partial.
        const int64_t m0 = 3, count = std::min<int64_t>(6, spec.mmax - m0);
        const gs::Tensor X = randn_complex({2, g.nlat, count}, 12, dt);
        CHECK(kernels_against_native(X, device, [&](const gs::Tensor& x) {
                return gs::sphere::legendre_analysis_orders(x, spec, m0);
              }) < tolerance(dt));
        const gs::Tensor A = randn_complex({2, spec.lmax, count}, 13, dt);
        CHECK(kernels_against_native(A, device, [&](const gs::Tensor& x) {
                return gs::sphere::legendre_synthesis_orders(x, spec, m0);
              }) < tolerance(dt));
      }
    }
  }
}

// The three spectral contractions, both operators, f64 and f32, in the kernels form on `device`.
void check_spectral(gs::Device device) {
  using gs::sphere::SpectralOperator;
  const int64_t B = 3, I = 5, O = 4, L = 9, M = 7;
  for (gs::DType dt : {gs::DType::f64, gs::DType::f32}) {
    for (SpectralOperator op : {SpectralOperator::driscoll_healy, SpectralOperator::diagonal}) {
      const bool dh = op == SpectralOperator::driscoll_healy;
      INFO((dh ? "driscoll-healy" : "diagonal") << ", " << gs::dtype_name(dt));
      const gs::Tensor x = randn_complex({B, I, L, M}, 21, dt), g = randn_complex({B, O, L, M}, 22, dt);
      const gs::Tensor w = dh ? randn_complex({I, O, L}, 23, dt) : randn_complex({I, O, L, M}, 23, dt);
      const gs::Tensor wd = gs::to(w, device);
      CHECK(kernels_against_native(x, device, [&](const gs::Tensor& t) {
              return gs::sphere::spectral_conv(t, t.device() == w.device() ? w : wd, op);
            }) < tolerance(dt));
      CHECK(kernels_against_native(g, device, [&](const gs::Tensor& t) {
              return gs::sphere::spectral_conv_adjoint(t, t.device() == w.device() ? w : wd, op);
            }) < tolerance(dt));
      const gs::Tensor gd = gs::to(g, device);
      CHECK(kernels_against_native(x, device, [&](const gs::Tensor& t) {
              return gs::sphere::spectral_conv_weight_grad(t, t.device() == g.device() ? g : gd, op);
            }) < tolerance(dt));
    }
  }
}

}  // namespace

TEST_CASE("device kernels: the spectral contractions' arithmetic equals the native kernels (CPU loops)") {
  check_spectral(gs::Device::cpu());
}

TEST_CASE("device kernels: the blocked-table Legendre arithmetic equals the native table kernels (CPU loops)") {
  check_transforms(gs::Device::cpu());
}

TEST_CASE("device kernels: every SHT and spectral-conv op's samples match the native kernels and pass gradcheck") {
  const char* const ops[] = {"legendre_analysis", "legendre_synthesis", "sht", "isht", "vector_legendre_analysis",
                             "vector_legendre_synthesis", "vector_sht", "ivector_sht", "vorticity_divergence",
                             "winds_from_vorticity_divergence", "spectral_gradient", "spectral_conv_dh",
                             "spectral_conv_diagonal", "spectral_conv_adjoint", "spectral_conv_weight_grad"};
  for (const char* name : ops) gs_test::check_samples_in_scope<KernelsForm>(name, kKey, 1e-12);
}

TEST_CASE("device kernels: the form is process-wide and gemm is the default") {
  if (std::getenv("GS_DEVICE_SPHERE") != nullptr) {
    MESSAGE("default not checked: GS_DEVICE_SPHERE is set");
    return;
  }
  CHECK(gs::sphere::device_sphere_form() == DeviceSphereForm::gemm);
  const auto prev = gs::sphere::set_device_sphere_form(DeviceSphereForm::kernels);
  CHECK(prev == DeviceSphereForm::gemm);
  CHECK(gs::sphere::device_sphere_form() == DeviceSphereForm::kernels);
  CHECK(std::string(gs::sphere::device_sphere_form_name(gs::sphere::device_sphere_form())) == "kernels");
  CHECK(gs::sphere::set_device_sphere_form(prev) == DeviceSphereForm::kernels);
  CHECK(gs::sphere::device_sphere_form() == DeviceSphereForm::gemm);
}

TEST_CASE("device kernels: on CUDA, the transforms equal the native CPU kernels") {
  if (gs::cuda::device_count() == 0) {
    MESSAGE("CUDA case skipped: no usable CUDA device (" << gs::cuda::unavailable_reason() << ")");
    return;
  }
  check_transforms(gs::Device::cuda(0));
  check_spectral(gs::Device::cuda(0));
}
