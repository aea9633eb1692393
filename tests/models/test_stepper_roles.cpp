// The stepper with variable roles (prognostic | forcing | diagnostic), masks of missing values,
// loss scales and the stepper's residual, with a tiny linear model that records what it is fed:
// by values, a forcing is read from the data at each step's input time and never predicted, a
// diagnostic is predicted and scored but never fed back, missing values are read as 0 and left out
// of the loss (with the global batch's denominator, so micro-batches change nothing).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "models/step_loss.h"
#include "models/stepper.h"
#include "ops/ops.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::models;
using gs_test::contains;
using gs_test::error_of;

namespace {

constexpr int64_t B = 3, P = 2, F = 1, D = 1, C = P + F + D, H = 3, W = 4, N = 3;
const ChannelLayout kLayout{P, F, D};
const std::vector<double> kArea{0.5, 1.0, 0.5};

// y[b, o] = sum_i A[o, i] x[b, i] + bias[o]: (B, P + F) -> (B, P + D). Records its inputs.
struct Linear : Model {
  Tensor A, bias;
  std::vector<std::vector<double>> inputs;
  Linear() : Model("Linear") {
    std::vector<double> a;
    for (int64_t o = 0; o < P + D; ++o)
      for (int64_t i = 0; i < P + F; ++i) a.push_back(o == i ? 0.8 : 0.1 * static_cast<double>(o + 2 * i + 1));
    A = register_parameter("A", reshape(from_vector(a), {P + D, P + F}));
    bias = register_parameter("bias", from_vector(std::vector<double>{0.1, -0.2, 0.3}));
  }
  Tensor forward(const Tensor& x, const ForwardContext&) override {
    inputs.push_back(x.detach().to_vector<double>());
    // (B, I, H, W) -> (B, H, W, I) @ (I, O) -> (B, O, H, W)
    const Tensor y = matmul(permute(x, {0, 2, 3, 1}), transpose(A, 0, 1));
    return add(permute(y, {0, 3, 1, 2}), reshape(bias, {1, P + D, 1, 1}));
  }
};

using Vec = std::vector<double>;
double at(const Vec& v, int64_t b, int64_t c, int64_t cs, int64_t p) { return v[(b * cs + c) * H * W + p]; }

// The rollout in plain loops: per step, the loss of the output channels {0, 1, 3} of targets[k]
// (masked where NaN, each channel's numerator over its denominator, mean over channels; `scale`
// multiplies the errors), with the forcing of the step's input time.
Vec reference_losses(const Vec& input, const Vec& targets, const Vec& a, const Vec& bias, const Vec& scale = {1, 1, 1},
                     bool residual = false) {
  const int64_t I = P + F, O = P + D;
  double wsum = 0;
  for (double w : kArea) wsum += w;
  Vec state(B * P * H * W);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < P; ++c)
      for (int64_t p = 0; p < H * W; ++p) {
        const double v = at(input, b, c, C, p);
        state[(b * P + c) * H * W + p] = std::isnan(v) ? 0 : v;
      }
  Vec losses;
  for (int64_t k = 0; k < N; ++k) {
    Vec num(O, 0), den(O, 0), pred(B * O * H * W);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t p = 0; p < H * W; ++p) {
        Vec x(I);
        for (int64_t c = 0; c < P; ++c) x[c] = state[(b * P + c) * H * W + p];
        const double f = k == 0 ? at(input, b, P, C, p) : targets[(((b * N + k - 1) * C + P) * H * W) + p];
        x[P] = std::isnan(f) ? 0 : f;
        for (int64_t o = 0; o < O; ++o) {
          double y = bias[o];
          for (int64_t i = 0; i < I; ++i) y += a[o * I + i] * x[i];
          if (residual && o < P) y += x[o];
          pred[(b * O + o) * H * W + p] = y;
          const int64_t tc = o < P ? o : P + F + (o - P);
          const double t = targets[(((b * N + k) * C + tc) * H * W) + p];
          const double w = kArea[p / W] / wsum / W;
          if (std::isnan(t)) continue;
          num[o] += w * std::pow(scale[o] * (y - t), 2);
          den[o] += w;
        }
      }
    double loss = 0, channels = 0;
    for (int64_t o = 0; o < O; ++o)
      if (den[o] > 0) loss += num[o] / den[o], ++channels;
    losses.push_back(loss / channels);
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < P; ++c)
        for (int64_t p = 0; p < H * W; ++p) {
          const double t = targets[(((b * N + k) * C + c) * H * W) + p];
          state[(b * P + c) * H * W + p] = std::isnan(t) ? 0 : pred[(b * O + c) * H * W + p];
        }
  }
  return losses;
}

Batch make_batch(uint64_t stream) { return {randn({B, C, H, W}, {7, stream}, DType::f64), randn({B, N, C, H, W}, {7, stream + 1}, DType::f64)}; }

struct Setup {
  std::shared_ptr<Linear> model = std::make_shared<Linear>();
  std::shared_ptr<SGD> opt;
  std::unique_ptr<Stepper> stepper;
  explicit Setup(StepperOptions o = {}) {
    o.layout = kLayout;
    opt = std::make_shared<SGD>(model->named_parameters(), SGDOptions{.lr = 0.01});
    stepper = std::make_unique<Stepper>(model, opt, kArea, o);
  }
  Vec a() const { return model->A.detach().to_vector<double>(); }
  Vec b() const { return model->bias.detach().to_vector<double>(); }
};

void check_losses(const TrainResult& r, const Vec& expected) {
  REQUIRE(r.step_losses.size() == expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    CAPTURE(k);
    CHECK(r.step_losses[k] == doctest::Approx(expected[k]).epsilon(1e-12));
  }
}

}  // namespace

TEST_CASE("stepper roles: the forcing comes from the data at each input time, the diagnostic is never fed back") {
  Setup s;
  const Batch batch = make_batch(1);
  const TrainResult r = s.stepper->compute_gradients(batch);
  check_losses(r, reference_losses(batch.input.to_vector<double>(), batch.targets.to_vector<double>(), s.a(), s.b()));
  REQUIRE(s.model->inputs.size() == static_cast<size_t>(N));
  const Vec in = batch.input.to_vector<double>(), tg = batch.targets.to_vector<double>();
  for (int64_t k = 0; k < N; ++k) {
    const Vec& x = s.model->inputs[static_cast<size_t>(k)];  // (B, P + F, H, W)
    REQUIRE(x.size() == static_cast<size_t>(B * (P + F) * H * W));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t p = 0; p < H * W; ++p) {
        CAPTURE(k);
        // Channel P is the forcing at t_k: the input's at k = 0, else targets[k - 1]'s (never a prediction).
        const double forcing = k == 0 ? at(in, b, P, C, p) : tg[(((b * N + k - 1) * C + P) * H * W) + p];
        CHECK(x[(b * (P + F) + P) * H * W + p] == forcing);
        // The prognostic channels at k = 0 are the data's; later the prediction (not the data).
        if (k == 0) CHECK(x[(b * (P + F) + 0) * H * W + p] == at(in, b, 0, C, p));
        else CHECK(x[(b * (P + F) + 0) * H * W + p] != tg[(((b * N + k - 1) * C + 0) * H * W) + p]);
      }
  }
  // The gradient is the reference's: central differences of the summed reference losses.
  const Vec grad_a = s.model->A.grad().to_vector<double>();
  const double h = 1e-6;
  for (size_t i = 0; i < grad_a.size(); ++i) {
    Vec ap = s.a(), am = s.a();
    ap[i] += h, am[i] -= h;
    double lp = 0, lm = 0;
    for (double v : reference_losses(in, tg, ap, s.b())) lp += v;
    for (double v : reference_losses(in, tg, am, s.b())) lm += v;
    CAPTURE(i);
    CHECK(grad_a[i] == doctest::Approx((lp - lm) / (2 * h)).epsilon(1e-6));
  }
}

TEST_CASE("stepper roles: missing values are read as 0 and left out of the loss; micro-batches change nothing") {
  Batch batch = make_batch(3);
  {
    NoGradGuard no_grad;
    double* t = batch.targets.data<double>();
    double* x = batch.input.data<double>();
    t[((0 * N + 0) * C + 0) * H * W + 5] = NAN;  // a prognostic target
    t[((1 * N + 1) * C + 3) * H * W + 0] = NAN;  // a diagnostic target
    t[((2 * N + 0) * C + P) * H * W + 7] = NAN;  // the forcing of step 1
    x[(1 * C + 1) * H * W + 2] = NAN;            // the initial state
  }
  const Vec in = batch.input.to_vector<double>(), tg = batch.targets.to_vector<double>();
  Setup one;
  const TrainResult r1 = one.stepper->compute_gradients(batch);
  check_losses(r1, reference_losses(in, tg, one.a(), one.b()));
  for (double g : one.model->A.grad().to_vector<double>()) CHECK(std::isfinite(g));
  Setup split({.micro_batches = 3});
  const TrainResult r3 = split.stepper->compute_gradients(batch);
  check_losses(r3, reference_losses(in, tg, one.a(), one.b()));
  const Vec g1 = one.model->A.grad().to_vector<double>(), g3 = split.model->A.grad().to_vector<double>();
  for (size_t i = 0; i < g1.size(); ++i) CHECK(g3[i] == doctest::Approx(g1[i]).epsilon(1e-12));
  // A channel missing in every sample of a step's targets drops out of that step's mean.
  {
    NoGradGuard no_grad;
    Tensor diag = narrow(select(batch.targets, 1, 2), 1, 3, 1);
    fill_(diag, NAN);
  }
  Setup gone;
  check_losses(gone.stepper->compute_gradients(batch),
               reference_losses(batch.input.to_vector<double>(), batch.targets.to_vector<double>(), gone.a(), gone.b()));
}

TEST_CASE("stepper roles: loss scales multiply the errors, the stepper's residual adds the prognostic input") {
  const Batch batch = make_batch(5);
  const Vec in = batch.input.to_vector<double>(), tg = batch.targets.to_vector<double>();
  Setup scaled({.loss_scale = {2.0, 1.0, 0.5}});
  check_losses(scaled.stepper->compute_gradients(batch), reference_losses(in, tg, scaled.a(), scaled.b(), {2.0, 1.0, 0.5}));
  Setup residual({.residual_prediction = true});
  check_losses(residual.stepper->compute_gradients(batch),
               reference_losses(in, tg, residual.a(), residual.b(), {1, 1, 1}, /*residual=*/true));
  CHECK(contains(error_of([] { Setup bad({.loss_scale = {1.0, 2.0}}); }), "one loss scale per output channel"));
}

TEST_CASE("stepper roles: predict reads the forcing from the data after the input and returns P + D channels") {
  Setup s;
  const Batch batch = make_batch(7);
  const Tensor out = s.stepper->predict(batch.input, N, 0, 0, batch.targets);
  CHECK(out.sizes() == Shape{B, N, P + D, H, W});
  // The same inputs as training's rollout.
  Setup t;
  t.stepper->compute_gradients(batch);
  REQUIRE(s.model->inputs.size() == t.model->inputs.size());
  for (size_t k = 0; k < s.model->inputs.size(); ++k) CHECK(s.model->inputs[k] == t.model->inputs[k]);
  CHECK(contains(error_of([&] { s.stepper->predict(batch.input, 2); }), "forcing channel(s) need the data after the input"));
  // Data with other channels than the layout's, and a model of other channels, are refused.
  CHECK(contains(error_of([&] { s.stepper->compute_gradients({narrow(batch.input, 1, 0, 3), narrow(batch.targets, 2, 0, 3)}); }),
                 "the data has 3 channels but the stepper's layout has 4"));
}

TEST_CASE("masked square sums: missing truth left out, a non-finite error where the truth is valid kept") {
  // One sample, two channels on a 2x2 grid, area weights 1/4 and 3/4 (rows, summing to 1).
  const std::vector<double> area{0.25, 0.75};
  const Tensor err = reshape(from_vector(std::vector<double>{1, 2, 3, 4, 1, 1, 2, INFINITY}), {1, 2, 2, 2});
  const Tensor truth = reshape(from_vector(std::vector<double>{0, NAN, 0, 0, 0, 0, 0, 0}), {1, 2, 2, 2});
  const MaskedSums m = masked_square_sums(err, present(truth), area, 2, dist::ProcessGrid());
  const Vec num = m.weighted_values.to_vector<double>(), den = m.weights.to_vector<double>();
  REQUIRE(num.size() == 2);
  // Channel 0: the point (0, 1) is missing; each point's weight is its row's over the row's 2 points.
  CHECK(num[0] == doctest::Approx(0.25 / 2 * 1 + 0.75 / 2 * (9 + 16)));
  CHECK(den[0] == doctest::Approx(0.25 / 2 + 0.75));
  // Channel 1: nothing missing, and the infinite error stays in (a diverged prediction shows).
  CHECK(std::isinf(num[1]));
  CHECK(den[1] == doctest::Approx(1.0));
  CHECK(contains(error_of([&] { masked_square_sums(err, truth, area, 2, dist::ProcessGrid()); }),
                 "expected a bool mask of the values' shape"));
}
