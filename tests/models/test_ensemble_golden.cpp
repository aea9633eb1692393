// The ensemble losses against fme's own code (tools/make_golden_ensemble.py: fme's get_crps and
// EnergyScoreLoss with torch-harmonics 0.8.0, f64): values and gradients to 1e-12.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/autograd/engine.h"
#include "engine/factory.h"
#include "models/ensemble_loss.h"
#include "ops/ops.h"
#include "ops/sphere/sht.h"
#include "tests/golden_util.h"

using namespace gs;
using namespace gs::models;

namespace {

const auto& golden() {
  static const auto g = gs_test::load_golden("tests/models/data/golden_ensemble_loss.safetensors").tensors;
  return g;
}

// fme's (B, K, C, H, W) members -> K tensors (B, C, H, W) of a leaf that requires grad.
std::pair<Tensor, std::vector<Tensor>> members_of(const Tensor& gen_values) {
  Tensor gen = clone(gen_values);
  gen.set_requires_grad();
  std::vector<Tensor> out;
  for (int64_t k = 0; k < gen.size(1); ++k) out.push_back(select(gen, 1, k));
  return {gen, out};
}

}  // namespace

TEST_CASE("ensemble golden: the CRPS per point and its gradient equal fme's get_crps (K = 2, 3, 5; alpha 1, 0.9)") {
  for (const std::string K : {"2", "3", "5"})
    for (const std::string a : {"1", "0.9"}) {
      const std::string pre = "crps.K" + K + ".a" + a + ".";
      CAPTURE(pre);
      auto [gen, members] = members_of(golden().at(pre + "gen"));
      const Tensor target = select(golden().at(pre + "target"), 1, 0);
      const Tensor value = crps_field(members, target, std::stod(a));
      CHECK(gs_test::relative_error(value, golden().at(pre + "value")) <= 1e-12);
      const Tensor loss = sum(mul(value, golden().at(pre + "weight")));
      CHECK(std::abs(loss.item<double>() - golden().at(pre + "loss").item<double>()) <=
            1e-12 * std::abs(golden().at(pre + "loss").item<double>()));
      CHECK(gs_test::relative_error(grad({loss}, {gen})[0], golden().at(pre + "grad")) <= 1e-12);
    }
}

TEST_CASE("ensemble golden: the energy score per mode, its loss and gradient equal fme's EnergyScoreLoss") {
  auto [gen, members] = members_of(golden().at("energy.gen"));
  const Tensor target = select(golden().at("energy.target"), 1, 0);
  const int64_t H = target.size(2), W = target.size(3);
  const Tensor loss = mean(energy_score(members, target, sphere::GridKind::legendre_gauss, H, W, {}));
  const double want = golden().at("energy.loss").item<double>();
  CHECK(std::abs(loss.item<double>() - want) <= 1e-12 * std::abs(want));
  CHECK(gs_test::relative_error(grad({loss}, {gen})[0], golden().at("energy.grad")) <= 1e-12);
  // Per mode: fme's (B, C, L, nlon/2 + 1) pre-weighted tensor is the weighted kernel times
  // L (nlon/2 + 1) / (2 sqrt(L (nlon/2 + 1))); its orders m >= L are 0 (no degree l < L holds them).
  const Tensor fme_value = golden().at("energy.value");
  const int64_t L = fme_value.size(2), M = fme_value.size(3);
  REQUIRE(L == H);
  REQUIRE(M == W / 2 + 1);
  const sphere::ShtSpec spec = sphere::make_sht_spec(sphere::GridKind::legendre_gauss, H, W, L, L);
  std::vector<Tensor> coeffs;
  for (const Tensor& m : members) coeffs.push_back(sphere::sht(m.detach(), spec));
  Tensor ours = energy_kernel(coeffs, sphere::sht(target, spec));  // (B, C, L, L)
  std::vector<double> w(static_cast<size_t>(L), 2.0);
  w[0] = 1.0;
  const double lm = static_cast<double>(L * M);
  ours = mul(mul(ours, from_vector(w)), lm / (2 * std::sqrt(lm)));
  CHECK(gs_test::relative_error(ours, contiguous(narrow(fme_value, 3, 0, L))) <= 1e-12);
  CHECK(gs_test::max_magnitude(narrow(fme_value, 3, L, M - L)) == 0.0);
  // The transform itself: fme's (sht_fix.py's RealSHT, in f64) on the target.
  const Tensor fme_coeffs = golden().at("energy.target_coeffs");
  CHECK(gs_test::relative_error(sphere::sht(target, spec), contiguous(narrow(fme_coeffs, 3, 0, L))) <= 1e-12);
  CHECK(gs_test::max_magnitude(narrow(fme_coeffs, 3, L, M - L)) == 0.0);
}
