// `gradsphere train CONFIG [--resume] [--out DIR] [--stop-after N]`: the training loop, top to
// bottom: data -> model -> optimizer -> (resume) -> steps with progress, metrics, validation and
// checkpoints -> maps and curves. Every random choice is a function of (seed, step), so a run that
// is interrupted and resumed ends with bitwise the weights of an uninterrupted one.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>

#include <fmt/format.h>

#include "engine/error.h"
#include "models/checkpoint.h"
#include "tools/commands.h"
#include "tools/metrics_csv.h"
#include "tools/progress.h"
#include "tools/run_outputs.h"
#include "tools/train_run.h"

namespace gs::tools {
namespace {

namespace fs = std::filesystem;

struct TrainArgs {
  std::string config;
  std::string out;
  bool resume = false;
  bool overwrite = false;
  int64_t stop_after = 0;
};

std::atomic<bool> g_stop_requested{false};
extern "C" void request_stop(int) { g_stop_requested = true; }

// Under mpiexec every rank would train the same model and write the same files. Distributed
// training is the distributed layer's job; until it exists, say so instead of racing on files.
void check_single_process() {
  for (const char* var : {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS"}) {
    const char* v = std::getenv(var);
    GS_CHECK(!v || std::atoi(v) <= 1,
             "train: started as one of {} processes ({}={}); distributed training is not implemented yet, "
             "run `gradsphere train` as a single process",
             v, var, v);
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::string> metrics_columns(int64_t rollout_steps) {
  std::vector<std::string> c = {"step", "loss", "lr", "grad_norm"};
  for (int64_t k = 0; k < rollout_steps; ++k) c.push_back(fmt::format("loss_step{}", k + 1));
  c.push_back("seconds");
  return c;
}

const std::vector<std::string> kValidationColumns = {"step", "lead_hours", "variable", "rmse", "persistence_rmse",
                                                     "val_loss"};

int run_train(const TrainArgs& args) {
  check_single_process();
  TrainConfig cfg = load_train_config(args.config);
  if (!args.out.empty()) cfg.output.dir = args.out;
  const RunPaths paths(cfg.output.dir);
  GS_CHECK(!(args.resume && args.overwrite), "train: --resume and --overwrite exclude each other");
  if (args.overwrite) {
    // Only the files a run writes; anything else the user put in the directory stays.
    for (const fs::path& p : {paths.checkpoint, paths.metrics, paths.validation, paths.loss_curve, paths.skill_plot})
      fs::remove(p);
    fs::remove_all(paths.maps);
  }
  GS_CHECK(args.resume || !fs::exists(paths.checkpoint),
           "train: {} already holds a checkpoint; pass --resume to continue that run, --overwrite to start it "
           "afresh, or choose another --out",
           cfg.output.dir);
  GS_CHECK(!args.resume || fs::exists(paths.checkpoint), "train --resume: no checkpoint at {}",
           paths.checkpoint.string());
  paths.create();

  const auto t_setup = std::chrono::steady_clock::now();
  fmt::print(stderr, "gradsphere train: {} -> {}\n", cfg.source, paths.root.string());
  TrainingRun run(cfg);
  fmt::print(stderr, "{}", run.describe());
  fmt::print(stderr, "set-up took {:.1f} s\n", seconds_since(t_setup));

  if (args.resume) {
    run.restore(models::load_checkpoint(paths.checkpoint));
    fmt::print(stderr, "resumed from {} at step {}\n", paths.checkpoint.string(), run.step());
  } else {
    std::ofstream(paths.config) << cfg.text;
  }
  auto metrics = args.resume ? MetricsCsv::append(paths.metrics.string(), metrics_columns(cfg.training.rollout_steps))
                             : MetricsCsv::create(paths.metrics.string(), metrics_columns(cfg.training.rollout_steps));
  auto val_csv = args.resume ? MetricsCsv::append(paths.validation.string(), kValidationColumns)
                             : MetricsCsv::create(paths.validation.string(), kValidationColumns);

  g_stop_requested = false;
  auto old_int = std::signal(SIGINT, request_stop);
  auto old_term = std::signal(SIGTERM, request_stop);

  const int64_t total = cfg.training.steps;
  ProgressBar bar(total, run.step());
  int64_t last_checkpoint = args.resume ? run.step() : -1;
  int64_t steps_here = 0;
  std::optional<ValidationScores> last_scores;
  const auto t_train = std::chrono::steady_clock::now();
  auto save = [&] {
    models::save_checkpoint(paths.checkpoint, run.checkpoint());
    last_checkpoint = run.step();
  };

  while (run.step() < total) {
    const models::TrainResult r = run.train_step();
    if (!r.applied) {
      bar.finish();
      std::signal(SIGINT, old_int);
      std::signal(SIGTERM, old_term);
      fail("training stopped: {}\nThe weights were not changed by that step. {}. Lower optimizer.lr or set "
           "training.clip_grad_norm, then resume.",
           r.report,
           last_checkpoint >= 0 ? fmt::format("The last good checkpoint is {} (step {})", paths.checkpoint.string(),
                                              last_checkpoint)
                                : std::string("No checkpoint was written yet"));
    }
    const int64_t step = run.step();
    ++steps_here;
    bar.update(step, r.loss);
    if (step % cfg.training.log_every == 0 || step == total) {
      std::vector<CsvCell> row = {step, r.loss, r.lr, r.grad_norm};
      for (double l : r.step_losses) row.emplace_back(l);
      row.emplace_back(seconds_since(t_train));
      metrics.write_row(row);
    }
    if ((cfg.validation.every > 0 && step % cfg.validation.every == 0) || step == total) {
      ValidationScores s = run.validate();
      for (size_t k = 0; k < s.lead_hours.size(); ++k)
        for (size_t c = 0; c < s.variables.size(); ++c)
          val_csv.write_row({step, s.lead_hours[k], s.variables[c], s.rmse[k][c], s.persistence[k][c], s.loss});
      bar.message(fmt::format("validation at step {}: loss {:.4g}\n{}", step, s.loss, format_scores(s)));
      last_scores = std::move(s);
    }
    const bool stop = g_stop_requested || (args.stop_after > 0 && steps_here >= args.stop_after);
    if (step % cfg.training.checkpoint_every == 0 || step == total || stop) save();
    if (stop && step < total) {
      bar.finish();
      std::signal(SIGINT, old_int);
      std::signal(SIGTERM, old_term);
      fmt::print(stderr, "stopped at step {} of {}; checkpoint {}\nresume with: gradsphere train {} --out {} --resume\n",
                 step, total, paths.checkpoint.string(), args.config, paths.root.string());
      return g_stop_requested ? 130 : 0;
    }
  }
  bar.finish();
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);

  if (!last_scores) last_scores = run.validate();  // a resumed run that was already complete
  write_loss_curve(paths.metrics, paths.validation, paths.loss_curve);
  write_skill_plot(*last_scores, paths.skill_plot);
  std::vector<fs::path> maps;
  if (cfg.output.maps) maps = run.write_validation_maps(*last_scores, paths.maps);

  fmt::print("trained {} steps in {:.1f} s ({} this run)\n", total, seconds_since(t_train), steps_here);
  fmt::print("final validation (area-weighted RMSE, physical units):\n{}", format_scores(*last_scores));
  fmt::print("checkpoint:  {}\n", paths.checkpoint.string());
  fmt::print("metrics:     {} and {}\n", paths.metrics.string(), paths.validation.string());
  fmt::print("loss curve:  {}\n", paths.loss_curve.string());
  fmt::print("skill plot:  {}\n", paths.skill_plot.string());
  if (!maps.empty()) fmt::print("maps:        {} ({} files)\n", paths.maps.string(), maps.size());
  return 0;
}

}  // namespace

void add_train_command(CLI::App& app, CommandRegistry& commands) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* sub = app.add_subcommand("train", "Train a model from a YAML configuration");
  sub->add_option("config", args->config, "Configuration file (see tools/configs/swe_small.yaml)")->required();
  sub->add_option("--out", args->out, "Run directory (default: output.dir of the configuration)");
  sub->add_flag("--resume", args->resume, "Continue the run whose checkpoint is in the run directory");
  sub->add_flag("--overwrite", args->overwrite,
                "Start afresh in a run directory that holds an earlier run (its checkpoint, metrics and pictures are "
                "replaced)");
  sub->add_option("--stop-after", args->stop_after,
                  "Stop after this many steps of this invocation, with a checkpoint, as an interruption would")
      ->check(CLI::NonNegativeNumber);
  commands.add(sub, [args] { return run_train(*args); });
}

}  // namespace gs::tools
