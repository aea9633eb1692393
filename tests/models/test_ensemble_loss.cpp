// The ensemble losses (models/ensemble_loss.h) and ensemble training in the stepper: CRPS against
// plain-loop formulas written differently (sorted members; the integral of the squared CDF
// difference), the energy kernel on complex values, gradients by finite differences, the members'
// noise keys, micro-batch and mask invariance, and the refusals of bad settings.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <memory>
#include <vector>

#include "engine/autograd/gradcheck.h"
#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "models/ensemble_loss.h"
#include "models/stepper.h"
#include "ops/ops.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/sfno_blocks.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::models;
using gs_test::contains;
using gs_test::error_of;

namespace {

std::vector<Tensor> random_members(int64_t K, const Shape& shape, uint64_t stream) {
  std::vector<Tensor> out;
  for (int64_t k = 0; k < K; ++k) out.push_back(randn(shape, {41, stream + static_cast<uint64_t>(k)}, DType::f64));
  return out;
}

// Fair CRPS from the sorted members: sum_{i<j} |x_i - x_j| = sum_k (2k - K - 1) x_(k), k = 1..K.
double crps_sorted(std::vector<double> x, double y, double alpha) {
  const double K = static_cast<double>(x.size());
  double target = 0;
  for (double v : x) target += std::abs(v - y) / K;
  std::sort(x.begin(), x.end());
  double pairs = 0;
  for (size_t k = 0; k < x.size(); ++k) pairs += (2.0 * static_cast<double>(k + 1) - K - 1.0) * x[k];
  const double eps = (1 - alpha) / 2;
  return K == 1 ? target : target - (1 - eps) / 2 * pairs / (K * (K - 1) / 2);
}

// The standard CRPS as its definition: the integral of (F(z) - 1[z >= y])^2, F the members'
// empirical CDF, exactly (piecewise constant between the sorted points).
double crps_integral(const std::vector<double>& x, double y) {
  std::vector<double> pts(x);
  pts.push_back(y);
  std::sort(pts.begin(), pts.end());
  double total = 0;
  for (size_t i = 0; i + 1 < pts.size(); ++i) {
    const double mid = (pts[i] + pts[i + 1]) / 2;
    double F = 0;
    for (double v : x) F += v <= mid ? 1.0 / static_cast<double>(x.size()) : 0.0;
    const double H = mid >= y ? 1.0 : 0.0;
    total += (F - H) * (F - H) * (pts[i + 1] - pts[i]);
  }
  return total;
}

}  // namespace

TEST_CASE("crps_field: the fair and almost-fair CRPS equal the sorted-member formula at every point") {
  const Shape shape{2, 3, 4, 5};
  for (int64_t K : {1, 2, 3, 5}) {
    for (double alpha : {1.0, 0.95, 0.0}) {
      CAPTURE(K);
      CAPTURE(alpha);
      const auto x = random_members(K, shape, 10 * static_cast<uint64_t>(K));
      const Tensor y = randn(shape, {42, 1}, DType::f64);
      const std::vector<double> got = crps_field(x, y, alpha).to_vector<double>();
      const std::vector<double> yv = y.to_vector<double>();
      std::vector<std::vector<double>> xv;
      for (const Tensor& m : x) xv.push_back(m.to_vector<double>());
      for (size_t i = 0; i < got.size(); ++i) {
        std::vector<double> members;
        for (const auto& m : xv) members.push_back(m[i]);
        CHECK(got[i] == doctest::Approx(crps_sorted(members, yv[i], alpha)).epsilon(1e-13));
      }
    }
  }
}

TEST_CASE("crps_field: alpha 0 with two members is the CRPS of the members' empirical distribution") {
  const Shape shape{40};
  const auto x = random_members(2, shape, 70);
  const Tensor y = randn(shape, {43, 1}, DType::f64);
  const auto got = crps_field(x, y, 0.0).to_vector<double>();
  const auto a = x[0].to_vector<double>(), b = x[1].to_vector<double>(), yv = y.to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(crps_integral({a[i], b[i]}, yv[i])).epsilon(1e-12));
  // One member: the absolute error.
  const auto mae = crps_field({x[0]}, y, 1.0).to_vector<double>();
  for (size_t i = 0; i < mae.size(); ++i) CHECK(mae[i] == std::abs(a[i] - yv[i]));
}

TEST_CASE("energy_kernel: fme's two-member form on complex coefficients, and the fair pair mean for more") {
  using c = std::complex<double>;
  const Tensor x0 = from_vector(std::vector<c>{{1, 2}, {0, 0}}), x1 = from_vector(std::vector<c>{{-1, 0}, {3, 4}});
  const Tensor x2 = from_vector(std::vector<c>{{0, 1}, {1, 0}}), y = from_vector(std::vector<c>{{0, 0}, {0, 0}});
  const auto two = energy_kernel({x0, x1}, y).to_vector<double>();
  // (|x0 - y| + |x1 - y|) / 2 - |x0 - x1| / 2
  CHECK(two[0] == doctest::Approx((std::sqrt(5.0) + 1.0) / 2 - std::sqrt(8.0) / 2).epsilon(1e-15));
  CHECK(two[1] == doctest::Approx((0.0 + 5.0) / 2 - 5.0 / 2).epsilon(1e-15));
  const auto three = energy_kernel({x0, x1, x2}, y).to_vector<double>();
  const double target = (std::sqrt(5.0) + 1.0 + 1.0) / 3;
  const double pairs = (std::sqrt(8.0) + std::abs(c{1, 2} - c{0, 1}) + std::abs(c{-1, 0} - c{0, 1})) / 3;
  CHECK(three[0] == doctest::Approx(target - pairs / 2).epsilon(1e-15));
}

TEST_CASE("ensemble losses: gradients by finite differences (CRPS, energy score, the stepper's mixed loss)") {
  const int64_t nlat = 6, nlon = 12;
  const std::vector<double> aw = sphere::area_weights_coslat(sphere::GridKind::legendre_gauss, nlat);
  auto members = random_members(3, {2, 2, nlat, nlon}, 90);
  for (auto& m : members) m.set_requires_grad();
  const Tensor y = randn({2, 2, nlat, nlon}, {44, 1}, DType::f64);
  auto crps = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{sum(crps_field(in, y, 0.9))}; };
  auto es = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sum(energy_score(in, y, sphere::GridKind::legendre_gauss, nlat, nlon, {}))};
  };
  const Tensor awt = from_vector(aw);
  StepLossSpec spec{aw, 0, from_vector(std::vector<double>{2.0, 0.5})};
  const LossTerms terms{.mse = 0.5, .crps = 1, .energy_score = 0.3, .crps_alpha = 1.0};
  auto mixed = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{ensemble_step_loss(in, y, terms, spec, awt, {})};
  };
  for (auto [name, f] : {std::pair<const char*, DifferentiableFn>{"crps", crps}, {"energy score", es}, {"mixed", mixed}}) {
    CAPTURE(name);
    const GradcheckReport r = gradcheck(f, members);
    CHECK_MESSAGE(r.ok, r.failure);
  }
}

TEST_CASE("ensemble losses: the mixed loss is the weighted sum of its terms; one member of the MSE is step_loss") {
  const int64_t nlat = 4, nlon = 8;
  const std::vector<double> aw = sphere::area_weights_coslat(sphere::GridKind::equiangular, nlat);
  const Tensor awt = from_vector(aw);
  const auto x = random_members(2, {3, 2, nlat, nlon}, 120);
  const Tensor y = randn({3, 2, nlat, nlon}, {45, 1}, DType::f64);
  const StepLossSpec spec{aw, 0, {}};
  const double mse = ensemble_step_loss({x[0]}, y, LossTerms{}, spec, awt, {}).item<double>();
  CHECK(mse == step_loss(x[0], y, spec, awt, {}).item<double>());
  const double mse2 = (step_loss(x[0], y, spec, awt, {}).item<double>() + step_loss(x[1], y, spec, awt, {}).item<double>()) / 2;
  const double crps = mean(sphere::area_weighted_mean(crps_field(x, y, 1.0), aw)).item<double>();
  const double es = mean(energy_score(x, y, sphere::GridKind::equiangular, nlat, nlon, {})).item<double>();
  const LossTerms terms{.mse = 0.25, .crps = 2, .energy_score = 0.5, .grid = sphere::GridKind::equiangular};
  CHECK(ensemble_step_loss(x, y, terms, spec, awt, {}).item<double>() ==
        doctest::Approx(0.25 * mse2 + 2 * crps + 0.5 * es).epsilon(1e-14));
  // Identical members and target: every term is 0.
  CHECK(ensemble_step_loss({y, y}, y, terms, spec, awt, {}).item<double>() == 0.0);
}

TEST_CASE("LossTerms: bad settings are refused with what was expected") {
  CHECK(contains(error_of([] { LossTerms{.mse = 0, .crps = 1}.check(1); }), "at least 2 members"));
  CHECK(contains(error_of([] { LossTerms{.mse = 0, .crps = 1}.check(1); }), "got ensemble_members 1"));
  CHECK(contains(error_of([] { LossTerms{.mse = 0, .energy_score = 1}.check(1); }), "energy_score needs"));
  CHECK(contains(error_of([] { LossTerms{}.check(0); }), "expected ensemble_members >= 1, got 0"));
  CHECK(contains(error_of([] { LossTerms{.mse = 0}.check(2); }), "got every weight 0"));
  CHECK(contains(error_of([] { LossTerms{.mse = -1}.check(1); }), "finite weight >= 0 for mse, got -1"));
  CHECK(contains(error_of([] { LossTerms{.crps = 1, .crps_alpha = 1.5}.check(2); }), "crps_alpha in [0, 1]"));
  CHECK_NOTHROW(LossTerms{.mse = 0, .crps = 1}.check(2));
  CHECK_NOTHROW(LossTerms{}.check(1));
  CHECK(LossTerms{.mse = 0.5, .crps = 1, .crps_alpha = 0.95}.str() == "mse 0.5 + crps 1 (alpha 0.95)");
}
