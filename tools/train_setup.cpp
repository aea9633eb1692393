#include "tools/train_setup.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <sstream>

#include <fmt/format.h>

#include "distributed/collectives.h"
#include "distributed/world.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "engine/random.h"
#include "models/data/netcdf_io.h"
#include "models/data/selected_source.h"
#include "models/data/swe_data.h"
#include "models/noise_sfno.h"
#include "models/optim.h"
#include "models/sfno.h"

namespace gs::tools {
namespace {

std::vector<std::filesystem::path> as_paths(const std::vector<std::string>& files) {
  return {files.begin(), files.end()};
}

// Generating a set is bounded up front: its bytes against the machine's memory and its estimated
// time against data.swe.max_minutes, each an error naming the estimate; a long one reports progress.
models::TrajectoryData generate_bounded(const models::SweDataOptions& options, const char* name, double max_minutes,
                                        bool report) {
  const double bytes = static_cast<double>(models::swe_output_bytes(options));
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  GS_CHECK(bytes <= 0.5 * memory,
           "data.swe: the {} set ({} trajectories x {} states x {} fields of {}x{}) needs {:.3g} GB, more than half of "
           "this machine's {:.3g} GB; use fewer trajectories, states or grid points",
           name, options.n_trajectories, options.states_per_trajectory, models::swe_channels(options), options.nlat,
           options.nlon, bytes / 1e9,
           memory / 1e9);
  const models::SweWork work = models::estimate_swe_work(options);
  const double seconds = work.seconds();
  GS_CHECK(seconds <= max_minutes * 60.0,
           "data.swe: generating the {} set ({} trajectories x {} states on {}x{}: {} solver steps, {:.3g} ms each "
           "measured here, on {} thread(s)) would take an estimated {:.3g} minutes; expected at most data.swe.max_minutes "
           "= {:g}. Use fewer trajectories or states, a larger dt_hours, a shorter spinup_hours, or raise max_minutes",
           name, options.n_trajectories, options.states_per_trajectory, options.nlat, options.nlon, work.solver_steps,
           work.seconds_per_step * 1e3, work.threads, seconds / 60.0, max_minutes);
  models::SweProgress progress;
  if (report && seconds > 10.0) {
    const auto t0 = std::chrono::steady_clock::now();
    fmt::print(stderr, "generating the {} set: an estimated {:.0f} s\n", name, seconds);
    progress = [t0, name, last = -1.0](int64_t done, int64_t total) mutable {
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (t - last < 5.0 && done < total) return;
      last = t;
      fmt::print(stderr, "generating the {} set: {}/{} trajectories, {:.0f} s elapsed\n", name, done, total, t);
    };
  }
  return models::generate_swe_data(options, progress);
}

// A generated set: in memory on one process; on several, written once by world rank 0 (atomically)
// and opened by every rank after a barrier. A failure on rank 0 ends the job with its message
// (abort_job) before the others read anything.
std::shared_ptr<models::TrajectorySource> generated(const models::SweDataOptions& options, const char* name,
                                                    double max_minutes, const dist::ProcessGrid& grid,
                                                    const std::filesystem::path& scratch_dir) {
  const std::filesystem::path path = scratch_dir / fmt::format("swe_{}.nc", name);
  const models::NetcdfWriteOptions write{.title = fmt::format("gradsphere generated shallow-water {} set", name),
                                         .history = "written by gradsphere train (rollout --data reads it)"};
  if (grid.is_single_process()) {
    models::TrajectoryData data = generate_bounded(options, name, max_minutes, /*report=*/true);
    if (!scratch_dir.empty()) {  // kept beside the run, for rollout --data and for inspection
      std::filesystem::create_directories(scratch_dir);
      models::write_netcdf(path, data, write);
    }
    return models::memory_source(std::move(data));
  }
  GS_CHECK(!scratch_dir.empty(), "data: generated data on {} processes needs a directory to write it to",
           grid.world_size());
  if (grid.is_root()) {
    std::filesystem::create_directories(scratch_dir);
    models::write_netcdf(path, generate_bounded(options, name, max_minutes, /*report=*/true), write);
  }
  grid.comm(dist::Group::world)->barrier();
  models::NetcdfReadOptions read;
  read.dtype = options.dtype;
  return models::open_netcdf({path}, read);
}

// data.variables over a generated set (all its channels, prognostic, when none are given).
std::shared_ptr<models::TrajectorySource> with_variables(const TrainConfig& c,
                                                         std::shared_ptr<models::TrajectorySource> source) {
  if (c.data.variables.empty()) return source;
  return models::select_variables(std::move(source), c.data.variables, "the generated shallow-water data");
}

}  // namespace

std::shared_ptr<models::TrajectorySource> open_data_files(const TrainConfig& c, const std::vector<std::string>& files) {
  if (c.data.source == "netcdf") {
    models::NetcdfReadOptions o = c.data.netcdf;
    o.variables = c.data.variables;
    return models::open_netcdf(as_paths(files), o);
  }
  // Generated data written to files (a multi-process run's scratch copies, rollout --data).
  models::NetcdfReadOptions o;
  o.dtype = c.data.dtype;
  return with_variables(c, models::open_netcdf(as_paths(files), o));
}

std::shared_ptr<models::TrajectorySource> load_validation_data(const TrainConfig& c, const dist::ProcessGrid& grid,
                                                                const std::filesystem::path& scratch_dir) {
  if (c.data.source == "netcdf") return open_data_files(c, c.data.validation_files);
  models::SweDataOptions v = c.data.swe;
  v.n_trajectories = c.data.validation_trajectories;
  v.seed = c.data.validation_seed;
  return with_variables(c, generated(v, "validation", c.data.max_generation_minutes, grid, scratch_dir));
}

TrainingData load_training_data(const TrainConfig& c, const dist::ProcessGrid& grid,
                                const std::filesystem::path& scratch_dir) {
  TrainingData d;
  d.train = c.data.source == "netcdf"
                ? open_data_files(c, c.data.train_files)
                : with_variables(c, generated(c.data.swe, "train", c.data.max_generation_minutes, grid, scratch_dir));
  d.validation = load_validation_data(c, grid, scratch_dir);
  const models::TrajectoryInfo &t = d.train->info(), &v = d.validation->info();
  GS_CHECK(v.variables == t.variables && v.roles == t.roles && v.nlat == t.nlat && v.nlon == t.nlon &&
               v.grid == t.grid,
           "validation data ({} x {}, variables [{}]) does not match the training data ({} x {}, variables [{}])",
           v.nlat, v.nlon, fmt::join(v.variables, ", "), t.nlat, t.nlon, fmt::join(t.variables, ", "));
  const dist::Block rows = grid.local_lat(t.nlat), cols = grid.local_lon(t.nlon);
  const models::StatsShare share{.rows = {rows.start, rows.count},
                                 .cols = {cols.start, cols.count},
                                 .part = grid.data_rank(),
                                 .parts = grid.data_size()};
  models::SumOverRanks sum;
  if (!grid.is_single_process())
    sum = [&](std::vector<int64_t>& v) {
      Tensor t = from_vector(v, {static_cast<int64_t>(v.size())});
      grid.comm(dist::Group::world)->all_reduce(t, dist::ReduceOp::sum);
      v = t.to_vector<int64_t>();
    };
  d.normalizer = models::Normalizer::fit(*d.train, share, sum, c.loss.residual_scaling);
  d.train_windows = models::list_windows(t, c.training.rollout_steps);
  GS_CHECK(!d.train_windows.empty(),
           "training.rollout_steps {} needs trajectories of at least {} states; the training data has fewer",
           c.training.rollout_steps, c.training.rollout_steps + 1);
  GS_CHECK(!models::list_windows(v, c.validation.lead_steps).empty(),
           "validation.lead_steps {} needs validation trajectories of at least {} states; they have fewer",
           c.validation.lead_steps, c.validation.lead_steps + 1);
  d.area_weights = sphere::area_weights_coslat(t.grid, t.nlat);
  return d;
}

dist::ProcessGrid make_process_grid(const std::string& flag, const TrainConfig& cfg, const char* command,
                                    bool config_grid_if_it_fits, dist::CommPtr world) {
  if (!world) world = dist::world_communicator();
  GS_CHECK(flag != "auto", "{} --grid auto: the cost model plans training steps (train --grid auto); {} expects a "
           "grid [ENSEMBLEx]DATAxHxW, e.g. {}x1x1", command, command, world->size());
  std::string text = !flag.empty() ? flag : cfg.distributed.grid;
  if (text == "auto") text.clear();  // a training configuration's choice: here every process a data replica
  if (flag.empty() && config_grid_if_it_fits && !text.empty() && dist::parse_grid(text).size() != world->size())
    text.clear();
  const dist::GridSpec spec = text.empty() ? dist::GridSpec{world->size(), 1, 1} : dist::parse_grid(text);
  GS_CHECK(spec.size() == world->size(),
           "{}: the grid {} has {} ranks but the job has {} processes; start it with mpiexec -n {} (or pass a "
           "grid of {} ranks)",
           command, spec.str(), spec.size(), world->size(), spec.size(), world->size());
  return dist::ProcessGrid::create(world, spec);
}

std::shared_ptr<models::Model> build_model(const TrainConfig& c, const models::TrajectoryInfo& data,
                                           const dist::ProcessGrid& grid) {
  const std::string grid_name(sphere::grid_name(data.grid));
  if (c.model.type == "sfno") {
    models::SfnoOptions o = c.model.sfno;
    o.img_size = {data.nlat, data.nlon};
    o.grid = grid_name;
    o.in_chans = data.layout().model_inputs();  // prognostic + forcing
    o.out_chans = data.layout().model_outputs();  // prognostic + diagnostic
    return std::make_shared<models::SFNO>(o, grid);
  }
  models::NoiseSfnoOptions o = c.model.noise_sfno;
  o.img_shape = {data.nlat, data.nlon};
  o.data_grid = grid_name;
  o.in_chans = data.layout().model_inputs();
  o.out_chans = data.layout().model_outputs();
  return std::make_shared<models::NoiseConditionedSFNO>(o, grid);
}

std::shared_ptr<models::Optimizer> build_optimizer(const TrainConfig& c, const models::Model& model) {
  auto params = model.named_parameters();
  if (c.optimizer.type == "sgd") return std::make_shared<models::SGD>(params, c.optimizer.sgd);
  if (c.optimizer.type == "adamw") return std::make_shared<models::AdamW>(params, c.optimizer.adam);
  return std::make_shared<models::Adam>(params, c.optimizer.adam);
}

std::shared_ptr<models::LrSchedule> build_schedule(const TrainConfig& c) {
  const double lr = c.optimizer.type == "sgd" ? c.optimizer.sgd.lr : c.optimizer.adam.lr;
  const auto& s = c.schedule;
  if (s.type == "warmup_cosine") {
    GS_CHECK(s.warmup_steps < c.training.steps,
             "schedule.warmup_steps: expected fewer than training.steps ({}), got {}", c.training.steps,
             s.warmup_steps);
    return std::make_shared<models::WarmupCosineLr>(models::WarmupCosineOptions{
        .base_lr = lr, .min_lr = s.min_lr, .warmup_steps = s.warmup_steps, .total_steps = c.training.steps});
  }
  if (s.type == "step") return std::make_shared<models::StepLr>(lr, s.step_size, s.gamma);
  if (s.type == "reduce_on_plateau")
    return std::make_shared<models::ReduceLrOnPlateau>(models::PlateauOptions{.base_lr = lr,
                                                                              .factor = s.factor,
                                                                              .patience = s.patience,
                                                                              .threshold = s.threshold,
                                                                              .cooldown = s.cooldown,
                                                                              .min_lr = s.min_lr});
  return std::make_shared<models::ConstantLr>(lr);
}

std::vector<Window> batch_windows(const std::vector<Window>& windows, int64_t batch_size, uint64_t seed,
                                  int64_t step) {
  GS_CHECK(!windows.empty() && batch_size >= 1 && step >= 0,
           "batch_windows: expected windows, batch_size >= 1 and step >= 0, got {} windows, batch {}, step {}",
           windows.size(), batch_size, step);
  const int64_t n = static_cast<int64_t>(windows.size());
  // The epoch permutation is recomputed per call (n is small next to a training step's work).
  auto permutation = [&](int64_t epoch) {
    std::vector<int64_t> p(n);
    std::iota(p.begin(), p.end(), 0);
    const RandomKey key{seed, 0x6261746368ULL ^ (static_cast<uint64_t>(epoch) << 40)};  // "batch"
    for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates with counter-based draws
      auto w = philox4x32(key, static_cast<uint64_t>(i));
      const int64_t j = static_cast<int64_t>(uniform_f64(w[0], w[1]) * static_cast<double>(i + 1));
      std::swap(p[i], p[std::min(j, i)]);
    }
    return p;
  };
  std::vector<Window> out;
  int64_t pos = step * batch_size, cached_epoch = -1;
  std::vector<int64_t> perm;
  for (int64_t k = 0; k < batch_size; ++k, ++pos) {
    const int64_t epoch = pos / n;
    if (epoch != cached_epoch) perm = permutation(epoch), cached_epoch = epoch;
    out.push_back(windows[perm[pos % n]]);
  }
  return out;
}

std::string normalizer_to_string(const models::Normalizer& n) {
  auto join = [](const std::vector<double>& v) {
    std::string s;
    for (double x : v) {
      if (!s.empty()) s += ',';
      s += fmt::format("{:.17g}", x);
    }
    return s;
  };
  std::string s = "mean=" + join(n.mean) + ";std=" + join(n.std);
  if (!n.residual_std.empty()) s += ";residual_std=" + join(n.residual_std);
  return s;
}

models::Normalizer normalizer_from_string(const std::string& s) {
  models::Normalizer n;
  auto parse = [&](const std::string& prefix, std::vector<double>& out) {
    auto b = s.find(prefix);
    GS_CHECK(b != std::string::npos, "normaliser metadata: expected '{}...', got '{}'", prefix, s);
    b += prefix.size();
    auto e = s.find(';', b);
    std::stringstream ss(s.substr(b, e == std::string::npos ? std::string::npos : e - b));
    std::string item;
    while (std::getline(ss, item, ',')) {
      try {
        out.push_back(std::stod(item));
      } catch (const std::exception&) {
        fail("normaliser metadata: '{}' is not a number (in '{}')", item, s);
      }
    }
  };
  parse("mean=", n.mean);
  parse("std=", n.std);
  if (s.find("residual_std=") != std::string::npos) parse("residual_std=", n.residual_std);
  GS_CHECK(!n.mean.empty() && n.mean.size() == n.std.size(),
           "normaliser metadata: expected as many means as standard deviations, got {} and {}", n.mean.size(),
           n.std.size());
  return n;
}

namespace {

// The variable a channel belongs to: T for T_3 (a level of T), else the channel itself.
std::string variable_of(const models::TrajectoryInfo& data, size_t c) {
  const std::string& name = data.variables[c];
  if (data.levels.empty() || !data.levels[c].has_level()) return name;
  const std::string suffix = fmt::format("_{}", data.levels[c].index);
  return name.size() > suffix.size() && name.ends_with(suffix) ? name.substr(0, name.size() - suffix.size()) : name;
}

}  // namespace

std::vector<double> loss_scales(const LossConfig& loss, const models::TrajectoryInfo& data,
                                const models::Normalizer& norm) {
  const models::ChannelLayout l = data.layout();
  std::vector<size_t> outputs;  // data channel of each output channel
  for (int64_t c : models::output_channel_indices(l)) outputs.push_back(static_cast<size_t>(c));
  std::vector<double> scale(outputs.size(), 1.0);
  // A variable's weight (every level) first, then one channel's (T_0), whatever their order in the config.
  std::vector<bool> named(loss.weights.size(), false);
  for (const bool channel_pass : {false, true})
    for (size_t i = 0; i < loss.weights.size(); ++i) {
      const auto& [name, w] = loss.weights[i];
      for (size_t o = 0; o < outputs.size(); ++o) {
        const bool is_channel = data.variables[outputs[o]] == name && variable_of(data, outputs[o]) != name;
        const bool is_variable = variable_of(data, outputs[o]) == name;
        if (channel_pass ? is_channel : is_variable) scale[o] = w, named[i] = true;
      }
    }
  for (size_t i = 0; i < loss.weights.size(); ++i) {
    const std::string& name = loss.weights[i].first;
    if (!named[i]) {
      std::vector<std::string> names;
      for (size_t o : outputs) {
        for (const std::string& n : {data.variables[o], variable_of(data, o)})
          if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
      }
      fail("loss.weights: '{}' is not a predicted variable of the data (weights apply to prognostic and diagnostic "
           "variables, or to one level of one, e.g. T_0); they are: {}",
           name, fmt::join(names, ", "));
    }
  }
  if (loss.residual_scaling) {
    GS_CHECK(norm.residual_std.size() == norm.std.size(),
             "loss.residual_scaling: the normaliser has no residual statistics (fit it with residual = true)");
    for (size_t o = 0; o < outputs.size(); ++o)
      if (static_cast<int64_t>(outputs[o]) < l.prognostic) scale[o] *= norm.std[outputs[o]] / norm.residual_std[outputs[o]];
  }
  if (std::all_of(scale.begin(), scale.end(), [](double x) { return x == 1.0; })) return {};
  return scale;
}

models::StepperOptions stepper_options(const TrainConfig& config, const models::TrajectoryInfo& data,
                                       const models::Normalizer& norm) {
  models::StepperOptions o = config.training.stepper;
  o.layout = data.layout();
  o.loss_scale = loss_scales(config.loss, data, norm);
  o.loss.grid = data.grid;  // the energy score transforms on the data's grid
  return o;
}

std::string describe_variables(const models::TrajectoryInfo& data, const models::Normalizer& norm) {
  std::string out;
  const models::ChannelLayout l = data.layout();
  const std::vector<std::pair<models::VariableRole, int64_t>> groups = {
      {models::VariableRole::prognostic, l.prognostic},
      {models::VariableRole::forcing, l.forcing},
      {models::VariableRole::diagnostic, l.diagnostic}};
  size_t c = 0;
  for (const auto& [role, count] : groups) {
    if (count == 0) continue;
    std::vector<std::string> items;
    for (int64_t k = 0; k < count; ++k, ++c) {
      std::string item = data.variables[c];
      if (!data.levels.empty() && data.levels[c].has_level()) {
        const models::ChannelLevel& lv = data.levels[c];
        item += fmt::format(" ({} {:g}{})", lv.coordinate, lv.value, lv.units.empty() ? "" : " " + lv.units);
      }
      if (!data.units.empty() && !data.units[c].empty()) item += " [" + data.units[c] + "]";
      items.push_back(item);
    }
    out += fmt::format("  {} ({}): {}\n", models::role_name(role), count, fmt::join(items, ", "));
  }
  for (size_t k = 0; k < norm.missing.size() && k < data.variables.size(); ++k)
    if (norm.missing[k] > 0)
      out += fmt::format("  {}: {} missing value(s) in the training data, masked in the loss and the metrics\n",
                         data.variables[k], norm.missing[k]);
  for (const auto& note : data.notes) out += "  note: " + note + "\n";
  return out;
}

}  // namespace gs::tools
