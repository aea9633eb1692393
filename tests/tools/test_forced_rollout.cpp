// Forced inference (tools/forced_rollout.h): a 200-step rollout of a role-aware model trained for a
// step on the forced shallow-water data, from a file in the noleap calendar. The predictions
// streamed to NetCDF equal the stepper's own rollout, their times follow the file's calendar, and
// the metrics files equal a recomputation from the predictions and the truth.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "models/checkpoint.h"
#include "models/data/netcdf_io.h"
#include "models/sharded_state.h"
#include "ops/ops.h"
#include "ops/sphere/grids.h"
#include "tests/test_util.h"
#include "tools/forced_rollout.h"
#include "tools/inference_metrics.h"
#include "tools/train_run.h"
#include "tools/validation.h"

using namespace gs;
using namespace gs::tools;
using gs_test::contains;
using gs_test::error_of;
namespace fs = std::filesystem;

namespace {

const char* kConfig = R"(seed: 3
data:
  source: swe
  dtype: f64
  variables:
    prognostic: [geopotential, vorticity, divergence]
    forcing: [mass_source]
    diagnostic: [wind_speed]
  swe:
    grid: legendre-gauss
    nlat: 8
    nlon: 16
    dt_hours: 6
    train_trajectories: 1
    validation_trajectories: 1
    states_per_trajectory: 205
    spinup_hours: 0
    forcing: true
model:
  embed_dim: 4
  num_layers: 1
  scale_factor: 1
training:
  steps: 2
  batch_size: 2
  rollout_steps: 1
  residual_prediction: true
validation:
  samples: 1
  lead_steps: 1
)";

std::vector<std::vector<std::string>> read_csv(const fs::path& p) {
  std::ifstream in(p);
  REQUIRE_MESSAGE(in, p.string());
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> row;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) row.push_back(cell);
    rows.push_back(row);
  }
  return rows;
}

// The area-weighted (cos-lat, normalised) mean of a (H, W) field given as a flat vector.
double area_mean(const std::vector<double>& f, const std::vector<double>& area, int64_t H, int64_t W) {
  double s = 0, wsum = 0;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t w = 0; w < W; ++w) s += area[h] * f[h * W + w], wsum += area[h];
  return s / wsum;
}

models::NetcdfReadOptions f64_read() {
  models::NetcdfReadOptions o;
  o.dtype = DType::f64;
  return o;
}

ForcedRolloutArgs rollout_of(const fs::path& ckpt, const fs::path& data, int64_t steps, int64_t start,
                             const fs::path& out) {
  ForcedRolloutArgs a;
  a.checkpoint = ckpt.string();
  a.data = {data.string()};
  a.steps = steps;
  a.start = start;
  a.out = out.string();
  return a;
}

}  // namespace

TEST_CASE("forced rollout: 200 steps streamed in the file's calendar, equal to the stepper's, metrics recomputed") {
  gs_test::TempDir dir("forced");
  const TrainConfig cfg = train_config_from_string(kConfig, "forced.yaml");
  TrainingRun run(cfg, {}, dir.path / "data");
  run.train_step();
  const fs::path ckpt = dir.path / "ckpt.safetensors";
  models::save_checkpoint(ckpt, run.checkpoint());
  // The validation set again, in the noleap calendar from 2000-02-20 (2000 is a leap year elsewhere).
  models::TrajectoryData val = models::read_netcdf(dir.path / "data" / "swe_validation.nc", f64_read());
  const fs::path noleap = dir.path / "noleap.nc";
  models::NetcdfWriteOptions noleap_from;
  noleap_from.reference_time = "2000-02-20 00:00:00";
  noleap_from.calendar = "noleap";
  models::write_netcdf(noleap, val, noleap_from);

  const int64_t steps = 200, start = 2;
  const fs::path out = dir.path / "out";
  run_forced_rollout(rollout_of(ckpt, noleap, steps, start, out));

  // The predictions file: the predicted channels, 200 states, the file's calendar and units.
  const models::TrajectoryData pred = models::read_netcdf(out / "predictions.nc", f64_read());
  const auto pinfo = models::open_netcdf({out / "predictions.nc"}, f64_read())->info();
  CHECK(pred.variables == std::vector<std::string>{"geopotential", "vorticity", "divergence", "wind_speed"});
  REQUIRE(pred.trajectories.size() == 1);
  REQUIRE(pred.trajectories[0].size(0) == steps);
  CHECK(pinfo.calendar == "noleap");
  CHECK(pinfo.time_units == "hours since 2000-02-20 00:00:00");
  REQUIRE(pinfo.start_times.size() == 1);
  CHECK(pinfo.start_times[0] == 6.0 * (start + 1));

  // The stepper's own rollout over the same data, normalised as the checkpoint says.
  const models::Checkpoint ck = models::load_checkpoint(ckpt);
  const models::Normalizer norm = normalizer_from_string(ck.metadata.at(kMetaNormalizer));
  const auto source = open_data_files(cfg, {noleap.string()});
  const models::TrajectoryInfo& info = source->info();
  auto model = build_model(cfg, info);
  model->load_state_dict(models::local_state_dict(ck.model, *model, {}));
  model->eval();
  models::StepperOptions so = cfg.training.stepper;
  so.layout = info.layout();
  const auto area = sphere::area_weights_coslat(info.grid, info.nlat);
  models::Stepper stepper(model, build_optimizer(cfg, *model), area, so);
  const Tensor input = norm.normalize(source->read(0, start, 1));
  const Tensor later = unsqueeze(norm.normalize(source->read(0, start + 1, steps)), 0);
  const Tensor expect = output_normalizer(norm, info.layout()).denormalize(select(stepper.predict(input, steps, 0, 0, later), 0, 0));
  const double scale = max(abs(expect)).item<double>();
  CHECK(max(abs(sub(pred.trajectories[0], expect))).item<double>() <= 1e-12 * scale);

  // global_means.csv: dates in the noleap calendar (Feb 28 is followed by Mar 1), the area-weighted
  // means of the prediction and of the truth per step.
  const auto rows = read_csv(out / "global_means.csv");
  REQUIRE(rows.size() == static_cast<size_t>(steps + 1));
  CHECK(rows[0][0] == "step");
  CHECK(rows[1][2] == "2000-02-20 18:00:00");
  CHECK(rows[33][2] == "2000-02-28 18:00:00");
  CHECK(rows[34][2] == "2000-03-01 00:00:00");
  const Tensor truth = output_channels(source->read(0, start + 1, steps), info.layout());  // (200, 4, H, W)
  const int64_t H = info.nlat, W = info.nlon;
  std::vector<std::vector<double>> tm_bias(4, std::vector<double>(static_cast<size_t>(H * W), 0.0));
  for (int64_t k = 0; k < steps; ++k)
    for (int64_t c = 0; c < 4; ++c) {
      const auto p = select(select(pred.trajectories[0], 0, k), 0, c).to_vector<double>();
      const auto t = select(select(truth, 0, k), 0, c).to_vector<double>();
      CHECK(std::stod(rows[static_cast<size_t>(k + 1)][3 + 2 * c]) ==
            doctest::Approx(area_mean(p, area, H, W)).epsilon(1e-8));
      CHECK(std::stod(rows[static_cast<size_t>(k + 1)][4 + 2 * c]) ==
            doctest::Approx(area_mean(t, area, H, W)).epsilon(1e-8));
      for (size_t i = 0; i < p.size(); ++i) tm_bias[c][i] += (p[i] - t[i]) / static_cast<double>(steps);
    }
  // inference_metrics.csv: the RMSE of the time mean and the global-mean bias.
  const auto metrics = read_csv(out / "inference_metrics.csv");
  REQUIRE(metrics.size() == 5);
  for (int64_t c = 0; c < 4; ++c) {
    CAPTURE(c);
    std::vector<double> sq(tm_bias[c].size());
    for (size_t i = 0; i < sq.size(); ++i) sq[i] = tm_bias[c][i] * tm_bias[c][i];
    CHECK(metrics[static_cast<size_t>(c + 1)][0] == pred.variables[static_cast<size_t>(c)]);
    CHECK(std::stod(metrics[static_cast<size_t>(c + 1)][2]) == doctest::Approx(std::sqrt(area_mean(sq, area, H, W))).epsilon(1e-7));
    const double bias = area_mean(tm_bias[c], area, H, W);
    CHECK(std::stod(metrics[static_cast<size_t>(c + 1)][3]) == doctest::Approx(bias).epsilon(1e-6).scale(1e-300));
  }
  for (const char* v : {"geopotential", "wind_speed"}) {
    CHECK(fs::exists(out / "global_means" / (std::string(v) + ".png")));
    CHECK(fs::exists(out / "time_mean_bias" / (std::string(v) + ".png")));
  }

  // Bad requests: past the data's end, no steps.
  const std::string e = error_of([&] {
    run_forced_rollout(rollout_of(ckpt, noleap, 203, 2, dir.path / "bad"));
  });
  CHECK(contains(e, "203 steps from state 2 need states 2..205"));
  CHECK(contains(e, "has 205 states"));
  CHECK_FALSE(fs::exists(dir.path / "bad" / "predictions.nc"));
}

TEST_CASE("forced rollout: a NoiseConditionedSFNO takes the roles too (in != out channels)") {
  gs_test::TempDir dir("forced-noise");
  std::string text = kConfig;
  text.replace(text.find("model:\n  embed_dim: 4\n  num_layers: 1\n  scale_factor: 1\n"),
               std::string("model:\n  embed_dim: 4\n  num_layers: 1\n  scale_factor: 1\n").size(),
               "model:\n  type: noise_sfno\n  embed_dim: 4\n  noise_embed_dim: 2\n  num_layers: 1\n");
  const TrainConfig cfg = train_config_from_string(text, "noise.yaml");
  TrainingRun run(cfg, {}, dir.path / "data");
  const models::TrainResult r = run.train_step();
  CHECK(r.applied);
  CHECK(std::isfinite(r.loss));
  CHECK(run.model().type_name() == "NoiseConditionedSFNO");
  const ValidationScores s = run.validate();
  CHECK(s.variables == std::vector<std::string>{"geopotential", "vorticity", "divergence", "wind_speed"});
  CHECK(s.prediction.size(2) == 4);
}

TEST_CASE("inference metrics: masked global means, time means over the steps with values, bias and its RMSE") {
  // One channel on a 2x2 grid, area weights 1 and 3 (rows), two steps; the truth misses one point at step 1.
  const std::vector<double> area{1.0, 3.0};
  InferenceMetrics m({"x"}, area, 2, {});
  const Tensor p0 = reshape(from_vector(std::vector<double>{1, 2, 3, 4}), {1, 2, 2});
  const Tensor t0 = reshape(from_vector(std::vector<double>{0, 2, 2, 4}), {1, 2, 2});
  const Tensor p1 = reshape(from_vector(std::vector<double>{3, 2, 1, 0}), {1, 2, 2});
  const Tensor t1 = reshape(from_vector(std::vector<double>{1, NAN, 1, 1}), {1, 2, 2});
  m.add(p0, t0);
  m.add(p1, t1);
  const InferenceMetrics::Result r = m.finish();
  // Step 0: (1*(1+2)/2 + 3*(3+4)/2) / 4 = (1.5 + 10.5) / 4 = 3 and truth (1 + 9) / 4 = 2.5.
  CHECK(r.mean_prediction[0][0] == doctest::Approx(3.0));
  CHECK(r.mean_truth[0][0] == doctest::Approx(2.5));
  // Step 1, the missing point left out: weights 1/2 (row 0, one point), 3/2 and 3/2 (row 1).
  CHECK(r.mean_prediction[1][0] == doctest::Approx((0.5 * 3 + 1.5 * 1 + 1.5 * 0) / 3.5));
  CHECK(r.mean_truth[1][0] == doctest::Approx((0.5 * 1 + 1.5 * 1 + 1.5 * 1) / 3.5));
  // Time means: point (0,1) has one step with a truth: prediction 2 and truth 2 there.
  const std::vector<double> bias = r.bias.to_vector<double>();  // (1, 2, 2)
  CHECK(bias == std::vector<double>{(1 + 3) / 2.0 - (0 + 1) / 2.0, 0.0, (3 + 1) / 2.0 - (2 + 1) / 2.0,
                                    (4 + 0) / 2.0 - (4 + 1) / 2.0});
  // Point weights 1/2 (row 0) and 3/2 (row 1), summing to 4.
  const double mean_bias = (0.5 * (1.5 + 0.0) + 1.5 * (0.5 - 0.5)) / 4.0;
  CHECK(r.global_mean_bias[0] == doctest::Approx(mean_bias));
  const double rms = std::sqrt((0.5 * (1.5 * 1.5 + 0.0) + 1.5 * (0.25 + 0.25)) / 4.0);
  CHECK(r.rmse_of_time_mean[0] == doctest::Approx(rms));
  CHECK(contains(error_of([&] { m.add(p0, reshape(t0, {1, 4, 1})); }), "alike"));
}
