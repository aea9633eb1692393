// The training configuration schema (tools/train_config.h) and the deterministic batch order
// (tools/train_setup.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <set>

#include "tests/test_util.h"
#include "tools/train_config.h"
#include "tools/train_setup.h"

using namespace gs;
using namespace gs::tools;
using gs_test::contains;
using gs_test::error_of;

namespace {
const std::string kMinimal = "seed: 5\ntraining:\n  steps: 10\n";
}

TEST_CASE("train config: the shipped default parses to the documented values") {
  TrainConfig c = load_train_config(std::string(GS_SOURCE_ROOT) + "/tools/configs/swe_small.yaml");
  CHECK(c.data.source == "swe");
  CHECK(c.data.swe.grid == sphere::GridKind::legendre_gauss);
  CHECK(c.data.swe.nlat == 32);
  CHECK(c.data.swe.nlon == 64);
  CHECK(c.model.type == "sfno");
  CHECK(c.model.sfno.embed_dim == 32);
  CHECK(c.model.sfno.residual_prediction);
  CHECK(c.optimizer.type == "adam");
  CHECK(c.optimizer.adam.lr == doctest::Approx(2e-3));
  CHECK(c.schedule.type == "warmup_cosine");
  CHECK(c.training.rollout_steps == 2);
  CHECK(c.validation.lead_steps == 4);
  CHECK(c.data.swe.dt_hours * static_cast<double>(c.validation.lead_steps) == 24.0);
  CHECK(contains(c.text, "embed_dim: 32"));
}

TEST_CASE("train config: defaults and propagated settings") {
  TrainConfig c = train_config_from_string(kMinimal, "minimal.yaml");
  CHECK(c.seed == 5);
  CHECK(c.training.steps == 10);
  CHECK(c.model.sfno.seed == 5);
  CHECK(c.training.stepper.seed == 5);
  CHECK_FALSE(c.training.stepper.throw_on_nonfinite);  // the loop reports divergence itself
  CHECK(c.optimizer.adam.weight_decay == 0.0);
  TrainConfig w = train_config_from_string("optimizer:\n  type: adamw\n", "w.yaml");
  CHECK(w.optimizer.adam.weight_decay == doctest::Approx(1e-2));  // torch's AdamW default
  TrainConfig d = train_config_from_string("data:\n  dtype: f64\n", "d.yaml");
  CHECK(d.model.sfno.dtype == DType::f64);
  CHECK(d.data.swe.dtype == DType::f64);
  CHECK(c.model.sfno.fold_encoder_decoder);  // on unless the model section turns it off
  TrainConfig plain = train_config_from_string("model:\n  fold_encoder_decoder: false\n", "plain.yaml");
  CHECK_FALSE(plain.model.sfno.fold_encoder_decoder);
}

TEST_CASE("train config: errors name the key and what is accepted") {
  auto err = [](const std::string& text) { return error_of([&] { train_config_from_string(text, "bad.yaml"); }); };
  std::string e = err("model:\n  embed_dimm: 8\n");
  CHECK(contains(e, "embed_dimm"));
  CHECK(contains(e, "embed_dim"));  // the suggestion
  e = err("training:\n  batch_size: two\n");
  CHECK(contains(e, "training.batch_size"));
  e = err("training:\n  batch_size: 0\n");
  CHECK(contains(e, "training.batch_size"));
  e = err("optimizer:\n  type: lamb\n");
  CHECK(contains(e, "optimizer.type"));
  CHECK(contains(e, "adamw"));
  e = err("training:\n  rollout_steps: 2\n  step_weights: [1, 2, 3]\n");
  CHECK(contains(e, "one weight per rollout step (2), got 3"));
  e = err("data:\n  source: swe\n  netcdf:\n    train_files: [a.nc]\n    validation_files: [b.nc]\n");
  CHECK(contains(e, "data.netcdf is given but data.source is 'swe'"));
  e = err("data:\n  swe:\n    seed: 4\n    validation_seed: 4\n");
  CHECK(contains(e, "validation_seed must differ"));
  e = err("training:\n  batch_size: 2\n  micro_batches: 3\n");
  CHECK(contains(e, "micro_batches"));
  // An optimizer key of another optimizer type is unknown for this one.
  e = err("optimizer:\n  type: sgd\n  betas: [0.9, 0.99]\n");
  CHECK(contains(e, "betas"));
}

TEST_CASE("batch_windows: a permutation per epoch, a function of (seed, step) only") {
  std::vector<Window> windows;
  for (int64_t i = 0; i < 10; ++i) windows.emplace_back(i / 5, i % 5);
  const int64_t batch = 4;
  // Steps 0..4 cover two epochs of 10 windows (20 draws): each window exactly twice.
  std::multiset<Window> seen;
  for (int64_t step = 0; step < 5; ++step)
    for (auto w : batch_windows(windows, batch, /*seed=*/7, step)) seen.insert(w);
  for (auto w : windows) CHECK(seen.count(w) == 2);
  // The same (seed, step) gives the same batch; another seed another order.
  CHECK(batch_windows(windows, batch, 7, 3) == batch_windows(windows, batch, 7, 3));
  bool any_differs = false;
  for (int64_t step = 0; step < 5; ++step)
    any_differs |= batch_windows(windows, batch, 7, step) != batch_windows(windows, batch, 8, step);
  CHECK(any_differs);
  // The first epoch is not the identity order (it is shuffled).
  std::vector<Window> first;
  for (int64_t step = 0; step < 2; ++step)
    for (auto w : batch_windows(windows, 5, 7, step)) first.push_back(w);
  CHECK(first != windows);
  CHECK(contains(error_of([&] { batch_windows({}, 2, 0, 0); }), "expected windows"));
}

TEST_CASE("normaliser metadata round trips exactly") {
  models::Normalizer n{{1.0 / 3.0, -2.5e10, 0.0}, {7.0e-7, 1.0, 123.456}};
  auto back = normalizer_from_string(normalizer_to_string(n));
  CHECK(back.mean == n.mean);
  CHECK(back.std == n.std);
  CHECK(contains(error_of([] { normalizer_from_string("mean=1,x;std=2,3"); }), "'x' is not a number"));
  CHECK(contains(error_of([] { normalizer_from_string("mean=1;std=2,3"); }), "as many means"));
}

TEST_CASE("train config: ensemble members and the ensemble losses") {
  const std::string noise = "model:\n  type: noise_sfno\n";
  TrainConfig c = train_config_from_string(noise + "training:\n  ensemble_members: 4\nloss:\n  type: crps\n  crps_alpha: 0.95\n",
                                           "crps.yaml");
  CHECK(c.training.stepper.ensemble_members == 4);
  CHECK(c.training.stepper.loss.crps == 1);
  CHECK(c.training.stepper.loss.mse == 0);
  CHECK(c.training.stepper.loss.crps_alpha == 0.95);
  c = train_config_from_string(
      noise + "training:\n  ensemble_members: 2\nloss:\n  type: mix\n  mix: {mse: 0.1, crps: 1, energy_score: 0.5}\n", "mix.yaml");
  CHECK(c.training.stepper.loss.str() == "mse 0.1 + crps 1 (alpha 1) + energy_score 0.5");
  c = train_config_from_string(kMinimal, "minimal.yaml");
  CHECK(c.training.stepper.ensemble_members == 1);
  CHECK(c.training.stepper.loss.plain_mse());

  auto err = [&](const std::string& text) { return error_of([&] { train_config_from_string(text, "bad.yaml"); }); };
  CHECK(contains(err(noise + "loss:\n  type: crps\n"), "crps needs an ensemble of at least 2 members"));
  CHECK(contains(err(noise + "loss:\n  type: energy_score\n"), "got ensemble_members 1"));
  CHECK(contains(err(noise + "training:\n  ensemble_members: 0\n"), "ensemble_members"));
  CHECK(contains(err("training:\n  ensemble_members: 3\nloss:\n  type: crps\n"), "need a stochastic model"));
  CHECK(contains(err(noise + "training:\n  ensemble_members: 2\nloss:\n  type: mix\n"), "mix"));
  CHECK(contains(err(noise + "training:\n  ensemble_members: 2\nloss:\n  type: mix\n  mix: {crps: 0}\n"), "got all 0"));
  CHECK(contains(err(noise + "training:\n  ensemble_members: 2\nloss:\n  type: crps\n  mix: {crps: 1}\n"),
                 "set type: mix"));
  CHECK(contains(err(noise + "loss:\n  type: crsp\n"), "crps"));
  CHECK(contains(err(noise + "training:\n  ensemble_members: 2\nloss:\n  type: crps\n  crps_alpha: 2\n"), "crps_alpha"));
  CHECK(contains(err(noise + "training:\n  ensemble_members: 2\nloss:\n  type: mix\n  mix: {crps: 1, mae: 1}\n"), "mae"));
}

TEST_CASE("train config: training.activation_checkpointing (none, blocks, rollout steps after N)") {
  using Mode = models::ActivationCheckpointing::Mode;
  auto parse = [](const std::string& value) {
    return train_config_from_string("training:\n  activation_checkpointing: " + value + "\n", "ac.yaml")
        .training.stepper.activation_checkpointing;
  };
  CHECK(train_config_from_string(kMinimal, "minimal.yaml").training.stepper.activation_checkpointing.mode ==
        Mode::none);
  CHECK(parse("none").mode == Mode::none);
  CHECK(parse("blocks").mode == Mode::blocks);
  const auto after = parse("{rollout_steps_after: 2}");
  CHECK(after.mode == Mode::rollout_steps_after);
  CHECK(after.after == 2);
  std::string e = error_of([&] { parse("block"); });
  CHECK(contains(e, "blocks"));
  CHECK(contains(e, "{rollout_steps_after: N}"));
  e = error_of([&] { parse("{rollout_steps_after: -1}"); });
  CHECK(contains(e, "rollout_steps_after"));
  e = error_of([&] { parse("{after: 2}"); });
  CHECK(contains(e, "rollout_steps_after"));
}
