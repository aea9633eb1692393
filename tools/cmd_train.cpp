// `[mpiexec -n N] gradsphere train CONFIG [--grid DxHxW] [--device cuda] [--resume] [--out DIR] [--stop-after N]`:
// the training loop, top to bottom: data -> model -> optimizer -> (resume) -> steps with progress,
// metrics, validation and checkpoints -> maps and curves. Every random choice is a function of
// (seed, step), so a run that is interrupted and resumed ends with bitwise the weights of an
// uninterrupted one. Under a launcher every rank runs this loop in lock-step on its part of the
// grid; world rank 0 alone prints and writes files, and every rank waits for each checkpoint.
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "distributed/nccl_communicator.h"
#include "distributed/world.h"
#include "engine/cuda_runtime.h"
#include "engine/factory.h"
#include "engine/error.h"
#include "models/checkpoint.h"
#include "tools/commands.h"
#include "tools/metrics_csv.h"
#include "tools/progress.h"
#include "tools/run_outputs.h"
#include "tools/run_directory.h"
#include "tools/train_run.h"

namespace gs::tools {
namespace {

namespace fs = std::filesystem;

struct TrainArgs {
  std::string config;
  std::string out;
  bool out_given = false;  // --out was passed (so an empty value is an error, not the default)
  std::string grid;  // "DxHxW"; empty: the configuration's distributed.grid, else data parallel over the world
  bool resume = false;
  bool overwrite = false;
  int64_t stop_after = 0;
  std::string device = "cpu";  // cpu, cuda or cuda:N
};

std::atomic<int> g_stop_signal{0};  // the signal that asked the run to stop, 0 for none
extern "C" void request_stop(int signal) { g_stop_signal = signal; }

// SIGINT, SIGTERM and SIGHUP (a closed terminal or ssh session) stop the run at the next step with
// a checkpoint while this lives; the previous handlers come back after it.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal = 0;
    for (size_t i = 0; i < kSignals.size(); ++i) old_[i] = std::signal(kSignals[i], request_stop);
  }
  ~StopSignals() {
    for (size_t i = 0; i < kSignals.size(); ++i) std::signal(kSignals[i], old_[i]);
  }
  static bool requested() { return g_stop_signal != 0; }
  static int exit_code() { return 128 + g_stop_signal; }  // as a shell reports a signal: 130 for SIGINT

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<void (*)(int), 3> old_{};
};

// Where the other ranks' progress goes: nowhere.
std::FILE* silent_stream() {
  static std::FILE* null = std::fopen("/dev/null", "w");
  GS_CHECK(null != nullptr, "train: cannot open /dev/null for the progress of a non-root rank");
  return null;
}

// Whether any rank of the job asks to stop (every rank then stops at the same step).
bool any_rank_stops(const dist::ProcessGrid& grid, bool mine) {
  if (grid.is_single_process()) return mine;
  Tensor flag = from_vector(std::vector<int64_t>{mine ? 1 : 0});
  grid.comm(dist::Group::world)->all_reduce(flag, dist::ReduceOp::max);
  return flag.item<int64_t>() != 0;
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
  GS_CHECK(!args.out_given || !args.out.empty(), "train --out: expected a run directory, got an empty string");
  TrainConfig cfg = load_train_config(args.config);
  if (args.out_given) cfg.output.dir = args.out;
  Device device = parse_device(args.device);
  // Under a launcher, `--device cuda` is each rank's own GPU (by its local rank).
  if (args.device == "cuda" && dist::launcher_world_size() > 1) device = dist::local_rank_device();
  if (!device.is_cpu()) cuda::require_device(device, "train --device");  // says why when there is no GPU
  dist::GpuWorld gpu_world;
  if (!device.is_cpu()) gpu_world = dist::gpu_world_communicator(device);
  const dist::ProcessGrid grid = make_process_grid(args.grid, cfg, "train", false, gpu_world.comm);
  // Before the run directory is touched (TrainingRun checks it again for other callers).
  check_device_grid(device, grid, "train");
  const bool root = grid.is_root();
  const RunPaths paths(cfg.output.dir);
  GS_CHECK(!(args.resume && args.overwrite), "train: --resume and --overwrite exclude each other");
  // Rank 0 owns the directory: it locks it, checks it and prepares it while the others wait (an
  // error there ends every rank with its message).
  std::optional<RunDirectoryLock> lock;
  if (root) {
    lock.emplace(paths.root);
    if (int n = lock->remove_stale_temporaries())
      fmt::print(stderr, "removed {} temporary file(s) left in {} by an interrupted run\n", n, paths.root.string());
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
  }
  grid.comm(dist::Group::world)->barrier();  // the directory is ready before anyone reads or writes in it

  const auto t_setup = std::chrono::steady_clock::now();
  if (root)
    fmt::print(stderr, "gradsphere train: {} -> {}{}\n", cfg.source, paths.root.string(),
               grid.is_single_process() ? std::string()
                                        : fmt::format(" on {} processes, grid {}", grid.world_size(), grid.spec().str()));
  TrainingRun run(cfg, grid, paths.data, device);
  if (root) fmt::print(stderr, "{}", run.describe());
  if (root && !grid.is_single_process() && gpu_world.comm)
    fmt::print(stderr, "communicator: {} (rank 0 on {})\n", gpu_world.how, device);
  if (root) fmt::print(stderr, "set-up took {:.1f} s\n", seconds_since(t_setup));

  if (args.resume) {
    const std::vector<ConfigChange> changes = run.restore(models::load_checkpoint(paths.checkpoint));
    if (root) {
      fmt::print(stderr, "resumed from {} at step {}\n", paths.checkpoint.string(), run.step());
      for (const auto& c : changes) fmt::print(stderr, "  changed on resume: {}: {} -> {}\n", c.key, c.before, c.after);
    }
    if (root && !changes.empty()) write_text_file(paths.config, cfg.text);  // the copy is what the run now uses
  } else if (root) {
    write_text_file(paths.config, cfg.text);
  }
  // Only rank 0 writes the metrics files: the others write to nowhere. A resumed run drops the rows
  // written after its checkpoint: it writes them again.
  std::optional<MetricsCsv> metrics, val_csv;
  if (root) {
    const auto columns = metrics_columns(cfg.training.rollout_steps);
    metrics.emplace(args.resume ? MetricsCsv::append(paths.metrics.string(), columns, run.step())
                                : MetricsCsv::create(paths.metrics.string(), columns));
    val_csv.emplace(args.resume ? MetricsCsv::append(paths.validation.string(), kValidationColumns, run.step())
                                : MetricsCsv::create(paths.validation.string(), kValidationColumns));
  }

  StopSignals signals;
  const int64_t total = cfg.training.steps;
  ProgressOptions progress;
  if (!root) progress.out = silent_stream();  // one progress line per job, from rank 0
  ProgressBar bar(total, run.step(), progress);
  int64_t last_checkpoint = args.resume ? run.step() : -1;
  int64_t steps_here = 0;
  std::optional<ValidationScores> last_scores;
  const auto t_train = std::chrono::steady_clock::now();
  // Every rank gathers its shards; rank 0 writes (atomically); every rank waits for the file.
  auto last_good = [&] {
    return last_checkpoint >= 0
               ? fmt::format("The last good checkpoint is {} (step {})", paths.checkpoint.string(), last_checkpoint)
               : std::string("No checkpoint was written yet");
  };
  // A write into the run directory; where the directory went away during it, the error says so.
  auto in_run_directory = [&](const char* what, const auto& write) {
    if (lock) lock->write_checked(what, write);
    else write();
  };
  // Every rank gathers the same whole tensors, so every rank sees a non-finite one and they stop together.
  auto save = [&] {
    const models::Checkpoint c = run.checkpoint();
    if (auto bad = models::first_non_finite(c)) {
      bar.finish();
      throw AgreedError(fmt::format(
          "training stopped: step {}: {} after the step (the loss was still finite); no checkpoint of this state is "
          "written. {}. Lower optimizer.lr or set training.clip_grad_norm, then resume.",
          run.step(), *bad, last_good()));
    }
    if (root) {
      lock->write_checked("the checkpoint", [&] { models::save_checkpoint(paths.checkpoint, c); });
    }
    grid.comm(dist::Group::world)->barrier();
    last_checkpoint = run.step();
  };

  while (run.step() < total) {
    const models::TrainResult r = run.train_step();
    if (!r.applied) {
      bar.finish();
      // Every rank skipped this step together (the stepper agrees on it), so they end together.
      throw AgreedError(fmt::format(
          "training stopped: {}\nThe weights were not changed by that step. {}. Lower optimizer.lr or set "
          "training.clip_grad_norm, then resume.",
          r.report, last_good()));
    }
    const int64_t step = run.step();
    if (lock) lock->check_unchanged("this step's metrics");
    ++steps_here;
    bar.update(step, r.loss);
    if (step % cfg.training.log_every == 0 || step == total) {
      std::vector<CsvCell> row = {step, r.loss, r.lr, r.grad_norm};
      for (double l : r.step_losses) row.emplace_back(l);
      row.emplace_back(seconds_since(t_train));
      if (metrics) in_run_directory("this step's metrics", [&] { metrics->write_row(row); });
    }
    if ((cfg.validation.every > 0 && step % cfg.validation.every == 0) || step == total) {
      ValidationScores s = run.validate();
      for (size_t k = 0; k < s.lead_hours.size(); ++k)
        for (size_t c = 0; c < s.variables.size(); ++c)
          if (val_csv)
            in_run_directory("the validation scores", [&] {
              val_csv->write_row({step, s.lead_hours[k], s.variables[c], s.rmse[k][c], s.persistence[k][c], s.loss});
            });
      bar.message(fmt::format("validation at step {}: loss {:.4g}\n{}", step, s.loss, format_scores(s)));
      last_scores = std::move(s);
    }
    // A signal may reach the ranks at different steps: they agree before anyone stops.
    const bool stop = any_rank_stops(grid, StopSignals::requested() || (args.stop_after > 0 && steps_here >= args.stop_after));
    if (step % cfg.training.checkpoint_every == 0 || step == total || stop) save();
    if (stop && step < total) {
      bar.finish();
      if (root)
        fmt::print(stderr, "stopped at step {} of {}; checkpoint {}\nresume with: {}gradsphere train {} --out {} --resume{}\n",
                   step, total, paths.checkpoint.string(),
                   grid.is_single_process() ? std::string() : fmt::format("mpiexec -n {} ", grid.world_size()),
                   args.config, paths.root.string(),
                   grid.is_single_process() ? std::string()
                                            : fmt::format(" --grid {} (or any other grid: the checkpoint holds whole tensors)",
                                                          grid.spec().str()));
      return StopSignals::requested() ? StopSignals::exit_code() : 0;
    }
  }
  bar.finish();

  if (!last_scores) last_scores = run.validate();  // a resumed run that was already complete
  std::vector<fs::path> maps;
  if (cfg.output.maps) maps = run.write_validation_maps(*last_scores, paths.maps);  // collective
  if (!root) return 0;
  write_loss_curve(paths.metrics, paths.validation, paths.loss_curve);
  write_skill_plot(*last_scores, paths.skill_plot);

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
  CLI::Option* out = sub->add_option("--out", args->out, "Run directory (default: output.dir of the configuration)");
  sub->add_option("--grid", args->grid,
                  "Process grid DATAxHxW under mpiexec (default: distributed.grid of the configuration, else every "
                  "process a data-parallel replica)");
  sub->add_option("--device", args->device,
                  "Where the model trains: cpu (default), cuda or cuda:N (one process; the data is read and the model "
                  "initialised on the CPU, so the initial weights are the CPU run's)");
  sub->add_flag("--resume", args->resume, "Continue the run whose checkpoint is in the run directory");
  sub->add_flag("--overwrite", args->overwrite,
                "Start afresh in a run directory that holds an earlier run (its checkpoint, metrics and pictures are "
                "replaced)");
  sub->add_option("--stop-after", args->stop_after,
                  "Stop after this many steps of this invocation, with a checkpoint, as an interruption would")
      ->check(CLI::NonNegativeNumber);
  commands.add(sub, [args, out] {
    args->out_given = out->count() > 0;
    return run_train(*args);
  });
}

}  // namespace gs::tools
