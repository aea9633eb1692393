// Forced inference streamed to disk (forced_rollout.h).
#include "tools/forced_rollout.h"

#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "distributed/shards.h"
#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/storage.h"
#include "models/checkpoint.h"
#include "models/data/cf_time.h"
#include "models/data/netcdf_io.h"
#include "models/sharded_state.h"
#include "ops/ops.h"
#include "tools/inference_metrics.h"
#include "tools/plot.h"
#include "tools/png_image.h"
#include "tools/run_directory.h"
#include "tools/train_run.h"
#include "tools/validation.h"

namespace gs::tools {
namespace {

namespace fs = std::filesystem;


double peak_rss_mb() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // kilobytes on Linux
}

void write_outputs(const fs::path& out, const InferenceMetrics::Result& r, const models::TrajectoryInfo& info,
                   const std::vector<std::string>& times, const std::vector<double>& lead_hours, int map_scale) {
  // Global-mean series: a row per step, prediction and truth per variable.
  std::string csv = "step,lead_hours,time";
  for (const auto& v : r.variables) csv += fmt::format(",{0}_prediction,{0}_truth", v);
  csv += "\n";
  for (size_t k = 0; k < r.mean_prediction.size(); ++k) {
    csv += fmt::format("{},{:g},{}", k + 1, lead_hours[k], times[k]);
    for (size_t c = 0; c < r.variables.size(); ++c)
      csv += fmt::format(",{:.9g},{:.9g}", r.mean_prediction[k][c], r.mean_truth[k][c]);
    csv += "\n";
  }
  write_text_file(out / "global_means.csv", csv);
  std::string summary = "variable,units,rmse_of_time_mean,global_mean_bias\n";
  for (size_t c = 0; c < r.variables.size(); ++c)
    summary += fmt::format("{},{},{:.9g},{:.9g}\n", r.variables[c], info.units.empty() ? "" : info.units[c],
                           r.rmse_of_time_mean[c], r.global_mean_bias[c]);
  write_text_file(out / "inference_metrics.csv", summary);
  fs::create_directories(out / "global_means");
  fs::create_directories(out / "time_mean_bias");
  for (size_t c = 0; c < r.variables.size(); ++c) {
    const std::string& v = r.variables[c];
    const std::string units = info.units.empty() || info.units[c].empty() ? "" : " (" + info.units[c] + ")";
    Series pred{.label = "prediction", .x = lead_hours}, truth{.label = "truth", .x = lead_hours};
    for (size_t k = 0; k < r.mean_prediction.size(); ++k) {
      pred.y.push_back(r.mean_prediction[k][c]);
      truth.y.push_back(r.mean_truth[k][c]);
    }
    write_plot((out / "global_means" / (v + ".png")).string(), {truth, pred},
               PlotOptions{.title = "global mean of " + v + units, .x_label = "lead (hours)", .y_label = v + units});
    const Tensor bias = select(r.bias, 0, static_cast<int64_t>(c));
    write_png(compose_panels({{fmt::format("RMSE {:.3g}, mean {:.3g}", r.rmse_of_time_mean[c], r.global_mean_bias[c]),
                               field_image(bias, FieldStyle{.cmap = Colormap::diverging, .scale = map_scale})}},
                             fmt::format("{} bias{}", v, units)),
              (out / "time_mean_bias" / (v + ".png")).string());
  }
}

}  // namespace

int run_forced_rollout(const ForcedRolloutArgs& a) {
  const models::Checkpoint ck = models::load_checkpoint(a.checkpoint);
  const TrainConfig cfg = train_config_from_string(ck.config, a.checkpoint + " (its stored configuration)");
  const dist::ProcessGrid grid = make_process_grid(a.grid, cfg, "rollout", /*config_grid_if_it_fits=*/true);
  auto norm_it = ck.metadata.find(kMetaNormalizer);
  GS_CHECK(norm_it != ck.metadata.end(), "rollout: {} has no '{}' metadata (not written by gradsphere train?)",
           a.checkpoint, kMetaNormalizer);
  const models::Normalizer norm = normalizer_from_string(norm_it->second);
  GS_CHECK(a.steps >= 1, "rollout --data: expected --steps N >= 1, got {}", a.steps);
  const auto source = open_data_files(cfg, a.data);
  const models::TrajectoryInfo& info = source->info();
  GS_CHECK(static_cast<size_t>(info.channels()) == norm.mean.size(),
           "rollout --data: the files give {} channels ({}) but the checkpoint was trained on {}; the files must hold "
           "the variables of its data.variables",
           info.channels(), fmt::join(info.variables, ", "), norm.mean.size());
  const auto vars_it = ck.metadata.find(kMetaVariables);
  GS_CHECK(vars_it == ck.metadata.end() || vars_it->second == fmt::format("{}", fmt::join(info.variables, ",")),
           "rollout --data: the files' channels ({}) are not the checkpoint's ({})", fmt::join(info.variables, ","),
           vars_it->second);
  GS_CHECK(a.trajectory >= 0 && a.trajectory < info.trajectories(),
           "rollout --data: --trajectory {} is out of range (the files hold {} trajectories)", a.trajectory,
           info.trajectories());
  const int64_t states = info.states[static_cast<size_t>(a.trajectory)];
  GS_CHECK(a.start >= 0 && a.start + a.steps + 1 <= states,
           "rollout --data: {} steps from state {} need states {}..{} (the forcing of every step and the truth it is "
           "scored against), but trajectory {} has {} states",
           a.steps, a.start, a.start, a.start + a.steps, a.trajectory, states);
  const models::ChannelLayout l = info.layout();
  const models::Normalizer out_norm = output_normalizer(norm, l);

  auto model = build_model(cfg, info, grid);
  model->load_state_dict(models::local_state_dict(ck.model, *model, grid));
  model->eval();
  models::StepperOptions so = cfg.training.stepper;
  so.layout = l;
  const auto area_weights = sphere::area_weights_coslat(info.grid, info.nlat);
  models::Stepper stepper(model, build_optimizer(cfg, *model), area_weights, so);
  if (!grid.is_single_process()) stepper.set_distributed(grid);

  const fs::path out = a.out.empty() ? fs::path(a.checkpoint).parent_path() / "forced_rollout" : fs::path(a.out);
  models::TrajectoryInfo out_info = output_info(info);
  out_info.dtype = cfg.data.dtype;
  // Times in the files' own units and calendar (hours from the first state when the files have none).
  const models::Calendar calendar = models::parse_calendar(info.calendar);
  const std::string units = info.time_units.empty() ? "hours since 2000-01-01 00:00:00" : info.time_units;
  const models::TimeUnits tu = models::parse_time_units(units, calendar);
  const double t0 = info.start_times.empty() ? 0.0 : info.start_times[static_cast<size_t>(a.trajectory)];
  auto time_of = [&](int64_t state) { return t0 + static_cast<double>(state) * info.dt_hours * 3600.0 / tu.seconds_per_unit; };
  std::optional<models::NetcdfStreamWriter> writer;
  if (grid.is_root()) {
    fs::create_directories(out);
    writer.emplace(out / "predictions.nc", out_info,
                   models::NetcdfWriteOptions{.title = "gradsphere forced rollout",
                                              .history = "gradsphere rollout " + a.checkpoint + " --data ...",
                                              .calendar = models::calendar_name(calendar),
                                              .time_units = units});
  }

  const dist::Block r = grid.local_lat(info.nlat), c = grid.local_lon(info.nlon);
  const models::Span rows{r.start, r.count}, cols{c.start, c.count};
  auto read_state = [&](int64_t s) {  // (1, C, h, w) normalised, in the model's dtype
    return to(norm.normalize(source->read(a.trajectory, s, 1, rows, cols)), cfg.data.dtype);
  };
  InferenceMetrics metrics(out_info.variables, area_weights, info.nlon, grid);
  const dist::Distribution tiles = dist::Distribution::sharded_2d(1, 2);
  Tensor data = read_state(a.start);  // the data at the step's input time
  Tensor state = models::fill_missing(narrow(data, 1, 0, l.prognostic));  // the model reads missing values as 0
  std::vector<std::string> times;
  std::vector<double> lead_hours;
  double step_ms = 0;
  for (int64_t k = 0; k < a.steps; ++k) {
    const auto s0 = std::chrono::steady_clock::now();
    const Tensor forcing = l.forcing > 0 ? narrow(data, 1, l.prognostic, l.forcing) : Tensor();
    const Tensor pred = stepper.forecast_step(state, forcing, k, /*rollout_id=*/0, /*first_sample=*/0);
    const Tensor truth = read_state(a.start + k + 1);
    if (dist::any_rank(grid, !all_true(isfinite(pred))))  // every rank knows it: one message, from rank 0
      throw AgreedError(fmt::format("rollout --data: the forecast is not finite at step {} of {} (the model "
                                    "diverges from this state); predictions.nc is not kept",
                                    k + 1, a.steps));
    // Where the data at the new time is missing the state reads 0 (the mean), as in training.
    const Tensor prog = l.diagnostic == 0 ? pred : narrow(pred, 1, 0, l.prognostic);
    state = where(models::present(narrow(truth, 1, 0, l.prognostic)), prog, zeros({}, prog.dtype()));
    const Tensor phys_pred = select(out_norm.denormalize(pred), 0, 0);
    const Tensor phys_truth = select(out_norm.denormalize(output_channels(truth, l)), 0, 0);
    metrics.add(phys_pred, phys_truth);
    const Tensor whole = dist::gather_shards(phys_pred, tiles, grid);
    if (writer) writer->append(whole, time_of(a.start + k + 1));
    times.push_back(models::format_time(tu, time_of(a.start + k + 1)));
    lead_hours.push_back(info.dt_hours * static_cast<double>(k + 1));
    data = truth;
    step_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count();
  }
  const InferenceMetrics::Result result = metrics.finish();
  if (!grid.is_root()) return 0;
  writer->close();
  write_outputs(out, result, out_info, times, lead_hours, a.map_scale > 0 ? a.map_scale : cfg.output.map_scale);
  fmt::print("data:\n{}", describe_variables(info, {}));
  fmt::print("forced rollout: {} steps of {:g} h from state {} ({}) of trajectory {}, {:.1f} ms per step, peak "
             "resident memory {:.0f} MB\n",
             a.steps, info.dt_hours, a.start, models::format_time(tu, time_of(a.start)), a.trajectory,
             step_ms / static_cast<double>(a.steps), peak_rss_mb());
  fmt::print("predictions: {} ({} calendar)\n", (out / "predictions.nc").string(), models::calendar_name(calendar));
  fmt::print("metrics:     {}, {}, {}/, {}/\n", (out / "global_means.csv").string(),
             (out / "inference_metrics.csv").string(), (out / "global_means").string(),
             (out / "time_mean_bias").string());
  for (size_t v = 0; v < result.variables.size(); ++v)
    fmt::print("  {}: RMSE of the time mean {:.4g}, global-mean bias {:.4g}\n", result.variables[v],
               result.rmse_of_time_mean[v], result.global_mean_bias[v]);
  return 0;
}

}  // namespace gs::tools
