// training.activation_checkpointing (models/stepper.h): blocks replayed in backward, and ACE's
// rollout steps after N, give the same losses and gradients as no checkpointing, with the noise of
// NoiseConditionedSFNO and SFNO's dropout replayed exactly (Philox keys).
#include <doctest/doctest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "engine/factory.h"
#include "engine/random.h"
#include "models/noise_sfno.h"
#include "models/optim.h"
#include "models/sfno.h"
#include "models/stepper.h"
#include "tests/models/net_test_util.h"

using namespace gs;
using namespace gs::models;

namespace {

using Mode = ActivationCheckpointing::Mode;

std::shared_ptr<Model> make_net(bool noise_model) {
  if (noise_model) {
    NoiseSfnoOptions o;
    o.img_shape = {4, 8};
    o.in_chans = 2, o.out_chans = 2;
    o.embed_dim = 3, o.noise_embed_dim = 2, o.num_layers = 2;
    o.dtype = DType::f64, o.seed = 3;
    auto m = std::make_shared<NoiseConditionedSFNO>(o);
    gs_test::randomize(*m, 4);  // non-zero conditional norms: the noise matters
    return m;
  }
  SfnoOptions o;
  o.img_size = {6, 12};
  o.in_chans = 2, o.out_chans = 2, o.embed_dim = 4, o.num_layers = 3;
  o.drop_rate = 0.3, o.drop_path_rate = 0.4;  // dropout in every block, replayed with its keys
  o.dtype = DType::f64;
  auto m = std::make_shared<SFNO>(o);
  gs_test::randomize(*m, 5);
  return m;
}

struct Run {
  TrainResult result;
  std::vector<std::vector<double>> grads;
};

Run run(bool noise_model, ActivationCheckpointing ac) {
  auto model = make_net(noise_model);
  model->train();
  auto opt = std::make_shared<Adam>(model->named_parameters(), AdamOptions{.lr = 0.01});
  StepperOptions so;
  so.ensemble_members = 2;
  so.loss.mse = 0.5, so.loss.crps = 1;
  so.seed = 11;
  so.activation_checkpointing = ac;
  const int64_t H = noise_model ? 4 : 6, W = noise_model ? 8 : 12;
  std::vector<double> area(static_cast<size_t>(H));
  for (int64_t i = 0; i < H; ++i) area[static_cast<size_t>(i)] = std::sin(M_PI * (i + 0.5) / H);
  Stepper stepper(model, opt, area, so);
  Batch batch{randn({2, 2, H, W}, {5, 1}, DType::f64), randn({2, 3, 2, H, W}, {5, 2}, DType::f64)};
  Run r;
  r.result = stepper.compute_gradients(batch);
  for (const auto& p : model->named_parameters())
    r.grads.push_back(p.tensor.grad().defined() ? p.tensor.grad().to_vector<double>() : std::vector<double>{});
  return r;
}

}  // namespace

TEST_CASE("activation checkpointing: blocks and rollout steps after N give the gradients of no checkpointing") {
  for (bool noise_model : {true, false}) {
    CAPTURE(noise_model);
    const Run plain = run(noise_model, {});
    REQUIRE(plain.result.applied);
    for (ActivationCheckpointing ac : {ActivationCheckpointing{Mode::blocks, 0},
                                       ActivationCheckpointing{Mode::rollout_steps_after, 1},
                                       ActivationCheckpointing{Mode::rollout_steps_after, 0}}) {
      CAPTURE(static_cast<int>(ac.mode));
      CAPTURE(ac.after);
      const Run ck = run(noise_model, ac);
      REQUIRE(ck.result.applied);
      CHECK(ck.result.loss == plain.result.loss);  // the same forward arithmetic
      REQUIRE(ck.grads.size() == plain.grads.size());
      double worst = 0, scale = 0;
      for (size_t p = 0; p < plain.grads.size(); ++p) {
        REQUIRE(ck.grads[p].size() == plain.grads[p].size());
        for (size_t i = 0; i < plain.grads[p].size(); ++i) {
          worst = std::max(worst, std::abs(ck.grads[p][i] - plain.grads[p][i]));
          scale = std::max(scale, std::abs(plain.grads[p][i]));
        }
      }
      CHECK(scale > 0);
      // The replayed values are the first run's bit for bit; only the order in which the engine
      // sums gradients may change where the graph's shape changed.
      CHECK(worst <= 1e-14 * scale);
    }
  }
}
