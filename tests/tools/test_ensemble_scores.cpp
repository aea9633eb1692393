// Ensemble scores (tools/ensemble_scores.h): hand-computed values on a small field, and the
// calibration property: members and truth drawn from one distribution give a spread-skill ratio
// near 1 and a flat rank histogram (the finite-ensemble factor included).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "ops/ops.h"
#include "tools/ensemble_scores.h"

using namespace gs;
using namespace gs::tools;

TEST_CASE("ensemble scores: values by hand on a two-point field, missing truth left out") {
  // (S 1, C 1, H 2, W 1); row weights 0.25 and 0.75.
  const std::vector<double> aw{0.25, 0.75};
  const Tensor x0 = reshape(from_vector(std::vector<double>{1.0, 2.0}), {1, 1, 2, 1});
  const Tensor x1 = reshape(from_vector(std::vector<double>{3.0, 4.0}), {1, 1, 2, 1});
  const Tensor x2 = reshape(from_vector(std::vector<double>{2.0, 9.0}), {1, 1, 2, 1});
  const Tensor y = reshape(from_vector(std::vector<double>{0.0, 5.0}), {1, 1, 2, 1});
  const EnsembleLeadScores s = score_ensemble_lead({x0, x1, x2}, y, aw, 1, {});
  // Row 0: members 1, 3, 2 (mean 2), truth 0; row 1: 2, 4, 9 (mean 5), truth 5.
  CHECK(s.mean_square_error[0] == doctest::Approx(0.25 * 4 + 0.75 * 0));
  CHECK(s.variance[0] == doctest::Approx(0.25 * (1 + 1 + 0) / 2 + 0.75 * (9 + 1 + 16) / 2));
  const double crps0 = (1 + 3 + 2) / 3.0 - 0.5 * (2 + 1 + 1) / 3.0, crps1 = (3 + 1 + 4) / 3.0 - 0.5 * (2 + 7 + 5) / 3.0;
  CHECK(s.crps[0] == doctest::Approx(0.25 * crps0 + 0.75 * crps1));
  // Ranks: row 0 has no member below the truth (rank 0), row 1 two (2 and 4).
  REQUIRE(s.rank_weights.size() == 4);
  CHECK(s.rank_weights[0] == doctest::Approx(0.25));
  CHECK(s.rank_weights[1] == 0.0);
  CHECK(s.rank_weights[2] == doctest::Approx(0.75));
  CHECK(s.rank_weights[3] == 0.0);
  // The truth missing in row 1: only row 0 counts.
  const Tensor y_missing = reshape(from_vector(std::vector<double>{0.0, NAN}), {1, 1, 2, 1});
  const EnsembleLeadScores m = score_ensemble_lead({x0, x1, x2}, y_missing, aw, 1, {});
  CHECK(m.mean_square_error[0] == doctest::Approx(4.0));
  CHECK(m.crps[0] == doctest::Approx(crps0));
  CHECK(m.rank_weights[0] == doctest::Approx(0.25));
  CHECK(m.rank_weights[2] == 0.0);
  CHECK(spread_skill_ratio(1.0, 2.0, 3) == doctest::Approx(std::sqrt(4.0 / 3.0) / 2));
  CHECK(std::isnan(spread_skill_ratio(1.0, 0.0, 3)));
}

TEST_CASE("ensemble scores: an ensemble drawn from the truth's distribution is calibrated") {
  const int64_t K = 4;
  const Shape shape{8, 2, 32, 64};
  std::vector<double> aw(32, 1.0 / 32);
  std::vector<Tensor> members;
  for (int64_t k = 0; k < K; ++k) members.push_back(randn(shape, {5, static_cast<uint64_t>(k)}, DType::f64));
  const Tensor y = randn(shape, {6, 0}, DType::f64);
  const EnsembleLeadScores s = score_ensemble_lead(members, y, aw, 64, {});
  for (int c = 0; c < 2; ++c) {
    // E(mean - y)^2 = 1 + 1/K, E variance = 1: the ratio's expectation is 1.
    CHECK(s.mean_square_error[c] == doctest::Approx(1.0 + 1.0 / K).epsilon(0.03));
    CHECK(s.variance[c] == doctest::Approx(1.0).epsilon(0.03));
    CHECK(spread_skill_ratio(std::sqrt(s.variance[c]), std::sqrt(s.mean_square_error[c]), K) ==
          doctest::Approx(1.0).epsilon(0.03));
    // The fair CRPS of a standard normal truth against N(0, 1): E|X - Y| - E|X - X'| / 2 = 1/sqrt(pi).
    CHECK(s.crps[c] == doctest::Approx(1.0 / std::sqrt(M_PI)).epsilon(0.03));
  }
  double total = 0;
  for (double w : s.rank_weights) total += w;
  for (double w : s.rank_weights) CHECK(w / total == doctest::Approx(1.0 / (K + 1)).epsilon(0.05));
  // An ensemble with a quarter of the spread is overconfident: ratio well below 1, a U-shaped histogram.
  std::vector<Tensor> narrow_members;
  for (const Tensor& x : members) narrow_members.push_back(mul(x, 0.25));
  const EnsembleLeadScores n = score_ensemble_lead(narrow_members, y, aw, 64, {});
  CHECK(spread_skill_ratio(std::sqrt(n.variance[0]), std::sqrt(n.mean_square_error[0]), K) < 0.35);
  CHECK(n.rank_weights[0] > 2 * n.rank_weights[2]);
  CHECK(n.rank_weights[K] > 2 * n.rank_weights[2]);
}
