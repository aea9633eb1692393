// `[mpiexec -n N] gradsphere train CONFIG [--grid DxHxW|auto] [--device cuda] [--resume] [--out DIR] [--stop-after N]`:
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
#include <utility>

#include <fmt/format.h>

#include "distributed/nccl_communicator.h"
#include "distributed/world.h"
#include "engine/cuda_runtime.h"
#include "engine/factory.h"
#include "engine/error.h"
#include "models/checkpoint.h"
#include "tools/commands.h"
#include "tools/grid_plan.h"
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

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<std::string> metrics_columns(int64_t rollout_steps) {
  std::vector<std::string> c = {"step", "loss", "lr", "grad_norm"};
  for (int64_t k = 0; k < rollout_steps; ++k) c.push_back(fmt::format("loss_step{}", k + 1));
  c.push_back("seconds");
  return c;
}

// An ensemble's run adds its scores (rmse is then the ensemble mean's).
std::vector<std::string> validation_columns(int64_t members) {
  std::vector<std::string> c = {"step", "lead_hours", "variable", "rmse", "persistence_rmse", "val_loss"};
  if (members > 1) c.insert(c.end(), {"spread", "spread_skill", "crps"});
  return c;
}

TrainConfig load_config(const TrainArgs& args) {
  GS_CHECK(!args.out_given || !args.out.empty(), "train --out: expected a run directory, got an empty string");
  TrainConfig cfg = load_train_config(args.config);
  if (args.out_given) cfg.output.dir = args.out;
  return cfg;
}

Device train_device(const TrainArgs& args) {
  Device device = parse_device(args.device);
  // Under a launcher, `--device cuda` is each rank's own GPU (by its local rank).
  if (args.device == "cuda" && dist::launcher_world_size() > 1) device = dist::local_rank_device();
  if (!device.is_cpu()) cuda::require_device(device, "train --device");  // says why when there is no GPU
  return device;
}

// --grid auto (or distributed.grid: auto without --grid): the cost model's grid, as a --grid flag.
std::string planned_grid_flag(const TrainArgs& args, const TrainConfig& cfg, Device device, dist::CommPtr world) {
  const std::string& text = !args.grid.empty() ? args.grid : cfg.distributed.grid;
  if (text != "auto") return args.grid;
  return choose_grid(cfg, world ? world : dist::world_communicator(), device).str();
}

// What the set-up makes for the loop and the report, in the order it makes them: the
// configuration, the device and the process grid, the run directory (rank 0 holds its lock), the
// run, and the metrics files (rank 0's; the other ranks write to nowhere).
struct TrainSession {
  explicit TrainSession(const TrainArgs& args);  // the set-up

  // A write into the run directory; where the directory went away during it, the error says so.
  template <typename F>
  void in_run_directory(const char* what, const F& write) const {
    if (lock) lock->write_checked(what, write);
    else write();
  }

  TrainConfig cfg;
  Device device;
  dist::GpuWorld gpu_world;
  dist::ProcessGrid grid;
  bool root;
  RunPaths paths;
  std::optional<RunDirectoryLock> lock;
  std::optional<TrainingRun> run;
  std::optional<MetricsCsv> metrics, val_csv;

 private:
  void prepare_run_directory(const TrainArgs& args);
  void start_run(const TrainArgs& args);
  void open_metrics_files(const TrainArgs& args);
};

TrainSession::TrainSession(const TrainArgs& args)
    : cfg(load_config(args)),
      device(train_device(args)),
      gpu_world(device.is_cpu() ? dist::GpuWorld{} : dist::gpu_world_communicator(device)),
      grid(make_process_grid(planned_grid_flag(args, cfg, device, gpu_world.comm), cfg, "train", false, gpu_world.comm)),
      root(grid.is_root()),
      paths(cfg.output.dir) {
  // Before the run directory is touched (TrainingRun checks it again for other callers).
  check_device_grid(device, grid, "train");
  models::member_share(cfg.training.stepper.ensemble_members, grid);  // an ensemble axis needs a member per rank
  GS_CHECK(!(args.resume && args.overwrite), "train: --resume and --overwrite exclude each other");
  prepare_run_directory(args);
  start_run(args);
  open_metrics_files(args);
}

// Rank 0 owns the directory: it locks it, checks it and prepares it while the others wait (an
// error there ends every rank with its message).
void TrainSession::prepare_run_directory(const TrainArgs& args) {
  if (root) {
    lock.emplace(paths.root);
    if (int n = lock->remove_stale_temporaries())
      fmt::print(stderr, "removed {} temporary file(s) left in {} by an interrupted run\n", n, paths.root.string());
    if (args.overwrite) {
      // Only the files a run writes; anything else the user put in the directory stays.
      for (const fs::path& p : {paths.checkpoint, paths.metrics, paths.validation, paths.loss_curve, paths.skill_plot,
                                paths.spread_skill_plot, paths.rank_histogram})
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
}

// The run (data, model, optimizer), from its checkpoint with --resume; the configuration's copy in
// the run directory.
void TrainSession::start_run(const TrainArgs& args) {
  const auto t_setup = std::chrono::steady_clock::now();
  if (root)
    fmt::print(stderr, "gradsphere train: {} -> {}{}\n", cfg.source, paths.root.string(),
               grid.is_single_process() ? std::string()
                                        : fmt::format(" on {} processes, grid {}", grid.world_size(), grid.spec().str()));
  run.emplace(cfg, grid, paths.data, device);
  if (root) fmt::print(stderr, "{}", run->describe());
  if (root && !grid.is_single_process() && gpu_world.comm)
    fmt::print(stderr, "communicator: {} (rank 0 on {})\n", gpu_world.how, device);
  if (root) fmt::print(stderr, "set-up took {:.1f} s\n", seconds_since(t_setup));

  if (args.resume) {
    const std::vector<ConfigChange> changes = run->restore(models::load_checkpoint(paths.checkpoint));
    if (root) {
      fmt::print(stderr, "resumed from {} at step {}\n", paths.checkpoint.string(), run->step());
      for (const auto& c : changes) fmt::print(stderr, "  changed on resume: {}: {} -> {}\n", c.key, c.before, c.after);
    }
    if (root && !changes.empty()) write_text_file(paths.config, cfg.text);  // the copy is what the run now uses
  } else if (root) {
    write_text_file(paths.config, cfg.text);
  }
}

// Only rank 0 writes the metrics files. A resumed run drops the rows written after its
// checkpoint: it writes them again.
void TrainSession::open_metrics_files(const TrainArgs& args) {
  if (!root) return;
  const auto columns = metrics_columns(cfg.training.rollout_steps);
  metrics.emplace(args.resume ? MetricsCsv::append(paths.metrics.string(), columns, run->step())
                              : MetricsCsv::create(paths.metrics.string(), columns));
  const auto val_columns = validation_columns(cfg.training.stepper.ensemble_members);
  val_csv.emplace(args.resume ? MetricsCsv::append(paths.validation.string(), val_columns, run->step())
                              : MetricsCsv::create(paths.validation.string(), val_columns));
}

// How the loop ended, and what the report needs from it.
struct LoopEnd {
  std::optional<int> stopped;  // the exit code when a signal or --stop-after ended the run early
  int64_t steps_here = 0;      // steps run by this invocation
  std::optional<ValidationScores> last_scores;
  std::chrono::steady_clock::time_point t_train;
};

// The training steps with their metrics, validations and checkpoints.
class TrainLoop {
 public:
  TrainLoop(TrainSession& s, const TrainArgs& args)
      : s_(s), args_(args), total_(s.cfg.training.steps), bar_(total_, s.run->step(), progress_options(s)),
        last_checkpoint_(args.resume ? s.run->step() : -1) {}

  LoopEnd run() {
    LoopEnd end;
    end.t_train = std::chrono::steady_clock::now();
    TrainingRun& training = *s_.run;
    while (training.step() < total_) {
      const models::TrainResult r = training.train_step();
      if (!r.applied) {
        bar_.finish();
        // Every rank skipped this step together (the stepper agrees on it), so they end together.
        throw AgreedError(fmt::format(
            "training stopped: {}\nThe weights were not changed by that step. {}. Lower optimizer.lr or set "
            "training.clip_grad_norm, then resume.",
            r.report, last_good()));
      }
      const int64_t step = training.step();
      if (s_.lock) s_.lock->check_unchanged("this step's metrics");
      ++end.steps_here;
      bar_.update(step, r.loss);
      if (step % s_.cfg.training.log_every == 0 || step == total_) write_metrics_row(step, r, end.t_train);
      if ((s_.cfg.validation.every > 0 && step % s_.cfg.validation.every == 0) || step == total_)
        end.last_scores = validate(step);
      // A signal may reach the ranks at different steps: they agree before anyone stops, and on
      // the exit code (the signal's, on every rank, even one the signal has not reached yet).
      const auto [signal_code, stop_after] = agreed_stop(args_.stop_after > 0 && end.steps_here >= args_.stop_after);
      const bool stop = signal_code != 0 || stop_after;
      if (step % s_.cfg.training.checkpoint_every == 0 || step == total_ || stop) save();
      if (stop && step < total_) {
        bar_.finish();
        print_how_to_resume(step);
        end.stopped = signal_code;
        return end;
      }
    }
    bar_.finish();
    return end;
  }

 private:
  // Over every rank, in one all-reduce: 128 + the signal that asked any rank to stop (0 for none),
  // and whether any rank reached --stop-after.
  std::pair<int, bool> agreed_stop(bool stop_after_here) const {
    Tensor v = from_vector(
        std::vector<int64_t>{StopSignals::requested() ? StopSignals::exit_code() : 0, stop_after_here ? 1 : 0});
    if (!s_.grid.is_single_process()) s_.grid.comm(dist::Group::world)->all_reduce(v, dist::ReduceOp::max);
    const auto r = v.to_vector<int64_t>();
    return {static_cast<int>(r[0]), r[1] != 0};
  }

  static ProgressOptions progress_options(const TrainSession& s) {
    ProgressOptions progress;
    if (!s.root) progress.out = silent_stream();  // one progress line per job, from rank 0
    return progress;
  }

  std::string last_good() const {
    return last_checkpoint_ >= 0 ? fmt::format("The last good checkpoint is {} (step {})", s_.paths.checkpoint.string(),
                                               last_checkpoint_)
                                 : std::string("No checkpoint was written yet");
  }

  void write_metrics_row(int64_t step, const models::TrainResult& r, std::chrono::steady_clock::time_point t_train) {
    std::vector<CsvCell> row = {step, r.loss, r.lr, r.grad_norm};
    for (double l : r.step_losses) row.emplace_back(l);
    row.emplace_back(seconds_since(t_train));
    if (s_.metrics) s_.in_run_directory("this step's metrics", [&] { s_.metrics->write_row(row); });
  }

  ValidationScores validate(int64_t step) {
    ValidationScores v = s_.run->validate();
    for (size_t k = 0; k < v.lead_hours.size(); ++k)
      for (size_t c = 0; c < v.variables.size(); ++c)
        if (s_.val_csv)
          s_.in_run_directory("the validation scores", [&] {
            s_.val_csv->write_row(v.members > 1 ? std::vector<CsvCell>{step, v.lead_hours[k], v.variables[c], v.rmse[k][c],
                                                                         v.persistence[k][c], v.loss, v.spread[k][c],
                                                                         v.spread_skill[k][c], v.crps[k][c]}
                                                : std::vector<CsvCell>{step, v.lead_hours[k], v.variables[c], v.rmse[k][c],
                                                                         v.persistence[k][c], v.loss});
          });
    bar_.message(fmt::format("validation at step {}: loss {:.4g}\n{}", step, v.loss, format_scores(v)));
    return v;
  }

  // Every rank gathers its shards; rank 0 writes (atomically); every rank waits for the file. Every
  // rank gathers the same whole tensors, so every rank sees a non-finite one and they stop together.
  void save() {
    const models::Checkpoint c = s_.run->checkpoint();
    if (auto bad = models::first_non_finite(c)) {
      bar_.finish();
      throw AgreedError(fmt::format(
          "training stopped: step {}: {} after the step (the loss was still finite); no checkpoint of this state is "
          "written. {}. Lower optimizer.lr or set training.clip_grad_norm, then resume.",
          s_.run->step(), *bad, last_good()));
    }
    if (s_.root) {
      s_.lock->write_checked("the checkpoint", [&] { models::save_checkpoint(s_.paths.checkpoint, c); });
    }
    s_.grid.comm(dist::Group::world)->barrier();
    last_checkpoint_ = s_.run->step();
  }

  void print_how_to_resume(int64_t step) const {
    if (!s_.root) return;
    const dist::ProcessGrid& grid = s_.grid;
    fmt::print(stderr, "stopped at step {} of {}; checkpoint {}\nresume with: {}gradsphere train {} --out {} --resume{}\n",
               step, total_, s_.paths.checkpoint.string(),
               grid.is_single_process() ? std::string() : fmt::format("mpiexec -n {} ", grid.world_size()),
               args_.config, s_.paths.root.string(),
               grid.is_single_process() ? std::string()
                                        : fmt::format(" --grid {} (or any other grid: the checkpoint holds whole tensors)",
                                                      grid.spec().str()));
  }

  TrainSession& s_;
  const TrainArgs& args_;
  const int64_t total_;
  ProgressBar bar_;
  int64_t last_checkpoint_;
};

// After the last step: the final validation, the maps (collective), and rank 0's plots and summary.
int report(TrainSession& s, LoopEnd& end) {
  TrainingRun& run = *s.run;
  const RunPaths& paths = s.paths;
  if (!end.last_scores) end.last_scores = run.validate();  // a resumed run that was already complete
  std::vector<fs::path> maps;
  if (s.cfg.output.maps) maps = run.write_validation_maps(*end.last_scores, paths.maps);  // collective
  if (!s.root) return 0;
  write_loss_curve(paths.metrics, paths.validation, paths.loss_curve);
  write_skill_plot(*end.last_scores, paths.skill_plot);
  const bool ensemble = end.last_scores->members > 1;
  if (ensemble) write_ensemble_plots(*end.last_scores, paths.spread_skill_plot, paths.rank_histogram);

  fmt::print("trained {} steps in {:.1f} s ({} this run)\n", s.cfg.training.steps, seconds_since(end.t_train),
             end.steps_here);
  fmt::print("final validation (area-weighted RMSE{}, physical units):\n{}", ensemble ? " of the ensemble mean" : "",
             format_scores(*end.last_scores));
  fmt::print("checkpoint:  {}\n", paths.checkpoint.string());
  fmt::print("metrics:     {} and {}\n", paths.metrics.string(), paths.validation.string());
  fmt::print("loss curve:  {}\n", paths.loss_curve.string());
  fmt::print("skill plot:  {}\n", paths.skill_plot.string());
  if (ensemble)
    fmt::print("ensemble:    {} and {}\n", paths.spread_skill_plot.string(), paths.rank_histogram.string());
  if (!maps.empty()) fmt::print("maps:        {} ({} files)\n", paths.maps.string(), maps.size());
  return 0;
}

int run_train(const TrainArgs& args) {
  TrainSession session(args);
  StopSignals signals;  // until the report is written
  LoopEnd end = TrainLoop(session, args).run();
  if (end.stopped) return *end.stopped;
  return report(session, end);
}

}  // namespace

void add_train_command(CLI::App& app, CommandRegistry& commands) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* sub = app.add_subcommand("train", "Train a model from a YAML configuration");
  sub->add_option("config", args->config, "Configuration file (see tools/configs/swe_small.yaml)")->required();
  CLI::Option* out = sub->add_option("--out", args->out, "Run directory (default: output.dir of the configuration)");
  sub->add_option("--grid", args->grid,
                  "Process grid [ENSEMBLEx]DATAxHxW under mpiexec, or auto to choose it from the cost model (default: "
                  "distributed.grid of the configuration, else every process a data-parallel replica)");
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
