// softmax, log_softmax, nll_loss, cross_entropy (ops/softmax.h): values and gradients from
// PyTorch 2.14 (pasted, marked "torch") or closed forms, torch's edge values, weighted means,
// ignore_index, label smoothing, and the error messages.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/factory.h"
#include "ops/ops.h"
#include "ops/softmax.h"
#include "tests/ops/value_checks.h"

namespace {

using gs::testing::check_values;
using gs::DType;
using gs::LossReduction;
using gs::Tensor;
using Values = std::vector<double>;
const double kInf = std::numeric_limits<double>::infinity();


Tensor logits() {  // (4, 3), as in the torch script
  return gs::from_vector(Values{0.2, -1.3, 0.7, 1.1, 0.4, -0.5, -0.3, 0.9, 0.0, 0.8, -0.2, 1.5}, {4, 3})
      .set_requires_grad(true);
}
Tensor targets(std::vector<int64_t> v, gs::Shape s = {}) { return gs::from_vector(v, std::move(s)); }
const Tensor kClassWeights = gs::from_vector(Values{0.5, 2.0, 1.5});

Tensor grad_of(const Tensor& y, const Tensor& x) { return gs::grad({y}, {x})[0]; }

}  // namespace

TEST_CASE("softmax / log_softmax: values and gradients as torch") {
  const Tensor x = gs::from_vector(Values{1, 2, 3, -1, 0, 5}, {2, 3}).set_requires_grad(true);
  const Tensor w = gs::from_vector(Values{0.5, -1, 2, 1, 1, -3}, {2, 3});
  // torch: softmax(x, 1) weighted by w: sum -1.8327011632486543 and its gradient.
  Tensor y = gs::sum(gs::mul(gs::softmax(x, 1), w));
  check_values(y, {-1.8327011632486543});
  check_values(grad_of(y, x), {-0.05678847003696693, -0.5214597727496746, 0.5782482427866417, 0.009734737470978883,
                               0.026461759972181257, -0.03619649744316028});
  y = gs::sum(gs::mul(gs::log_softmax(x, 1), w));
  check_values(y, {-11.602234462074836});
  check_values(grad_of(y, x), {0.36495414024442935, -1.3670927065821965, 1.0021385663377673, 1.0024561149044509,
                               1.0066764125133765, -2.0091325274178273});
  // torch: softmax(x, 0).
  check_values(gs::softmax(x, 0), {0.8807970779778823, 0.8807970779778823, 0.11920292202211755, 0.11920292202211755,
                                   0.11920292202211755, 0.8807970779778823});
}

TEST_CASE("softmax / log_softmax: stable for large inputs; torch's NaN at +inf and all -inf") {
  check_values(gs::softmax(gs::from_vector(Values{1000, 1000}), 0), {0.5, 0.5});
  check_values(gs::log_softmax(gs::from_vector(Values{1000, 0}), 0), {0, -1000});
  check_values(gs::softmax(gs::from_vector(Values{-kInf, 0}), 0), {0, 1});
  const double nan = std::numeric_limits<double>::quiet_NaN();
  check_values(gs::softmax(gs::from_vector(Values{kInf, 0}), 0), {nan, nan});        // torch: [nan, nan]
  check_values(gs::softmax(gs::from_vector(Values{-kInf, -kInf}), 0), {nan, nan});   // torch: [nan, nan]
  check_values(gs::log_softmax(gs::from_vector(Values{kInf, 0}), 0), {nan, nan});    // torch: [nan, nan]
}

TEST_CASE("nll_loss: reductions, class weights and ignore_index as torch") {
  const Tensor x = logits();
  const Tensor t = targets({2, -100, 0, 1});
  // torch: mean -0.12499999999999994 (weighted: divided by 1.5 + 0.5 + 2), grad -w[t] / 4 at each target.
  Tensor y = gs::nll_loss(x, t, kClassWeights);
  check_values(y, {-0.12499999999999994});
  check_values(grad_of(y, x), {0, 0, -0.375, 0, 0, 0, -0.125, 0, 0, 0, -0.5, 0});
  y = gs::nll_loss(x, t, kClassWeights, LossReduction::sum);
  check_values(y, {-0.4999999999999998});
  y = gs::nll_loss(x, t, kClassWeights, LossReduction::none);
  check_values(y, {-1.05, 0, 0.15, 0.4});
  CHECK(y.sizes() == gs::Shape{4});
  // torch: ignore_index 1 inside [0, C) with targets [2, 1, 0, 1]: -0.19999999999999998.
  check_values(gs::nll_loss(x, targets({2, 1, 0, 1}), {}, LossReduction::mean, 1), {-0.19999999999999998});
}

TEST_CASE("nll_loss: every target ignored gives NaN for the mean and a zero gradient (torch)") {
  const Tensor x = logits();
  Tensor y = gs::nll_loss(x, targets({-100, -100, -100, -100}));
  CHECK(std::isnan(y.item<double>()));
  check_values(grad_of(y, x), Values(12, 0.0));
}

TEST_CASE("cross_entropy: weights, label smoothing, spatial dims, unbatched, as torch") {
  const Tensor x = logits();
  const Tensor t = targets({2, -100, 0, 1});
  // torch: cross_entropy(x, t, w) = 1.5341861881147643 with its gradient.
  Tensor y = gs::cross_entropy(x, t, kClassWeights);
  check_values(y, {1.5341861881147643});
  check_values(grad_of(y, x), {0.13057778545640059, 0.029135842180713967, -0.15971362763711455, 0, 0, 0,
                               -0.10295405025603002, 0.0731951308227542, 0.029758919433275813, 0.1478575959838809,
                               -0.445606230216497, 0.29774863423261605});
  // torch: label_smoothing 0.2: 1.500415632769264.
  y = gs::cross_entropy(x, t, kClassWeights, LossReduction::mean, -100, 0.2);
  check_values(y, {1.500415632769264});
  check_values(grad_of(y, x), {0.11934272355736948, -0.004844954312190783, -0.11449776924517868, 0, 0, 0,
                               -0.07893873367470669, 0.06426017443033892, 0.014678559244367747, 0.1296670895849555,
                               -0.38256581486873054, 0.252898725283775});
  // torch: no weights, label_smoothing 0.1, reduction none, ignore_index 0, targets [2, 1, 0, 1].
  check_values(gs::cross_entropy(x, targets({2, 1, 0, 1}), {}, LossReduction::none, 0, 0.1),
               {0.6382902529753239, 1.236401472717484, 0.0, 2.12835847715745});
  // torch: (N, C, d) input (2, 3, 2) with targets [[1, 0], [-100, 2]].
  const Tensor x3 = gs::from_vector(Values{0.1, 0.2, 0.3, -0.4, 0.5, 0.6, -0.7, 0.8, 0.9, 1.0, -1.1, 1.2}, {2, 3, 2});
  const Tensor t3 = targets({1, 0, -100, 2}, {2, 2});
  check_values(gs::cross_entropy(x3, t3), {1.045289893023252});
  check_values(gs::cross_entropy(x3, t3, kClassWeights, LossReduction::sum, -100, 0.3), {4.257729766394668});
  // torch: unbatched (C) input with a 0-dim target: 0.4076059644443804.
  check_values(gs::cross_entropy(gs::from_vector(Values{1, 2, 3}), gs::full({}, 2, DType::i64)), {0.4076059644443804});
}

TEST_CASE("nll_loss / cross_entropy: error messages") {
  const Tensor x = logits();
  CHECK_THROWS_WITH_AS(gs::cross_entropy(x, gs::zeros({4}, DType::f64)),
                       doctest::Contains("cross_entropy: expected the target to hold class indices as i64, got f64 (4,)"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::cross_entropy(x, gs::zeros({4}, DType::f64)),
                       doctest::Contains("class probabilities as the target are not supported"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::nll_loss(x, targets({0, 5, 1, 2})),
                       doctest::Contains("nll_loss: target 5 at flat index 1 is out of range for 3 classes (expected 0..2, or ignore_index -100)"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::nll_loss(x, targets({0, 1, 2})),
                       doctest::Contains("nll_loss: expected a target of shape (4,) for the input (4, 3), got (3,)"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::nll_loss(x, targets({0, 1, 2, 0}), gs::ones({2}, DType::f64)),
                       doctest::Contains("nll_loss: expected class weights of shape (3)"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::cross_entropy(x, targets({0, 1, 2, 0}), {}, LossReduction::mean, -100, 1.5),
                       doctest::Contains("label_smoothing must be in [0, 1], got 1.5"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::softmax(x, 2), doctest::Contains("softmax: dim 2 out of range"), gs::Error);
}

TEST_CASE("nll_loss: a class weight that requires grad is differentiated (torch refuses)") {
  // sum reduction: d/dw_c = -sum of input[i, c] over the targets of class c.
  const Tensor x = logits();
  Tensor w = gs::from_vector(Values{0.5, 2.0, 1.5}).set_requires_grad(true);
  const Tensor y = gs::nll_loss(x, targets({2, 2, 0, 1}), w, LossReduction::sum);
  check_values(gs::grad({y}, {w})[0], {0.3, 0.2, -0.7 + 0.5});
}

TEST_CASE("nll_loss / cross_entropy: the sign of a zero loss as torch (+0 unbatched, -0 in a batch)") {
  // torch: cross_entropy of one class is 0; unbatched +0 (its path accumulates 0 - w x), batched -(w x) = -0.
  const Tensor one = gs::from_vector(Values{1e-310}, {1});
  CHECK_FALSE(std::signbit(gs::cross_entropy(one, gs::full({}, 0, DType::i64), {}, LossReduction::none).item<double>()));
  const Tensor batch = gs::from_vector(Values{0.5, 0.0}, {1, 2});
  CHECK(std::signbit(gs::nll_loss(batch, targets({1}, {1}), {}, LossReduction::none).to_vector<double>()[0]));
}

TEST_CASE("softmax / log_softmax: an empty input gives an empty result and an empty gradient (as torch)") {
  Tensor a = gs::zeros({0, 3}, DType::f64);
  a.set_requires_grad(true);
  Tensor s = gs::softmax(a, 1);
  CHECK(s.sizes() == gs::Shape{0, 3});
  Tensor b = gs::zeros({2, 0}, DType::f64);
  b.set_requires_grad(true);
  Tensor l = gs::log_softmax(b, 1);
  CHECK(l.sizes() == gs::Shape{2, 0});
  const auto g = gs::grad({gs::sum(s), gs::sum(l)}, {a, b});
  CHECK(g[0].sizes() == gs::Shape{0, 3});
  CHECK(g[1].sizes() == gs::Shape{2, 0});
}
