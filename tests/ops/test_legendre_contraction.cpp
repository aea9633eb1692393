// The Legendre contraction's owner (ops/sphere/legendre/contraction.h) and its one path rule
// (path.h): which path each input takes, that every path gives the same contraction for scalar
// and vector data, that the tape records one node per contraction with the opposite direction as
// its backward, and that clear_legendre_cache drops the whole family of caches.
#include <doctest/doctest.h>

#include <vector>

#include "engine/autograd/gradcheck.h"
#include "ops/composite_path.h"
#include "ops/ops.h"
#include "ops/sphere/legendre/contraction.h"
#include "ops/sphere/legendre/path.h"
#include "ops/sphere/sht.h"
#include "tests/test_util.h"

namespace {

using gs::DType;
using gs::Tensor;
using gs::sphere::ContractionPath;
using gs::sphere::LegendreTableKey;
using gs::sphere::LegendreTableKind;
namespace legendre = gs::sphere::legendre;

LegendreTableKey key_of(const gs::sphere::ShtSpec& s, LegendreTableKind kind, DType dtype, int64_t m_begin = 0,
                        int64_t m_end = -1) {
  return {s.grid, s.nlat, s.lmax, s.mmax, s.norm, s.csphase, kind, dtype, m_begin, m_end};
}

struct Settings {  // restores both path settings
  gs::sphere::LegendrePath path = gs::sphere::legendre_path();
  gs::sphere::DeviceSphereForm form = gs::sphere::device_sphere_form();
  ~Settings() {
    gs::sphere::set_legendre_path(path);
    gs::sphere::set_device_sphere_form(form);
  }
};

double max_abs_diff(const Tensor& a, const Tensor& b) {
  return gs::max(gs::abs(gs::sub(a, b))).item<double>();
}

}  // namespace

TEST_CASE("legendre path rule: composite inputs take the device form, CPU inputs the table or the recurrence") {
  Settings restore;
  const auto spec = gs::sphere::make_sht_spec(gs::sphere::GridKind::legendre_gauss, 32, 64);
  const LegendreTableKey full = key_of(spec, LegendreTableKind::analysis, DType::f64);
  const LegendreTableKey slice = key_of(spec, LegendreTableKind::analysis, DType::f64, 4, 12);
  const Tensor x = gs::zeros({2, 32, spec.mmax}, DType::c128);

  gs::sphere::set_legendre_path(gs::sphere::LegendrePath::recurrence);
  CHECK(gs::sphere::legendre_contraction_path(x, full, 2, false) == ContractionPath::cpu_recurrence);
  CHECK(gs::sphere::legendre_contraction_path(x, full, 2, true) == ContractionPath::cpu_table);   // vector: no recurrence
  CHECK(gs::sphere::legendre_contraction_path(x, slice, 2, false) == ContractionPath::cpu_table);  // a slice of the orders
  gs::sphere::set_legendre_path(gs::sphere::LegendrePath::table);
  CHECK(gs::sphere::legendre_contraction_path(x, full, 2, false) == ContractionPath::cpu_table);
  CHECK(gs::sphere::spectral_contraction_path(x) == ContractionPath::cpu_table);
  {
    gs::CompositePathsOnCpu composite;
    gs::sphere::set_device_sphere_form(gs::sphere::DeviceSphereForm::gemm);
    CHECK(gs::sphere::legendre_contraction_path(x, full, 2, false) == ContractionPath::device_gemm);
    CHECK(gs::sphere::spectral_contraction_path(x) == ContractionPath::device_gemm);
    gs::sphere::set_device_sphere_form(gs::sphere::DeviceSphereForm::kernels);
    CHECK(gs::sphere::legendre_contraction_path(x, full, 2, true) == ContractionPath::device_kernels);
    CHECK(gs::sphere::spectral_contraction_path(x) == ContractionPath::device_kernels);
  }
  // The measured rule: one field of a large f64 table goes on the fly, a large batch streams the table.
  gs::sphere::set_legendre_path(gs::sphere::LegendrePath::automatic);
  const auto big = gs::sphere::make_sht_spec(gs::sphere::GridKind::legendre_gauss, 360, 720);
  const LegendreTableKey big_key = key_of(big, LegendreTableKind::synthesis, DType::f64);
  CHECK(gs::sphere::use_recurrence(big_key, 1));
  CHECK_FALSE(gs::sphere::use_recurrence(big_key, 4096));
  CHECK_FALSE(gs::sphere::use_recurrence(key_of(spec, LegendreTableKind::synthesis, DType::f64), 1));
  CHECK(std::string(gs::sphere::contraction_path_name(ContractionPath::device_kernels)) == "device_kernels");
}

TEST_CASE("legendre contraction: every path gives the same values for scalar and vector data, both directions") {
  Settings restore;
  const auto spec = gs::sphere::make_sht_spec(gs::sphere::GridKind::equiangular, 17, 32);
  for (const auto components : {legendre::Components::scalar, legendre::Components::vector}) {
    const bool vec = components == legendre::Components::vector;
    for (const auto dir : {legendre::Direction::to_degree, legendre::Direction::to_latitude}) {
      const bool to_degree = dir == legendre::Direction::to_degree;
      const LegendreTableKey key = key_of(spec, to_degree ? LegendreTableKind::analysis : LegendreTableKind::synthesis,
                                          DType::f64);
      gs::Shape shape{3};
      if (vec) shape.push_back(2);
      shape.push_back(to_degree ? spec.nlat : spec.lmax);
      shape.push_back(spec.mmax);
      const Tensor x = gs::randn(shape, {77, vec ? 1u : 2u}, DType::c128);
      const legendre::TableRef ref{key, components};
      CAPTURE(vec);
      CAPTURE(to_degree);
      gs::sphere::set_legendre_path(gs::sphere::LegendrePath::table);
      const Tensor table = legendre::contract(x, ref, dir);
      gs::sphere::set_legendre_path(gs::sphere::LegendrePath::recurrence);  // scalar only: vector stays on the table
      const Tensor fly = legendre::contract(x, ref, dir);
      gs::CompositePathsOnCpu composite;
      gs::sphere::set_device_sphere_form(gs::sphere::DeviceSphereForm::gemm);
      const Tensor gemm = legendre::contract(x, ref, dir);
      gs::sphere::set_device_sphere_form(gs::sphere::DeviceSphereForm::kernels);
      const Tensor blocked = legendre::contract(x, ref, dir);
      const double scale = gs::max(gs::abs(table)).item<double>();
      REQUIRE(scale > 0);
      CHECK(max_abs_diff(table, fly) <= 1e-13 * scale);
      CHECK(max_abs_diff(table, gemm) <= 1e-13 * scale);
      CHECK(max_abs_diff(table, blocked) <= 1e-13 * scale);
    }
  }
}

TEST_CASE("legendre contraction: one node per call, named for data and direction, the adjoint as backward") {
  const auto spec = gs::sphere::make_sht_spec(gs::sphere::GridKind::legendre_gauss, 6, 12);
  const LegendreTableKey key = key_of(spec, LegendreTableKind::analysis, DType::f64);
  Tensor x = gs::randn({2, 6, spec.mmax}, {5, 1}, DType::c128);
  x.set_requires_grad(true);
  const Tensor a = legendre::contract(x, {key, legendre::Components::scalar}, legendre::Direction::to_degree);
  REQUIRE(a.grad_fn());
  CHECK(a.grad_fn()->name() == "legendre_analysis");
  Tensor v = gs::randn({2, 2, 6, spec.mmax}, {5, 2}, DType::c128);
  v.set_requires_grad(true);
  const Tensor s = legendre::contract(v, {key, legendre::Components::vector}, legendre::Direction::to_degree);
  CHECK(s.grad_fn()->name() == "vector_legendre_analysis");
  // First and second derivatives through the adjoint pairing.
  for (const auto components : {legendre::Components::scalar, legendre::Components::vector}) {
    const Tensor leaf = components == legendre::Components::scalar ? x : v;
    const auto f = [&](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{legendre::contract(in[0], {key, components}, legendre::Direction::to_degree)};
    };
    CHECK(gs::gradcheck(f, {leaf}).ok);
    CHECK(gs::gradgradcheck(f, {leaf}).ok);
  }
}

TEST_CASE("clear_legendre_cache drops every cache of the family and a later call builds afresh") {
  Settings restore;
  const auto spec = gs::sphere::make_sht_spec(gs::sphere::GridKind::lobatto, 13, 24);
  const LegendreTableKey key = key_of(spec, LegendreTableKind::synthesis, DType::f32);
  const Tensor x = gs::randn({2, spec.lmax, spec.mmax}, {9, 1}, DType::c64);
  const Tensor v = gs::randn({2, 2, spec.lmax, spec.mmax}, {9, 2}, DType::c64);
  gs::sphere::set_legendre_path(gs::sphere::LegendrePath::recurrence);
  legendre::contract(x, {key, legendre::Components::scalar}, legendre::Direction::to_latitude);  // a plan
  gs::sphere::set_legendre_path(gs::sphere::LegendrePath::table);
  const Tensor before = legendre::contract(x, {key, legendre::Components::scalar}, legendre::Direction::to_latitude);
  legendre::contract(v, {key, legendre::Components::vector}, legendre::Direction::to_latitude);  // D and M tables
  {
    gs::CompositePathsOnCpu composite;  // the dense copies of the GEMM form
    legendre::contract(x, {key, legendre::Components::scalar}, legendre::Direction::to_latitude);
  }
  const size_t expected = legendre::table_bytes({key, legendre::Components::scalar}) +
                          legendre::table_bytes({key, legendre::Components::vector});
  const size_t dropped = gs::sphere::clear_legendre_cache();
  CHECK(dropped > expected);  // the tables plus the plan and the dense copies
  CHECK(gs::sphere::legendre_cache_stats().tables == 0);
  CHECK(gs::sphere::clear_legendre_cache() == 0);
  const int64_t builds = gs::sphere::legendre_cache_stats().builds;
  const Tensor after = legendre::contract(x, {key, legendre::Components::scalar}, legendre::Direction::to_latitude);
  CHECK(gs::sphere::legendre_cache_stats().builds == builds + 1);
  CHECK(max_abs_diff(before, after) == 0.0);
}
