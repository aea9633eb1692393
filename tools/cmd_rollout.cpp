// `gradsphere rollout CHECKPOINT [--steps N] [--samples K] [--out DIR]`: inference from a training
// checkpoint. The checkpoint carries the configuration and the normalisation, so nothing else is
// needed: the model is rebuilt, the validation data regenerated (or read), and K forecasts of N
// steps from the first state of the first K validation trajectories are written as NetCDF (CF
// coordinates; truth beside them where the data reaches) and PNG maps.
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "distributed/world.h"
#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "models/checkpoint.h"
#include "models/data/netcdf_io.h"
#include "ops/ops.h"
#include "tools/commands.h"
#include "tools/run_outputs.h"
#include "tools/train_run.h"
#include "tools/validation.h"

namespace gs::tools {
namespace {

namespace fs = std::filesystem;

struct RolloutArgs {
  std::string checkpoint;
  std::string out;
  int64_t steps = 0;  // 0: the configuration's validation.lead_steps
  int64_t samples = 1;
};

// (K, n, C, H, W) physical forecasts with their (K, C, H, W) initial states as K trajectories of
// n + 1 states, in `like`'s grid and variables.
models::TrajectoryData as_trajectories(const models::TrajectoryData& like, const Tensor& initial,
                                       const Tensor& forecast) {
  models::TrajectoryData d;
  d.variables = like.variables;
  d.units = like.units;
  d.grid = like.grid;
  d.nlat = like.nlat;
  d.nlon = like.nlon;
  d.dt_hours = like.dt_hours;
  for (int64_t k = 0; k < initial.size(0); ++k)
    d.trajectories.push_back(contiguous(cat({unsqueeze(select(initial, 0, k), 0), select(forecast, 0, k)}, 0)));
  return d;
}

int run_rollout(const RolloutArgs& args) {
  // Every rank would write the same files; a checkpoint of any grid loads on one process.
  GS_CHECK(dist::launcher_world_size() <= 1,
           "rollout: runs as one process, but was started as one of {} (under mpiexec or srun); run it without the "
           "launcher: the checkpoint holds whole tensors and loads on one process whatever grid trained it",
           dist::launcher_world_size());
  const models::Checkpoint ck = models::load_checkpoint(args.checkpoint);
  const TrainConfig cfg = train_config_from_string(ck.config, args.checkpoint + " (its stored configuration)");
  auto norm_it = ck.metadata.find(kMetaNormalizer);
  GS_CHECK(norm_it != ck.metadata.end(), "rollout: {} has no '{}' metadata (not written by gradsphere train?)",
           args.checkpoint, kMetaNormalizer);
  const models::Normalizer norm = normalizer_from_string(norm_it->second);

  models::TrajectoryData val = load_validation_data(cfg);
  val.validate();
  GS_CHECK(static_cast<size_t>(val.channels()) == norm.mean.size(),
           "rollout: the data has {} variables but the checkpoint's normaliser {}", val.channels(), norm.mean.size());
  auto model = build_model(cfg, val);
  model->load_state_dict(ck.model);
  model->eval();
  models::Stepper stepper(model, build_optimizer(cfg, *model), sphere::area_weights_coslat(val.grid, val.nlat),
                          cfg.training.stepper);

  const int64_t n = args.steps > 0 ? args.steps : cfg.validation.lead_steps;
  const int64_t K = std::min<int64_t>(args.samples, static_cast<int64_t>(val.trajectories.size()));
  int64_t shortest = val.trajectories.front().size(0);
  for (int64_t k = 0; k < K; ++k) shortest = std::min(shortest, val.trajectories[k].size(0));
  const int64_t truth_steps = std::min(n, shortest - 1);

  // Initial states (K, C, H, W) and the truth that follows them (K, truth_steps, C, H, W), normalised.
  std::vector<Tensor> first;
  for (int64_t k = 0; k < K; ++k) first.push_back(select(val.trajectories[k], 0, 0));
  const Tensor input = to(norm.normalize(stack(first, 0)), cfg.data.dtype);
  Tensor truth;  // physical units
  if (truth_steps >= 1) {
    std::vector<Tensor> t;
    for (int64_t k = 0; k < K; ++k) t.push_back(narrow(val.trajectories[k], 0, 1, truth_steps));
    truth = to(stack(t, 0), cfg.data.dtype);
  }
  Tensor forecast;  // (K, n, C, H, W) normalised
  std::optional<ValidationScores> scores;
  if (truth_steps == n) {
    scores = validate(stepper, ValidationSet{input, norm.normalize(truth)}, norm,
                      sphere::area_weights_coslat(val.grid, val.nlat), val.variables, val.dt_hours,
                      cfg.training.batch_size);
    forecast = scores->prediction;
  } else {
    InferenceModeGuard inference;
    forecast = stepper.predict(input, n);
  }
  const fs::path out = args.out.empty() ? fs::path(args.checkpoint).parent_path() / "rollout" : fs::path(args.out);
  fs::create_directories(out);
  const Tensor phys_forecast = norm.denormalize(forecast);
  const Tensor phys_input = norm.denormalize(input);
  const auto pred_path = out / "rollout.nc";
  models::write_netcdf(pred_path, as_trajectories(val, phys_input, phys_forecast),
                       {.title = "gradsphere rollout", .history = "gradsphere rollout " + args.checkpoint});
  fmt::print("forecast:    {} ({} sample(s) x {} steps of {:g} h)\n", pred_path.string(), K, n, val.dt_hours);

  if (truth.defined()) {
    const auto truth_path = out / "truth.nc";
    models::write_netcdf(truth_path, as_trajectories(val, phys_input, truth),
                         {.title = "gradsphere rollout: truth", .history = "gradsphere rollout " + args.checkpoint});
    fmt::print("truth:       {} ({} steps)\n", truth_path.string(), truth_steps);
  }
  if (scores) fmt::print("area-weighted RMSE against the truth:\n{}", format_scores(*scores));
  std::vector<int64_t> leads = {0};
  if (n > 2) leads.push_back(n / 2 - 1);
  if (n > 1) leads.push_back(n - 1);
  auto maps = write_maps(out / "maps", truth.defined() ? select(truth, 0, 0) : Tensor{}, select(phys_forecast, 0, 0),
                         val.variables, leads, val.dt_hours, cfg.output.map_scale, "rollout");
  fmt::print("maps:        {} ({} files)\n", (out / "maps").string(), maps.size());
  return 0;
}

}  // namespace

void add_rollout_command(CLI::App& app, CommandRegistry& commands) {
  auto args = std::make_shared<RolloutArgs>();
  CLI::App* sub = app.add_subcommand("rollout", "Forecast from a training checkpoint to NetCDF and PNG maps");
  sub->add_option("checkpoint", args->checkpoint, "checkpoint.safetensors written by gradsphere train")->required();
  sub->add_option("--steps", args->steps, "Forecast steps (default: the configuration's validation.lead_steps)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--samples", args->samples, "Forecasts from the first state of this many validation trajectories")
      ->check(CLI::PositiveNumber);
  sub->add_option("--out", args->out, "Output directory (default: rollout/ beside the checkpoint)");
  commands.add(sub, [args] { return run_rollout(*args); });
}

}  // namespace gs::tools
