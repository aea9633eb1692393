// `[mpiexec -n N] gradsphere rollout CHECKPOINT [--steps N] [--samples K] [--members M] [--baseline CKPT]
// [--out DIR] [--grid [E]xDxHxW] [--device cuda]`:
// inference from a training checkpoint (a CPU or a GPU run's; it loads onto --device). The
// checkpoint carries the configuration and the normalisation, so nothing else is needed: the model
// is rebuilt, the validation data regenerated (or read), and K forecasts of N steps from the first
// state of the first K validation trajectories (forced by the data, as in validation) are written
// as NetCDF (CF coordinates; truth beside them where the data reaches) and PNG maps.
// With --data FILES: forced inference over long runs, streamed (forced_rollout.h).
#include <filesystem>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "distributed/shards.h"
#include "distributed/world.h"
#include "models/sharded_state.h"
#include "engine/autograd/grad_mode.h"
#include "engine/cuda_runtime.h"
#include "engine/error.h"
#include "models/checkpoint.h"
#include "models/data/netcdf_io.h"
#include "ops/ops.h"
#include "tools/commands.h"
#include "tools/forced_rollout.h"
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
  int64_t members = 0;  // 0: the configuration's training.ensemble_members
  std::string baseline;  // a (deterministic) checkpoint scored beside the forecast
  std::string grid;  // "DxHxW" under a launcher; empty: the configuration's distributed.grid
  std::string device = "cpu";  // cpu, cuda or cuda:N (one process)
  std::vector<std::string> data;  // --data: forced inference from these files
  int64_t start = 0, trajectory = 0;
};

// A baseline checkpoint for `rollout --baseline`: it must have been trained on the same data, which
// its normaliser says (the same statistics, to the digit written).
models::Checkpoint load_baseline(const std::string& path, const std::string& normalizer) {
  models::Checkpoint b = models::load_checkpoint(path);
  auto it = b.metadata.find(kMetaNormalizer);
  GS_CHECK(it != b.metadata.end(), "rollout --baseline: {} has no '{}' metadata (not written by gradsphere train?)",
           path, kMetaNormalizer);
  GS_CHECK(it->second == normalizer,
           "rollout --baseline: {} was trained on other data than the checkpoint (its normalisation statistics {} "
           "differ from {}); a baseline is scored on the same variables and initial states",
           path, it->second, normalizer);
  return b;
}

// (K, n, C, H, W) physical forecasts with their (K, C, H, W) initial states as K trajectories of
// n + 1 states, in `like`'s grid and variables.
models::TrajectoryData as_trajectories(const models::TrajectoryInfo& like, const Tensor& initial,
                                       const Tensor& forecast) {
  models::TrajectoryData d{.variables = like.variables, .units = like.units, .roles = like.roles, .levels = like.levels,
                           .grid = like.grid, .nlat = like.nlat, .nlon = like.nlon, .dt_hours = like.dt_hours,
                           .trajectories = {}};
  for (int64_t k = 0; k < initial.size(0); ++k)
    d.trajectories.push_back(contiguous(cat({unsqueeze(select(initial, 0, k), 0), select(forecast, 0, k)}, 0)));
  return d;
}

// The whole sphere from every rank's tile (..., h, w) of it; collective.
Tensor whole_sphere(const Tensor& tile, const dist::ProcessGrid& grid) {
  if (!tile.defined()) return tile;
  return dist::gather_shards(tile, dist::Distribution::sharded_2d(tile.dim() - 2, tile.dim() - 1), grid);
}

int run_rollout(const RolloutArgs& args) {
  if (!args.data.empty()) {
    GS_CHECK(args.device == "cpu", "rollout --data: runs on the CPU (one process or under mpiexec); got --device {}",
             args.device);
    GS_CHECK(args.steps > 0, "rollout --data: expected --steps N (the length of the forced run)");
    return run_forced_rollout({.checkpoint = args.checkpoint, .data = args.data, .steps = args.steps,
                               .start = args.start, .trajectory = args.trajectory, .out = args.out, .grid = args.grid});
  }
  GS_CHECK(args.start == 0 && args.trajectory == 0, "rollout: --start and --trajectory go with --data");
  const Device device = parse_device(args.device);
  if (!device.is_cpu()) cuda::require_device(device, "rollout --device");  // says why when there is no GPU
  const models::Checkpoint ck = models::load_checkpoint(args.checkpoint);
  const TrainConfig cfg = train_config_from_string(ck.config, args.checkpoint + " (its stored configuration)");
  // Under a launcher every rank forecasts its tile (data replicas repeat the same forecasts); world
  // rank 0 gathers the tiles and alone writes the files.
  const dist::ProcessGrid grid = make_process_grid(args.grid, cfg, "rollout", /*config_grid_if_it_fits=*/true);
  const bool root = grid.is_root();
  // As for train: the collectives stage through host memory, so a device rollout is one process.
  GS_CHECK(device.is_cpu() || grid.is_single_process(),
           "rollout --device {}: a rollout on a GPU runs as one process; this job has {} processes. Run it without "
           "mpiexec, or with --device cpu", device.str(), grid.world_size());
  auto norm_it = ck.metadata.find(kMetaNormalizer);
  GS_CHECK(norm_it != ck.metadata.end(), "rollout: {} has no '{}' metadata (not written by gradsphere train?)",
           args.checkpoint, kMetaNormalizer);
  const models::Normalizer norm = normalizer_from_string(norm_it->second);
  // The members (and the baseline) are checked before anything is written.
  const int64_t members = args.members > 0 ? args.members : cfg.training.stepper.ensemble_members;
  GS_CHECK(members == 1 || cfg.model.type == "noise_sfno",
           "rollout --members {}: the checkpoint's model ({}) is deterministic, so every member would be the same; "
           "an ensemble needs a stochastic model (model.type: noise_sfno)",
           members, cfg.model.type);
  models::member_share(members, grid);  // an ensemble axis needs a member per rank
  std::optional<models::Checkpoint> baseline;
  if (!args.baseline.empty()) baseline = load_baseline(args.baseline, norm_it->second);
  const fs::path out = args.out.empty() ? fs::path(args.checkpoint).parent_path() / "rollout" : fs::path(args.out);
  if (root) fs::create_directories(out);

  const auto source = load_validation_data(cfg, grid, out / "data");
  const models::TrajectoryInfo& val = source->info();
  GS_CHECK(static_cast<size_t>(val.channels()) == norm.mean.size(),
           "rollout: the data has {} variables but the checkpoint's normaliser {}", val.channels(), norm.mean.size());
  auto model = build_model(cfg, val, grid);
  model->load_state_dict(models::local_state_dict(ck.model, *model, grid));
  model->eval();
  if (!device.is_cpu()) model->to(device);
  const auto area_weights = sphere::area_weights_coslat(val.grid, val.nlat);
  models::StepperOptions so = cfg.training.stepper;
  so.layout = val.layout();
  so.ensemble_members = members;
  so.loss = {};  // inference: the training loss plays no part (a CRPS needs no member count here)
  models::Stepper stepper(model, build_optimizer(cfg, *model), area_weights, so);
  if (!grid.is_single_process()) stepper.set_distributed(grid);

  const int64_t n = args.steps > 0 ? args.steps : cfg.validation.lead_steps;
  const int64_t K = std::min<int64_t>(args.samples, val.trajectories());
  int64_t shortest = val.states.front();
  for (int64_t k = 0; k < K; ++k) shortest = std::min(shortest, val.states[k]);
  const int64_t truth_steps = std::min(n, shortest - 1);
  const models::ChannelLayout l = val.layout();
  GS_CHECK(l.forcing == 0 || truth_steps >= n - 1,
           "rollout: {} forcing channel(s) are read from the data at every step, so {} steps need validation "
           "trajectories of at least {} states; the shortest has {}",
           l.forcing, n, n, shortest);

  // This rank's tile of the initial states (K, C, h, w) and of the truth after them
  // (K, truth_steps, C, h, w), normalised.
  const dist::Block r = grid.local_lat(val.nlat), c = grid.local_lon(val.nlon);
  const models::Span rows{r.start, r.count}, cols{c.start, c.count};
  std::vector<Tensor> first, after;
  for (int64_t k = 0; k < K; ++k) {
    first.push_back(select(source->read(k, 0, 1, rows, cols), 0, 0));
    if (truth_steps >= 1) after.push_back(source->read(k, 1, truth_steps, rows, cols));
  }
  const Tensor input = to(to(norm.normalize(stack(first, 0)), cfg.data.dtype), device);
  const Tensor truth =
      truth_steps >= 1 ? to(to(norm.normalize(stack(after, 0)), cfg.data.dtype), device) : Tensor{};
  std::vector<Tensor> forecasts;  // per member (K, n, C, h, w) normalised
  std::optional<ValidationScores> scores;
  if (truth_steps == n) {
    scores = validate(stepper, ValidationSet{input, truth}, norm, area_weights, val.variables, val.dt_hours,
                      cfg.training.batch_size, grid, val.nlon);
    forecasts = members > 1 ? scores->member_predictions : std::vector<Tensor>{scores->prediction};
  } else {
    InferenceModeGuard inference;
    for (int64_t m = 0; m < members; ++m)
      forecasts.push_back(stepper.predict(input, n, /*rollout_id=*/0, /*first_sample=*/0, truth, m));
  }
  // A deterministic baseline scored on the same initial states and truth (validate's keys).
  std::optional<ValidationScores> baseline_scores;
  if (baseline && scores) {
    const TrainConfig bcfg = train_config_from_string(baseline->config, args.baseline + " (its stored configuration)");
    auto bmodel = build_model(bcfg, val, grid);
    bmodel->load_state_dict(models::local_state_dict(baseline->model, *bmodel, grid));
    bmodel->eval();
    if (!device.is_cpu()) bmodel->to(device);
    models::StepperOptions bso = bcfg.training.stepper;
    bso.layout = val.layout();
    bso.ensemble_members = 1;
    bso.loss = {};
    // No set_distributed: validate passes every sample's global index, and the model holds the grid.
    models::Stepper bstepper(bmodel, build_optimizer(bcfg, *bmodel), area_weights, bso);
    baseline_scores = validate(bstepper, ValidationSet{input, truth}, norm, area_weights, val.variables, val.dt_hours,
                               cfg.training.batch_size, grid, val.nlon);
  }
  // From here on everything is host work (checks, gathers, files): bring the forecast back, the
  // members along dim 1 (K, members, n, C, h, w).
  Tensor forecast = to(stack(forecasts, 1), Device::cpu());
  const Tensor host_input = to(input, Device::cpu()), host_truth = truth.defined() ? to(truth, Device::cpu()) : truth;
  // A forecast that blows up is reported, never written or scored as numbers.
  const Tensor finite = isfinite(forecast);  // (K, members, n, C, h, w)
  if (!all_true(finite)) {
    int64_t lead = 0;
    while (all_true(select(finite, 2, lead))) ++lead;
    fail("rollout: the forecast is not finite from step {} of {} on (the model diverges from these initial states); "
         "nothing was written",
         lead + 1, n);
  }
  // The predicted channels, in physical units (the forcing is the data's, not a forecast).
  const models::Normalizer out_norm = output_normalizer(norm, l);
  const Tensor phys_forecast = out_norm.denormalize(whole_sphere(forecast, grid));  // (K, members, n, C, H, W)
  const Tensor phys_input = out_norm.denormalize(whole_sphere(output_channels(host_input, l), grid));
  const Tensor phys_truth =
      host_truth.defined() ? out_norm.denormalize(whole_sphere(output_channels(host_truth, l), grid)) : Tensor{};
  const models::TrajectoryInfo out_info = output_info(val);
  if (!root) return 0;
  const auto pred_path = out / "rollout.nc";
  // Sample-major trajectories, each member's from the sample's initial state.
  const Shape& fs = phys_forecast.sizes();
  const Tensor flat_forecast = reshape(phys_forecast, {fs[0] * fs[1], fs[2], fs[3], fs[4], fs[5]});
  const Tensor flat_input = reshape(stack(std::vector<Tensor>(static_cast<size_t>(members), phys_input), 1),
                                    {fs[0] * fs[1], fs[3], fs[4], fs[5]});
  models::NetcdfWriteOptions wo{.title = "gradsphere rollout", .history = "gradsphere rollout " + args.checkpoint};
  if (members > 1) wo.members = members;
  models::write_netcdf(pred_path, as_trajectories(out_info, flat_input, flat_forecast), wo);
  fmt::print("forecast:    {} ({} sample(s) x {} steps of {:g} h{})\n", pred_path.string(), K, n, val.dt_hours,
             members > 1 ? fmt::format(", {} members each (dim 'member')", members) : std::string());
  if (phys_truth.defined()) {
    const auto truth_path = out / "truth.nc";
    models::write_netcdf(truth_path, as_trajectories(out_info, phys_input, phys_truth),
                         {.title = "gradsphere rollout: truth", .history = "gradsphere rollout " + args.checkpoint});
    fmt::print("truth:       {} ({} steps)\n", truth_path.string(), truth_steps);
  }
  if (scores) fmt::print("area-weighted RMSE{} against the truth:\n{}", members > 1 ? " of the ensemble mean" : "",
                         format_scores(*scores));
  if (scores && members > 1) {
    write_ensemble_plots(*scores, out / "spread_skill.png", out / "rank_histogram.png");
    fmt::print("ensemble:    {} and {}\n", (out / "spread_skill.png").string(), (out / "rank_histogram.png").string());
  }
  if (baseline_scores) fmt::print("the baseline {} (area-weighted RMSE):\n{}", args.baseline, format_scores(*baseline_scores));
  if (baseline && !scores)
    fmt::print("the baseline {} was not scored: the truth covers {} of the {} steps\n", args.baseline, truth_steps, n);
  std::vector<int64_t> leads = {0};
  if (n > 2) leads.push_back(n / 2 - 1);
  if (n > 1) leads.push_back(n - 1);
  auto maps = write_maps(out / "maps", phys_truth.defined() ? select(phys_truth, 0, 0) : Tensor{},
                         select(select(phys_forecast, 0, 0), 0, 0), out_info.variables, leads, val.dt_hours,
                         cfg.output.map_scale,
                         "rollout");
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
  sub->add_option("--members", args->members,
                  "Ensemble members per sample, each with its own noise (a NoiseConditionedSFNO; default: the "
                  "configuration's training.ensemble_members); rollout.nc gets a 'member' dim and the scores the "
                  "ensemble's")
      ->check(CLI::Range(1, 64));
  sub->add_option("--baseline", args->baseline,
                  "A checkpoint trained on the same data (a deterministic model, say) whose RMSE is printed beside "
                  "the forecast's, on the same initial states");
  sub->add_option("--out", args->out, "Output directory (default: rollout/ beside the checkpoint)");
  sub->add_option("--grid", args->grid,
                  "Process grid DATAxHxW under mpiexec (default: distributed.grid of the stored configuration, else "
                  "every rank a data replica); any grid loads any checkpoint");
  sub->add_option("--data", args->data,
                  "Forced inference from these NetCDF files (the forcing of every step read from them; streamed to "
                  "predictions.nc with ACE's inference metrics)");
  sub->add_option("--start", args->start, "With --data: the state index to start from (default 0)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--trajectory", args->trajectory, "With --data: which trajectory of the files (default 0)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--device", args->device,
                  "cpu (default), cuda or cuda:N: run the model there (one process; the files are written from the host)");
  commands.add(sub, [args] { return run_rollout(*args); });
}

}  // namespace gs::tools
