// Trajectory data, grid coordinates, normalisation, windows and batches (models/data/dataset.h),
// on a hand-built data set whose statistics are known.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <tuple>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "engine/factory.h"
#include "models/data/dataset.h"
#include "models/data/exact_sum.h"
#include "ops/ops.h"
#include "tests/test_util.h"

namespace {

using gs::DType;
using gs::Tensor;
using gs::models::Normalizer;
using gs::models::TrajectoryData;
using gs::sphere::GridKind;
using gs_test::contains;
using gs_test::error_of;

// A trajectory (T, 2, 2, 3): channel 0 holds offset + 10 s + i at state s and grid point i,
// channel 1 is the constant 5.
Tensor ramp(int64_t T, double offset, DType dtype = DType::f64) {
  std::vector<double> v;
  for (int64_t s = 0; s < T; ++s) {
    for (int64_t i = 0; i < 6; ++i) v.push_back(offset + 10.0 * static_cast<double>(s) + static_cast<double>(i));
    for (int64_t i = 0; i < 6; ++i) v.push_back(5.0);
  }
  return gs::cast_copy(gs::from_vector(v, {T, 2, 2, 3}), dtype);
}

// Two trajectories of 3 and 2 states: channel 0 takes the values 0..5, 10..15, 20..25 and
// 100..105, 110..115 (mean 50.5, population std 47.105378319961154), channel 1 is constant.
TrajectoryData hand_built(DType dtype = DType::f64) {
  TrajectoryData d;
  d.variables = {"a", "b"};
  d.units = {"m", "s-1"};
  d.grid = GridKind::legendre_gauss;
  d.nlat = 2;
  d.nlon = 3;
  d.dt_hours = 6;
  d.trajectories = {ramp(3, 0.0, dtype), ramp(2, 100.0, dtype)};
  return d;
}

}  // namespace

TEST_CASE("dataset: Normalizer::fit on a hand-built data set") {
  for (DType dtype : {DType::f64, DType::f32}) {
    const Normalizer n = Normalizer::fit(hand_built(dtype));
    REQUIRE(n.mean.size() == 2);
    REQUIRE(n.std.size() == 2);
    CHECK(n.mean[0] == doctest::Approx(50.5).epsilon(1e-15));
    CHECK(n.std[0] == doctest::Approx(47.105378319961154).epsilon(1e-14));
    CHECK(n.mean[1] == 5.0);
    CHECK(n.std[1] == 1.0);  // a constant channel gets std 1
  }
}

TEST_CASE("dataset: normalize and denormalize") {
  const Normalizer n{{50.5, 5.0}, {47.105378319961154, 1.0}};
  // (B, C, H, W) = (1, 2, 2, 1): channel 0 = {mean, mean + std}, channel 1 = {5, 7}.
  const Tensor x = gs::from_vector(std::vector<double>{50.5, 97.605378319961154, 5.0, 7.0}, {1, 2, 2, 1});
  const Tensor y = n.normalize(x);
  const auto v = y.to_vector<double>();
  CHECK(v[0] == doctest::Approx(0.0));
  CHECK(v[1] == doctest::Approx(1.0).epsilon(1e-15));
  CHECK(v[2] == 0.0);
  CHECK(v[3] == 2.0);
  const auto back = n.denormalize(y).to_vector<double>();
  CHECK(back[1] == doctest::Approx(97.605378319961154).epsilon(1e-15));
  CHECK(back[3] == 7.0);

  // Round trip on every dtype and a leading time axis (B, n, C, H, W).
  for (DType dtype : {DType::f64, DType::f32}) {
    const Tensor t = gs::cast_copy(gs::reshape(ramp(3, 0.0), {1, 3, 2, 2, 3}), dtype);
    const Tensor r = n.denormalize(n.normalize(t));
    CHECK(r.dtype() == dtype);
    const auto a = t.to_vector<double>(), b = r.to_vector<double>();
    // Rounding relative to the data's scale (~50): f32 loses a few ulps of it through the offset.
    const double tol = (dtype == DType::f32 ? 1e-6 : 1e-14) * 50.5;
    for (size_t i = 0; i < a.size(); ++i) CHECK(std::abs(b[i] - a[i]) < tol);
  }
  // Gradients flow through normalize (the stepper normalises predictions).
  Tensor leaf = gs::ones({1, 2, 1, 1}, DType::f64);
  leaf.set_requires_grad();
  gs::sum(n.normalize(leaf)).backward();
  const auto g = leaf.grad().to_vector<double>();
  CHECK(g[0] == doctest::Approx(1.0 / 47.105378319961154));
  CHECK(g[1] == 1.0);

  CHECK(contains(error_of([&] { n.normalize(gs::zeros({1, 3, 2, 2}, DType::f32)); }),
                 "expected a f32/f64 tensor (..., C, H, W) with C = 2, got f32 (1, 3, 2, 2)"));
  CHECK(contains(error_of([&] { n.denormalize(gs::zeros({2, 2}, DType::f64)); }), "with C = 2, got f64 (2, 2)"));
  const Normalizer broken{{1.0, 2.0}, {1.0}};
  CHECK(contains(error_of([&] { broken.normalize(gs::zeros({2, 1, 1}, DType::f64)); }), "got 2 means and 1 stds"));
  const Normalizer zero_std{{1.0, 2.0}, {1.0, 0.0}};
  CHECK(contains(error_of([&] { zero_std.denormalize(gs::zeros({2, 1, 1}, DType::f64)); }),
                 "channel 1 has mean 2 and std 0"));
}

TEST_CASE("dataset: list_windows counts and order") {
  const TrajectoryData d = hand_built();  // 3 and 2 states
  using W = std::vector<std::pair<int64_t, int64_t>>;
  CHECK(gs::models::list_windows(d, 1) == W{{0, 0}, {0, 1}, {1, 0}});
  CHECK(gs::models::list_windows(d, 2) == W{{0, 0}});
  CHECK(gs::models::list_windows(d, 3).empty());
  CHECK(contains(error_of([&] { gs::models::list_windows(d, 0); }), "expected n_steps >= 1"));
}

TEST_CASE("dataset: make_batch contents") {
  const TrajectoryData d = hand_built();
  const Normalizer n = Normalizer::fit(d);
  const auto batch = gs::models::make_batch(d, n, {{1, 0}, {0, 1}}, 1, DType::f32);
  CHECK(batch.input.sizes() == gs::Shape{2, 2, 2, 3});
  CHECK(batch.targets.sizes() == gs::Shape{2, 1, 2, 2, 3});
  CHECK(batch.input.dtype() == DType::f32);
  const auto in = batch.input.to_vector<double>(), tg = batch.targets.to_vector<double>();
  auto z = [&](double x) { return static_cast<double>(static_cast<float>((x - 50.5) / 47.105378319961154)); };
  // Sample 0 = trajectory 1 from state 0: input channel 0 = 100 + i, target = 110 + i.
  for (int i = 0; i < 6; ++i) {
    CHECK(in[static_cast<size_t>(i)] == z(100.0 + i));
    CHECK(in[static_cast<size_t>(6 + i)] == 0.0);  // constant channel: (5 - 5) / 1
    CHECK(tg[static_cast<size_t>(i)] == z(110.0 + i));
  }
  // Sample 1 = trajectory 0 from state 1: input 10 + i, target 20 + i.
  CHECK(in[12 + 4] == z(14.0));
  CHECK(tg[12 + 4] == z(24.0));

  const auto two = gs::models::make_batch(d, n, {{0, 0}}, 2, DType::f64);
  CHECK(two.targets.sizes() == gs::Shape{1, 2, 2, 2, 3});
  const auto t2 = two.targets.to_vector<double>();
  CHECK(t2[5] == doctest::Approx((15.0 - 50.5) / 47.105378319961154).epsilon(1e-15));
  CHECK(t2[12 + 5] == doctest::Approx((25.0 - 50.5) / 47.105378319961154).epsilon(1e-15));
  // The same values as normalize() of the raw states.
  const Tensor state1 = gs::select(gs::unsqueeze(d.trajectories[0], 0), 1, 1);  // (1, 2, 2, 3)
  const auto ref = n.normalize(state1).to_vector<double>();
  for (size_t i = 0; i < ref.size(); ++i) CHECK(t2[i] == doctest::Approx(ref[i]).epsilon(1e-15));

  CHECK(contains(error_of([&] { gs::models::make_batch(d, n, {{1, 1}}, 1, DType::f32); }),
                 "window (trajectory 1, start 1) needs states 1..2, but the trajectory has 2 states"));
  CHECK(contains(error_of([&] { gs::models::make_batch(d, n, {{2, 0}}, 1, DType::f32); }),
                 "window trajectory 2 is out of range (the data has 2 trajectories)"));
  CHECK(contains(error_of([&] { gs::models::make_batch(d, n, {}, 1, DType::f32); }), "expected at least one window"));
  CHECK(contains(error_of([&] { gs::models::make_batch(d, n, {{0, 0}}, 1, DType::c64); }),
                 "expected dtype f32 or f64, got c64"));
  const Normalizer wrong{{0.0}, {1.0}};
  CHECK(contains(error_of([&] { gs::models::make_batch(d, wrong, {{0, 0}}, 1, DType::f32); }),
                 "expected a normalizer with 2 channels (a, b), got 1 means and 1 stds"));
}

TEST_CASE("dataset: validate names what was expected and what it got") {
  CHECK_NOTHROW(hand_built().validate());
  auto broken = [](auto&& edit) {
    TrajectoryData d = hand_built();
    edit(d);
    return error_of([&] { d.validate(); });
  };
  CHECK(contains(broken([](TrajectoryData& d) { d.trajectories[1] = gs::zeros({2, 2, 2}, DType::f64); }),
                 "trajectory 1 must be 4-D (T, C, nlat, nlon) = (T, 2, 2, 3), got f64 (2, 2, 2)"));
  CHECK(contains(broken([](TrajectoryData& d) { d.trajectories[0] = gs::zeros({3, 3, 2, 3}, DType::f64); }),
                 "trajectory 0 must have shape (T >= 1, 2, 2, 3) for 2 variables on a 2x3 grid, got (3, 3, 2, 3)"));
  CHECK(contains(broken([](TrajectoryData& d) { d.trajectories[1] = gs::zeros({2, 2, 3, 3}, DType::f64); }),
                 "got (2, 2, 3, 3)"));
  CHECK(contains(broken([](TrajectoryData& d) { d.trajectories[1] = gs::zeros({0, 2, 2, 3}, DType::f64); }),
                 "got (0, 2, 2, 3)"));
  CHECK(contains(broken([](TrajectoryData& d) { d.trajectories[1] = ramp(2, 0.0, DType::f32); }),
                 "every trajectory must have one dtype; trajectory 0 is f64, trajectory 1 is f32"));
  CHECK(contains(broken([](TrajectoryData& d) { d.trajectories = {gs::zeros({1, 2, 2, 3}, DType::i64)}; }),
                 "trajectory 0 must be f32 or f64, got i64"));
  CHECK(contains(broken([](TrajectoryData& d) { d.trajectories.clear(); }), "expected at least one trajectory, got none"));
  CHECK(contains(broken([](TrajectoryData& d) { d.units = {"m"}; }),
                 "expected no units or one per variable (2), got 1"));
  CHECK(contains(broken([](TrajectoryData& d) { d.variables.clear(); }), "expected at least one variable name"));
  CHECK(contains(broken([](TrajectoryData& d) { d.dt_hours = 0; }), "expected dt_hours > 0, got 0"));
  CHECK(contains(broken([](TrajectoryData& d) { d.trajectories[0] = Tensor(); }), "got an undefined tensor"));
  // Every user of the data validates it first.
  TrajectoryData bad = hand_built();
  bad.trajectories[0] = gs::zeros({3, 1, 2, 3}, DType::f64);
  CHECK(contains(error_of([&] { Normalizer::fit(bad); }), "trajectory 0 must have shape"));
  CHECK(contains(error_of([&] { gs::models::list_windows(bad, 1); }), "trajectory 0 must have shape"));
}

TEST_CASE("dataset: latitudes and longitudes of each grid") {
  CHECK(gs::models::longitudes_deg(4) == std::vector<double>{0.0, 90.0, 180.0, 270.0});
  CHECK(contains(error_of([] { gs::models::longitudes_deg(0); }), "expected nlon >= 1, got 0"));

  const auto eq = gs::models::latitudes_deg(GridKind::equiangular, 5);
  REQUIRE(eq.size() == 5);
  const double eq_expect[] = {90.0, 45.0, 0.0, -45.0, -90.0};
  for (size_t j = 0; j < 5; ++j) CHECK(eq[j] == doctest::Approx(eq_expect[j]).epsilon(1e-14));

  const auto gauss = gs::models::latitudes_deg(GridKind::legendre_gauss, 2);  // x = +-1/sqrt(3)
  REQUIRE(gauss.size() == 2);
  CHECK(gauss[0] == doctest::Approx(35.26438968275466).epsilon(1e-14));
  CHECK(gauss[1] == doctest::Approx(-35.26438968275466).epsilon(1e-14));

  const auto lob = gs::models::latitudes_deg(GridKind::lobatto, 3);
  REQUIRE(lob.size() == 3);
  CHECK(lob[0] == doctest::Approx(90.0).epsilon(1e-14));
  CHECK(std::abs(lob[1]) < 1e-12);
  CHECK(lob[2] == doctest::Approx(-90.0).epsilon(1e-14));

  // Consistent with the SHT's grid: every row of a 32-row Gauss grid, north to south, symmetric.
  const auto g32 = gs::models::latitudes_deg(GridKind::legendre_gauss, 32);
  const auto q = gs::sphere::make_quadrature(GridKind::legendre_gauss, 32);
  for (size_t j = 0; j < 32; ++j) {
    CHECK(std::sin(g32[j] * std::numbers::pi / 180.0) == doctest::Approx(q.cos_theta[j]).epsilon(1e-14));
    CHECK(g32[j] == doctest::Approx(-g32[31 - j]).epsilon(1e-14));
  }
}

TEST_CASE("dataset: ExactSum is exact and independent of the order and grouping of its terms") {
  using gs::models::ExactSum;
  ExactSum big;
  for (double x : {1e300, 1.0, -1e300, 0x1p-1074, -0.0, 3.0}) big.add(x);
  CHECK(big.value() == 4.0 + 0x1p-1074 - 0x1p-1074 + 0.0);  // 4 (the subnormal is below 4's ulp)
  ExactSum tiny;
  tiny.add(0x1p-1074);
  tiny.add(0x1p-1074);
  CHECK(tiny.value() == 0x1p-1073);
  // Correct rounding where adding the limbs from the top would round twice: 2^96 + 2^43 + 1 is
  // above the tie between 2^96 and 2^96 + 2^44.
  ExactSum twice;
  for (double x : {0x1p96, 0x1p43, 1.0}) twice.add(x);
  CHECK(twice.value() == 0x1p96 + 0x1p44);
  ExactSum tie;  // an exact tie rounds to even
  for (double x : {0x1p96, 0x1p43}) tie.add(x);
  CHECK(tie.value() == 0x1p96);
  ExactSum neg;
  for (double x : {-0.1, -0.2, 0.05}) neg.add(x);
  // -0.25 up to the exact decimal representation errors of the three doubles: within an ulp.
  CHECK(neg.value() == doctest::Approx(-0.25).epsilon(1e-16));
  // A million terms in three orders and two groupings: one set of bits.
  std::vector<double> terms;
  std::mt19937_64 gen(7);
  std::normal_distribution<double> normal(1e5, 3e4);
  for (int i = 0; i < 1'000'000; ++i) terms.push_back(normal(gen) * (i % 7 == 0 ? 1e-9 : 1.0));
  auto total = [](const std::vector<double>& v) {
    ExactSum s;
    for (double x : v) s.add(x);
    return s.value();
  };
  const double forward = total(terms);
  std::vector<double> reversed(terms.rbegin(), terms.rend()), shuffled = terms;
  std::shuffle(shuffled.begin(), shuffled.end(), gen);
  CHECK(total(reversed) == forward);
  CHECK(total(shuffled) == forward);
  ExactSum parts[3];
  for (size_t i = 0; i < terms.size(); ++i) parts[i % 3].add(terms[i]);
  std::vector<int64_t> limbs(ExactSum::kLimbs, 0);  // as the all-reduce sums them
  for (const auto& p : parts) {
    const auto l = p.limbs();
    for (int k = 0; k < ExactSum::kLimbs; ++k) limbs[k] += l[k];
  }
  CHECK(ExactSum::from_limbs(limbs).value() == forward);
  parts[2].merge(parts[0]);
  parts[2].merge(parts[1]);
  CHECK(parts[2].value() == forward);
  long double naive = 0;
  for (double x : terms) naive += x;
  CHECK(forward == doctest::Approx(static_cast<double>(naive)).epsilon(1e-15));
}

TEST_CASE("dataset: a normaliser gathered in shares of tiles and states equals the one-pass normaliser bitwise") {
  TrajectoryData d;
  d.variables = {"z", "u"};
  d.grid = GridKind::equiangular;
  d.nlat = 7;
  d.nlon = 10;
  d.trajectories = {gs::randn({5, 2, 7, 10}, gs::RandomKey{3, 0}, DType::f32) * 3e4 + 5e4,
                    gs::randn({3, 2, 7, 10}, gs::RandomKey{3, 1}, DType::f32)};
  const Normalizer whole = Normalizer::fit(d);
  auto source = gs::models::memory_source(d);
  // Every decomposition: h x w tiles (uneven) and p replicas each taking every p-th state.
  for (auto [h, w, p] : {std::tuple{1, 1, 2}, {2, 1, 1}, {1, 3, 1}, {3, 2, 2}, {7, 4, 3}}) {
    std::vector<gs::models::StatsShare> shares;
    for (int a = 0; a < h; ++a)
      for (int b = 0; b < w; ++b)
        for (int r = 0; r < p; ++r) {
          auto block = [](int64_t n, int parts, int i) {
            const int64_t base = n / parts, extra = n % parts;
            return gs::models::Span{i * base + std::min<int64_t>(i, extra), base + (i < extra ? 1 : 0)};
          };
          shares.push_back({block(7, h, a), block(10, w, b), r, p});
        }
    // Ranks simulated in turn: each rank's sum callback waits for none, so run the fits one pass at a
    // time by collecting every share's partial limbs first.
    std::vector<std::vector<std::vector<int64_t>>> partial(2);  // [pass][share]
    for (int pass = 0; pass < 2; ++pass) {
      for (size_t s = 0; s < shares.size(); ++s) {
        int seen = 0;
        std::vector<int64_t> out;
        try {
          Normalizer::fit(*source, shares[s], [&](std::vector<int64_t>& v) {
            if (seen++ == pass) {
              out = v;
              throw 0;  // stop here: this pass's partial sums are what we wanted
            }
            v = partial[seen - 1][0];  // earlier passes: the summed limbs computed before
          });
        } catch (int) {
        }
        partial[pass].push_back(out);
      }
      std::vector<int64_t> sum(partial[pass][0].size(), 0);
      for (const auto& v : partial[pass])
        for (size_t k = 0; k < v.size(); ++k) sum[k] += v[k];
      partial[pass] = {sum};
    }
    int call = 0;
    const Normalizer split =
        Normalizer::fit(*source, shares[0], [&](std::vector<int64_t>& v) { v = partial[call++][0]; });
    CAPTURE(h);
    CAPTURE(w);
    CAPTURE(p);
    CHECK(split.mean == whole.mean);
    CHECK(split.std == whole.std);
  }
  CHECK(whole.mean[0] == doctest::Approx(5e4 * 5 / 8).epsilon(0.05));  // 5 states near 5e4, 3 near 0
}

TEST_CASE("dataset: make_batch on a tile reads only the tile of the windows' states") {
  struct Request {
    int64_t trajectory, first, n;
    gs::models::Span rows, cols;
  };
  // A source that records what is asked of it.
  struct Recording final : gs::models::TrajectorySource {
    std::shared_ptr<gs::models::TrajectorySource> inner;
    mutable std::vector<Request> requests;
    const gs::models::TrajectoryInfo& info() const override { return inner->info(); }
    Tensor read(int64_t t, int64_t first, int64_t n, gs::models::Span rows, gs::models::Span cols) const override {
      requests.push_back({t, first, n, rows, cols});
      return inner->read(t, first, n, rows, cols);
    }
  };
  const TrajectoryData d = hand_built();
  Recording src;
  src.inner = gs::models::memory_source(d);
  const Normalizer n = Normalizer::fit(d);
  const auto b = gs::models::make_batch(src, n, {{1, 0}, {0, 1}}, 1, DType::f64, {1, 1}, {1, 2});
  REQUIRE(src.requests.size() == 2);
  CHECK(src.requests[0].trajectory == 1);
  CHECK(src.requests[1].first == 1);
  for (const auto& r : src.requests) {
    CHECK(r.n == 2);
    CHECK((r.rows.start == 1 && r.rows.count == 1 && r.cols.start == 1 && r.cols.count == 2));
  }
  CHECK(b.input.sizes() == gs::Shape{2, 2, 1, 2});
  // The tile of the whole batch, value for value.
  const auto whole = gs::models::make_batch(d, n, {{1, 0}, {0, 1}}, 1, DType::f64);
  CHECK(gs::narrow(gs::narrow(whole.targets, 3, 1, 1), 4, 1, 2).to_vector<double>() == b.targets.to_vector<double>());
}
