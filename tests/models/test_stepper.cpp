// The stepper with a tiny model (a learnable per-channel affine map, optionally plus keyed noise):
// rollout losses against a plain-loop computation, gradients against central differences of that
// computation (whole rollout, last step only, detached steps), micro-batch accumulation, predict,
// non-finite losses that change nothing, noise keys and a bitwise resume.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "models/stepper.h"
#include "ops/elementwise.h"
#include "ops/view.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::models;
using gs_test::contains;
using gs_test::error_of;

namespace {

constexpr int64_t B = 3, C = 2, H = 3, W = 4, N = 3;
const std::vector<double> kArea{0.5, 1.0, 0.5};

// y[b, c] = scale[c] * x[b, c] + bias[c] (+ noise_std * randn keyed by ctx.noise_key, per global
// sample from ctx.first_sample).
struct ChannelAffine : Model {
  Tensor scale, bias;
  double noise_std;
  std::vector<RandomKey> keys;         // every key forward() was given
  std::vector<int64_t> first_samples;  // and every first sample
  explicit ChannelAffine(double noise_std = 0, DType dt = DType::f64) : Model("ChannelAffine"), noise_std(noise_std) {
    scale = register_parameter("scale", cast_copy(from_vector(std::vector<double>{0.9, 1.2}), dt));
    bias = register_parameter("bias", cast_copy(from_vector(std::vector<double>{0.1, -0.2}), dt));
  }
  Tensor forward(const Tensor& x, const ForwardContext& ctx) override {
    keys.push_back(ctx.noise_key);
    first_samples.push_back(ctx.first_sample);
    const int64_t c = x.size(1);
    Tensor y = add(mul(x, reshape(scale, {1, c, 1, 1})), reshape(bias, {1, c, 1, 1}));
    RandomWindow window{x.sizes(), Shape(4, 0)};
    window.global_sizes[0] += ctx.first_sample, window.start[0] = ctx.first_sample;
    if (noise_std > 0) y = add(y, mul(randn(x.sizes(), ctx.noise_key, x.dtype(), &window), noise_std));
    return y;
  }
};

Batch make_test_batch(uint64_t stream, DType dt = DType::f64) {
  return {randn({B, C, H, W}, {99, stream}, dt), randn({B, N, C, H, W}, {99, stream + 1}, dt)};
}

// ---- the same computation in plain loops (no autograd)

using Vec = std::vector<double>;

// One model step on x (b, C, H, W) flattened.
Vec ref_step(const Vec& x, int64_t b, const Vec& scale, const Vec& bias) {
  Vec y(x.size());
  for (int64_t i = 0; i < b; ++i)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t p = 0; p < H * W; ++p) {
        const int64_t j = (i * C + c) * H * W + p;
        y[j] = scale[c] * x[j] + bias[c];
      }
  return y;
}

// Area-weighted MSE of pred (b, C, H, W) against step k of targets (b, N, C, H, W).
double ref_mse(const Vec& pred, const Vec& targets, int64_t b, int64_t k) {
  double wsum = 0;
  for (double a : kArea) wsum += a;
  double total = 0;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          const double d = pred[((i * C + c) * H + h) * W + w] - targets[(((i * N + k) * C + c) * H + h) * W + w];
          total += kArea[h] / wsum * d * d / W;
        }
  return total / (b * C);
}

// Per-step losses of the rollout from `input`.
Vec ref_step_losses(const Vec& input, const Vec& targets, const Vec& scale, const Vec& bias) {
  Vec losses;
  Vec x = input;
  for (int64_t k = 0; k < N; ++k) {
    x = ref_step(x, B, scale, bias);
    losses.push_back(ref_mse(x, targets, B, k));
  }
  return losses;
}

// Central differences of f over the 4 parameters (scale0, scale1, bias0, bias1).
template <typename F>
Vec ref_gradient(F f, const Vec& scale, const Vec& bias) {
  Vec g;
  const double h = 1e-6;
  for (int which = 0; which < 4; ++which) {
    Vec sp = scale, sm = scale, bp = bias, bm = bias;
    if (which < 2) sp[which] += h, sm[which] -= h;
    else bp[which - 2] += h, bm[which - 2] -= h;
    g.push_back((f(sp, bp) - f(sm, bm)) / (2 * h));
  }
  return g;
}

Vec grads_of(const ChannelAffine& m) {
  Vec g = m.scale.grad().to_vector<double>();
  for (double v : m.bias.grad().to_vector<double>()) g.push_back(v);
  return g;
}

void check_close(const Vec& got, const Vec& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
  }
}

struct Setup {
  std::shared_ptr<ChannelAffine> model;
  std::shared_ptr<Optimizer> opt;
  std::shared_ptr<Stepper> stepper;
  Setup(StepperOptions o, double noise = 0, std::shared_ptr<LrSchedule> sched = nullptr, DType dt = DType::f64) {
    model = std::make_shared<ChannelAffine>(noise, dt);
    opt = std::make_shared<Adam>(model->named_parameters(), AdamOptions{.lr = 0.01});
    stepper = std::make_shared<Stepper>(model, opt, kArea, o, sched);
  }
};

const Vec kScale{0.9, 1.2}, kBias{0.1, -0.2};

}  // namespace

TEST_CASE("stepper: rollout losses equal the plain-loop sum; gradient of the whole rollout") {
  Batch batch = make_test_batch(1);
  const Vec in = batch.input.to_vector<double>(), tg = batch.targets.to_vector<double>();
  const Vec w{1.0, 0.5, 2.0};
  Setup s({.step_weights = w});
  TrainResult r = s.stepper->compute_gradients(batch);
  const Vec want = ref_step_losses(in, tg, kScale, kBias);
  check_close(r.step_losses, want, 1e-13);
  CHECK(r.loss == doctest::Approx(want[0] + 0.5 * want[1] + 2 * want[2]).epsilon(1e-13));
  CHECK(r.applied);
  // compute_gradients changes no weight and no counter.
  CHECK(s.model->scale.to_vector<double>() == kScale);
  CHECK(s.stepper->global_step() == 0);
  // Gradient flows through the whole rollout (backprop through time).
  auto objective = [&](const Vec& sc, const Vec& bi) {
    Vec l = ref_step_losses(in, tg, sc, bi);
    return l[0] + 0.5 * l[1] + 2 * l[2];
  };
  const Vec g = grads_of(*s.model);
  check_close(g, ref_gradient(objective, kScale, kBias), 1e-6);
  double norm2 = 0;
  for (double v : g) norm2 += v * v;
  CHECK(r.grad_norm == doctest::Approx(std::sqrt(norm2)).epsilon(1e-14));
}

TEST_CASE("stepper: optimize_last_step_only backpropagates only the last loss, earlier steps constant") {
  Batch batch = make_test_batch(3);
  const Vec in = batch.input.to_vector<double>(), tg = batch.targets.to_vector<double>();
  Setup s({.step_weights = {1.0, 1.0, 3.0}, .optimize_last_step_only = true});
  TrainResult r = s.stepper->compute_gradients(batch);
  const Vec want = ref_step_losses(in, tg, kScale, kBias);
  check_close(r.step_losses, want, 1e-13);             // every step reported
  CHECK(r.loss == doctest::Approx(3 * want[2]).epsilon(1e-13));  // only the last optimised
  // The input of the last step is the state after N - 1 steps, held fixed.
  Vec x = in;
  for (int64_t k = 0; k + 1 < N; ++k) x = ref_step(x, B, kScale, kBias);
  auto last_only = [&](const Vec& sc, const Vec& bi) { return 3 * ref_mse(ref_step(x, B, sc, bi), tg, B, N - 1); };
  auto through_time = [&](const Vec& sc, const Vec& bi) { return 3 * ref_step_losses(in, tg, sc, bi)[2]; };
  const Vec g = grads_of(*s.model), want_g = ref_gradient(last_only, kScale, kBias);
  check_close(g, want_g, 1e-6);
  // ... which is not the gradient through time of the same loss (the test can tell them apart).
  const Vec bptt = ref_gradient(through_time, kScale, kBias);
  CHECK(std::abs(bptt[0] - want_g[0]) > 1e-3 * std::abs(want_g[0]));
}

TEST_CASE("stepper: detach_between_steps gives the sum of per-step gradients with detached inputs") {
  Batch batch = make_test_batch(5);
  const Vec in = batch.input.to_vector<double>(), tg = batch.targets.to_vector<double>();
  Setup s({.detach_between_steps = true});
  s.stepper->compute_gradients(batch);
  // Inputs of each step at the current parameters, held fixed.
  std::vector<Vec> xs{in};
  for (int64_t k = 0; k + 1 < N; ++k) xs.push_back(ref_step(xs.back(), B, kScale, kBias));
  auto detached = [&](const Vec& sc, const Vec& bi) {
    double l = 0;
    for (int64_t k = 0; k < N; ++k) l += ref_mse(ref_step(xs[k], B, sc, bi), tg, B, k);
    return l;
  };
  check_close(grads_of(*s.model), ref_gradient(detached, kScale, kBias), 1e-6);
}

TEST_CASE("stepper: 2 micro-batches (uneven 2 + 1) equal one batch of all 3") {
  for (bool last_only : {false, true}) {
    CAPTURE(last_only);
    Batch batch = make_test_batch(7);
    Setup one({.step_weights = {0.5, 1, 1.5}, .optimize_last_step_only = last_only});
    Setup two({.step_weights = {0.5, 1, 1.5}, .optimize_last_step_only = last_only, .micro_batches = 2});
    TrainResult r1 = one.stepper->compute_gradients(batch);
    TrainResult r2 = two.stepper->compute_gradients(batch);
    check_close(r2.step_losses, r1.step_losses, 1e-14);
    CHECK(r2.loss == doctest::Approx(r1.loss).epsilon(1e-14));
    check_close(grads_of(*two.model), grads_of(*one.model), 1e-13);
    // And through a whole optimizer step.
    one.stepper->train_on_batch(batch);
    two.stepper->train_on_batch(batch);
    check_close(two.model->scale.to_vector<double>(), one.model->scale.to_vector<double>(), 1e-13);
    CHECK(two.model->keys.size() == 2 * 2 * N);  // a forward per micro-batch and step, twice
  }
  Setup too_many({.micro_batches = 4});
  CHECK(contains(error_of([&] { too_many.stepper->compute_gradients(make_test_batch(7)); }),
                 "cannot split a batch of 3 into 4 micro-batches"));
}

TEST_CASE("stepper: train_on_batch clips, applies the schedule, steps the optimizer, counts steps") {
  auto sched = std::make_shared<StepLr>(0.1, 1, 0.5);
  Setup s({.clip_grad_norm = 1e-3}, 0, sched);
  Batch batch = make_test_batch(9);
  const uint64_t v0 = s.model->scale.version();
  TrainResult r0 = s.stepper->train_on_batch(batch);
  CHECK(r0.applied);
  CHECK(r0.step == 0);
  CHECK(r0.lr == 0.1);
  CHECK(r0.grad_norm > 1e-2);  // well above the clip: the grads left behind are the clipped ones
  double norm2 = 0;
  for (double v : grads_of(*s.model)) norm2 += v * v;
  CHECK(std::sqrt(norm2) == doctest::Approx(1e-3).epsilon(1e-6));
  CHECK(s.model->scale.version() == v0 + 1);
  CHECK(s.opt->step_count(0) == 1);
  // Adam's first step moves each parameter by ~lr against its gradient's sign.
  CHECK(std::abs(s.model->scale.to_vector<double>()[0] - kScale[0]) == doctest::Approx(0.1).epsilon(1e-3));
  TrainResult r1 = s.stepper->train_on_batch(batch);
  CHECK(r1.step == 1);
  CHECK(r1.lr == 0.05);
  CHECK(s.opt->lr() == 0.05);
  CHECK(s.stepper->global_step() == 2);
  CHECK(sched->lr() == 0.025);

  CHECK(contains(error_of([&] { s.stepper->compute_gradients({batch.input, zeros({B, N, C, H, W + 1}, DType::f64)}); }),
                 "targets must be (B, n >= 1, C, H, W)"));
  Setup weights({.step_weights = {1, 2}});
  CHECK(contains(error_of([&] { weights.stepper->compute_gradients(batch); }), "2 step weights for a rollout of 3"));
  Stepper wrong_grid(s.model, s.opt, {1.0, 1.0});
  CHECK(contains(error_of([&] { wrong_grid.compute_gradients(batch); }), "3 latitudes but the stepper has 2"));
}

TEST_CASE("stepper: predict returns every step of the rollout, equal to repeated forward, without a tape") {
  Setup s({.seed = 5}, /*noise=*/0.1);
  Batch batch = make_test_batch(11);
  Tensor out = s.stepper->predict(batch.input, 4, /*rollout_id=*/2);
  CHECK(out.sizes() == Shape{B, 4, C, H, W});
  CHECK(!out.requires_grad());
  REQUIRE(s.model->keys.size() == 4);
  Tensor x = batch.input;
  for (int64_t k = 0; k < 4; ++k) {
    CAPTURE(k);
    CHECK(s.model->keys[k].stream == stepper_predict_key(5, 2, k).stream);
    CHECK(s.model->keys[k].seed == 5);
    NoGradGuard no_grad;
    ForwardContext ctx;
    ctx.noise_key = stepper_predict_key(5, 2, k);
    x = s.model->forward(x, ctx);
    CHECK(select(out, 1, k).to_vector<double>() == x.to_vector<double>());
  }
  CHECK(contains(error_of([&] { s.stepper->predict(batch.input, 0); }), "n_steps >= 1"));
}

TEST_CASE("stepper: a non-finite loss changes nothing and says which step") {
  Batch batch = make_test_batch(13);
  {
    // An infinity in the target of rollout step 1 (a NaN would be a missing value: masked).
    NoGradGuard no_grad;
    select(select(batch.targets, 1, 1), 0, 2).data<double>()[0] = std::numeric_limits<double>::infinity();
  }
  Setup s({});
  const StateDict opt_before = s.opt->state();
  const uint64_t v0 = s.model->scale.version();
  const std::string err = error_of([&] { s.stepper->train_on_batch(batch); });
  CHECK(contains(err, "step 0: the loss of rollout step 1 (micro-batch 0) is inf"));
  CHECK(contains(err, "not applied"));
  CHECK(s.model->scale.to_vector<double>() == kScale);
  CHECK(s.model->scale.version() == v0);
  CHECK(!s.model->scale.grad().defined());  // no partial gradient left behind
  CHECK(s.opt->step_count(0) == 0);
  CHECK(s.stepper->global_step() == 0);

  Setup quiet({.micro_batches = 2, .throw_on_nonfinite = false});
  TrainResult r = quiet.stepper->train_on_batch(batch);
  CHECK(!r.applied);
  CHECK(std::isnan(r.grad_norm));
  CHECK(contains(r.report, "rollout step 1 (micro-batch 1)"));  // sample 2 is in the second micro-batch
  CHECK(quiet.model->scale.to_vector<double>() == kScale);
  CHECK(quiet.stepper->global_step() == 0);
  // A good batch afterwards trains normally, as step 0.
  TrainResult ok = quiet.stepper->train_on_batch(make_test_batch(15));
  CHECK(ok.applied);
  CHECK(ok.step == 0);
  CHECK(quiet.stepper->global_step() == 1);
}

TEST_CASE("stepper: noise keys come from (seed, step, rollout step) and the first sample; a resume is bitwise") {
  std::set<uint64_t> streams;
  for (int64_t step = 0; step < 3; ++step)
    for (int64_t k = 0; k < 3; ++k) {
      RandomKey key = stepper_noise_key(42, step, k);
      CHECK(key.seed == 42);
      CHECK(key.stream == stepper_noise_key(42, step, k).stream);
      streams.insert(key.stream);
      streams.insert(stepper_predict_key(42, step, k).stream);
    }
  CHECK(streams.size() == 9 + 9);  // all distinct, training and predict keys never collide

  const StepperOptions o{.micro_batches = 2, .seed = 42};
  auto sched = [] { return std::make_shared<WarmupCosineLr>(WarmupCosineOptions{.base_lr = 0.02, .warmup_steps = 2, .total_steps = 10}); };
  Setup a(o, /*noise=*/0.05, sched());
  std::vector<Batch> batches;
  for (int i = 0; i < 5; ++i) batches.push_back(make_test_batch(100 + 2 * i));
  for (int i = 0; i < 2; ++i) a.stepper->train_on_batch(batches[i]);
  // The keys the model saw: step 0 then step 1, micro-batch-major, rollout step-minor; each
  // micro-batch with the step's key and its first sample.
  REQUIRE(a.model->keys.size() == 2 * 2 * N);
  size_t idx = 0;
  for (int64_t step = 0; step < 2; ++step)
    for (int64_t mb = 0; mb < 2; ++mb)
      for (int64_t k = 0; k < N; ++k) {
        CHECK(a.model->first_samples[idx] == mb * 2);  // batches of 3 in micro-batches of 2 and 1
        CHECK(a.model->keys[idx++].stream == stepper_noise_key(42, step, k).stream);
      }

  // Checkpoint: model weights (copied) and the training state; then carry on.
  StateDict weights;
  for (auto& [name, t] : a.model->state_dict()) weights[name] = contiguous_copy(t, /*force_copy=*/true);
  const StateDict training = a.stepper->training_state();
  CHECK(training.at("stepper.global_step").item<int64_t>() == 2);
  CHECK(training.count("optimizer.exp_avg.scale"));
  CHECK(training.count("schedule.warmup_cosine.step"));
  std::vector<TrainResult> ra;
  for (int i = 2; i < 5; ++i) ra.push_back(a.stepper->train_on_batch(batches[i]));

  Setup b(o, 0.05, sched());
  b.model->load_state_dict(weights);
  b.stepper->load_training_state(training);
  for (int i = 2; i < 5; ++i) {
    TrainResult rb = b.stepper->train_on_batch(batches[i]);
    CHECK(rb.step == ra[i - 2].step);
    CHECK(rb.loss == ra[i - 2].loss);
    CHECK(rb.lr == ra[i - 2].lr);
  }
  CHECK(b.model->scale.to_vector<double>() == a.model->scale.to_vector<double>());
  CHECK(b.model->bias.to_vector<double>() == a.model->bias.to_vector<double>());

  // A stepper without a schedule refuses a state that has one (and changes nothing).
  Setup c(o, 0.05);
  const std::string err = error_of([&] { c.stepper->load_training_state(training); });
  CHECK(contains(err, "unexpected keys [schedule.warmup_cosine.step]"));
  CHECK(c.stepper->global_step() == 0);
  // A broken schedule part leaves the optimizer as it was.
  StateDict broken = training;
  broken.erase("schedule.warmup_cosine.step");
  Setup d(o, 0.05, sched());
  CHECK(contains(error_of([&] { d.stepper->load_training_state(broken); }), "missing keys [warmup_cosine.step]"));
  CHECK(d.opt->step_count(0) == 0);
  // A broken optimizer part puts the schedule back as it was.
  StateDict broken_opt = training;
  broken_opt["optimizer.exp_avg.bias"] = zeros({3}, DType::f64);
  CHECK(contains(error_of([&] { d.stepper->load_training_state(broken_opt); }), "'exp_avg.bias' expects f64 (2,)"));
  auto* dsched = dynamic_cast<WarmupCosineLr*>(d.stepper->schedule());
  REQUIRE(dsched != nullptr);
  CHECK(dsched->steps() == 0);
  CHECK(d.opt->step_count(0) == 0);
  CHECK(d.stepper->global_step() == 0);
}

TEST_CASE("stepper: f32 batches and weights train and report finite values") {
  Setup s({.step_weights = {1, 1, 1}}, 0, nullptr, DType::f32);
  Batch batch = make_test_batch(21, DType::f32);
  Batch b64{cast_copy(batch.input, DType::f64), cast_copy(batch.targets, DType::f64)};
  Setup ref({.step_weights = {1, 1, 1}});
  TrainResult r = s.stepper->train_on_batch(batch);
  TrainResult r64 = ref.stepper->train_on_batch(b64);
  check_close(r.step_losses, r64.step_losses, 1e-5);
  check_close(s.model->scale.to_vector<double>(), ref.model->scale.to_vector<double>(), 1e-5);
}

TEST_CASE("stepper: ensemble members draw their own noise keys, roll out their own states and train the CRPS") {
  StepperOptions o{.seed = 7};
  o.ensemble_members = 3;
  o.loss = LossTerms{.mse = 0.2, .crps = 1, .crps_alpha = 0.95};
  Setup s(o, 0.3);
  Batch batch = make_test_batch(31);
  const TrainResult r = s.stepper->compute_gradients(batch);
  REQUIRE(s.model->keys.size() == static_cast<size_t>(3 * N));
  for (int64_t k = 0; k < N; ++k)
    for (int64_t m = 0; m < 3; ++m) CHECK(s.model->keys[k * 3 + m].stream == stepper_noise_key(7, 0, k, m).stream);
  CHECK(stepper_noise_key(7, 0, 1, 0).stream == stepper_noise_key(7, 0, 1).stream);  // member 0 = deterministic key
  CHECK(stepper_noise_key(7, 0, 1, 1).stream != stepper_noise_key(7, 0, 1).stream);

  // The same rollout by hand: each member feeds back its own prediction.
  double expected = 0;
  {
    NoGradGuard ng;
    ChannelAffine copy(0.3);
    std::vector<Tensor> states(3, batch.input);
    const Tensor aw = from_vector(kArea);
    for (int64_t k = 0; k < N; ++k) {
      for (int64_t m = 0; m < 3; ++m) states[m] = copy.forward(states[m], {stepper_noise_key(7, 0, k, m), {}, 0});
      expected += ensemble_step_loss(states, select(batch.targets, 1, k), o.loss, {kArea, 0, {}}, aw, {}).item<double>();
    }
  }
  CHECK(r.loss == doctest::Approx(expected).epsilon(1e-14));

  // Gradients against central differences of the loss (the noise is keyed, so the loss is a function).
  std::vector<Tensor> params{s.model->scale, s.model->bias};
  std::vector<std::vector<double>> grads;
  for (const Tensor& p : params) grads.push_back(p.grad().to_vector<double>());
  for (size_t i = 0; i < params.size(); ++i)
    for (int64_t c = 0; c < C; ++c) {
      auto loss_at = [&](double delta) {
        {
          NoGradGuard ng;
          double* v = params[i].data<double>();
          v[c] += delta;
        }
        const double l = s.stepper->compute_gradients(batch).loss;
        NoGradGuard ng;
        params[i].data<double>()[c] -= delta;
        return l;
      };
      const double h = 1e-6, fd = (loss_at(h) - loss_at(-h)) / (2 * h);
      CHECK(grads[i][c] == doctest::Approx(fd).epsilon(1e-6));
    }
}

TEST_CASE("stepper: ensemble training is the same in micro-batches, with and without missing values") {
  for (bool with_nan : {false, true}) {
    CAPTURE(with_nan);
    Batch batch = make_test_batch(41);
    if (with_nan) {
      NoGradGuard ng;
      batch.targets.data<double>()[7] = NAN;
      batch.targets.data<double>()[(2 * N + 1) * C * H * W + 5] = NAN;
    }
    auto run = [&](int64_t micro) {
      StepperOptions o{.micro_batches = micro, .seed = 3};
      o.ensemble_members = 2;
      o.loss = LossTerms{.mse = 0.5, .crps = 1, .crps_alpha = 1.0};
      Setup s(o, 0.2);
      const TrainResult r = s.stepper->compute_gradients(batch);
      return std::pair{r, std::vector<Vec>{s.model->scale.grad().to_vector<double>(), s.model->bias.grad().to_vector<double>()}};
    };
    const auto [whole, gw] = run(1);
    const auto [split, gs3] = run(3);
    REQUIRE(std::isfinite(whole.loss));
    CHECK(split.loss == doctest::Approx(whole.loss).epsilon(1e-13));
    for (size_t i = 0; i < gw.size(); ++i) check_close(gs3[i], gw[i], 1e-12);
  }
}
