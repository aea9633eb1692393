#include "tools/train_run.h"

#include <chrono>

#include <fmt/format.h>

#include "distributed/collectives.h"
#include "distributed/shards.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "models/sharded_state.h"
#include "ops/ops.h"
#include "tools/run_outputs.h"

namespace gs::tools {

RunPaths::RunPaths(const std::filesystem::path& r)
    : root(r),
      checkpoint(r / "checkpoint.safetensors"),
      config(r / "config.yaml"),
      metrics(r / "metrics.csv"),
      validation(r / "validation.csv"),
      loss_curve(r / "loss_curve.png"),
      skill_plot(r / "skill_by_lead.png"),
      maps(r / "maps"),
      data(r / "data"),
      spread_skill_plot(r / "spread_skill.png"),
      rank_histogram(r / "rank_histogram.png") {}

void RunPaths::create() const { std::filesystem::create_directories(maps); }

void check_device_grid(Device device, const dist::ProcessGrid& grid, const char* command) {
  // The spatially split model's pieces (its halo point lists, the distributed transforms' tables)
  // have not run on a GPU; data parallelism only reduces gradients, which the communicators move.
  GS_CHECK(device.is_cpu() || !grid.spatially_split(),
           "{} --device {}: on GPUs the grid must be data-parallel only (Dx1x1), got {} which splits the sphere "
           "over {} ranks; use --grid {}x1x1, or the CPU for spatial parallelism",
           command, device.str(), grid.spec().str(), grid.h_size() * grid.w_size(), grid.world_size());
}

void check_batch_grid(int64_t batch_size, const dist::ProcessGrid& grid, const char* command) {
  GS_CHECK(batch_size % grid.data_size() == 0,
           "{}: training.batch_size {} does not split evenly over {} data-parallel replicas (grid {}); use a "
           "batch size divisible by the grid's data size",
           command, batch_size, grid.data_size(), grid.spec().str());
}

TrainingRun::TrainingRun(const TrainConfig& config, const dist::ProcessGrid& grid,
                         const std::filesystem::path& scratch_dir, Device device)
    : cfg_(config), grid_(grid), device_(device) {
  check_device_grid(device, grid, "train");
  check_batch_grid(cfg_.training.batch_size, grid, "train");
  const auto t0 = std::chrono::steady_clock::now();
  data_ = load_training_data(cfg_, grid, scratch_dir);
  data_seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const models::TrajectoryInfo& info = data_.info();
  rows_ = grid.local_lat(info.nlat);
  cols_ = grid.local_lon(info.nlon);
  model_ = build_model(cfg_, info, grid);
  if (!device_.is_cpu()) model_->to(device_);  // before the optimizer allocates its state beside it
  model_->train();
  parameters_ = count_whole_parameters();
  stepper_ = std::make_unique<models::Stepper>(model_, build_optimizer(cfg_, *model_), data_.area_weights,
                                               stepper_options(cfg_, info, data_.normalizer), build_schedule(cfg_));
  if (!grid_.is_single_process())
    stepper_->set_distributed(
        grid_, {.mode = cfg_.distributed.tape_reducer ? dist::ReducerMode::tape : dist::ReducerMode::hooks});
  // Every replica validates every sample, on its tile.
  validation_ = make_validation_set(*data_.validation, data_.normalizer, cfg_.validation.samples,
                                    cfg_.validation.lead_steps, cfg_.data.dtype, {rows_.start, rows_.count},
                                    {cols_.start, cols_.count});
  if (!device_.is_cpu()) validation_ = {to(validation_.input, device_), to(validation_.truth, device_)};
}

int64_t TrainingRun::count_whole_parameters() const {
  // Replicated parameters count once; a shard's elements are summed over the ranks that split it.
  int64_t replicated = 0;
  std::vector<int64_t> split(4, 0);  // by which axes split the parameter: none, h, w, both
  for (const auto& p : model_->named_parameters()) {
    const int64_t n = p.tensor.numel() * (is_complex(p.tensor.dtype()) ? 2 : 1);
    const int axes = (p.distribution.splits(dist::GridAxis::h) ? 1 : 0) + (p.distribution.splits(dist::GridAxis::w) ? 2 : 0);
    (axes == 0 ? replicated : split[static_cast<size_t>(axes)]) += n;
  }
  if (!grid_.spatially_split()) return replicated + split[1] + split[2] + split[3];
  auto summed = [&](int64_t n, dist::Group g) {
    Tensor t = from_vector(std::vector<int64_t>{n});
    grid_.comm(g)->all_reduce(t, dist::ReduceOp::sum);
    return t.item<int64_t>();
  };
  return replicated + summed(split[1], dist::Group::h) + summed(split[2], dist::Group::w) +
         summed(split[3], dist::Group::spatial);
}

std::string TrainingRun::describe() const {
  const auto& t = data_.info();
  int64_t states = 0;
  for (int64_t n : t.states) states += n;
  std::string s = fmt::format("data: {} {} {}x{}, variables [{}], {} training trajectories ({} states, {} windows), "
                              "{} validation trajectories, dt {:g} h ({:.1f} s)\n",
                              cfg_.data.source, sphere::grid_name(t.grid), t.nlat, t.nlon,
                              fmt::join(t.variables, ", "), t.trajectories(), states,
                              data_.train_windows.size(), data_.validation->info().trajectories(), t.dt_hours,
                              data_seconds_);
  s += describe_variables(t, data_.normalizer);
  s += fmt::format("model: {} with {} parameters ({}), {}{}\n", model_->type_name(), parameters_,
                   "real degrees of freedom", cfg_.data.dtype == DType::f64 ? "f64" : "f32",
                   device_.is_cpu() ? "" : ", on " + device_.str());
  s += fmt::format("optimizer: {} lr {:g}, schedule {}; {} steps of batch {} x {} rollout steps\n",
                   stepper_->optimizer().type_name(), stepper_->optimizer().lr(), cfg_.schedule.type,
                   cfg_.training.steps, cfg_.training.batch_size, cfg_.training.rollout_steps);
  const models::StepperOptions& so = stepper_->options();
  s += fmt::format("loss: {}{}\n", so.loss.str(),
                   so.ensemble_members > 1 ? fmt::format(", {} ensemble members per initial condition", so.ensemble_members)
                                           : std::string());
  return s;
}

models::TrainResult TrainingRun::train_step() {
  // The global batch is a function of (seed, step); this replica reads its equal share of it, on its tile.
  auto windows = batch_windows(data_.train_windows, cfg_.training.batch_size, cfg_.seed, step());
  const dist::Block share = dist::split_block(static_cast<int64_t>(windows.size()), grid_.data_size(), grid_.data_rank());
  windows = std::vector<Window>(windows.begin() + share.start, windows.begin() + share.start + share.count);
  const auto t0 = std::chrono::steady_clock::now();
  models::Batch batch = models::make_batch(*data_.train, data_.normalizer, windows, cfg_.training.rollout_steps,
                                          cfg_.data.dtype, {rows_.start, rows_.count}, {cols_.start, cols_.count});
  if (!device_.is_cpu()) batch = {to(batch.input, device_), to(batch.targets, device_)};
  const auto t1 = std::chrono::steady_clock::now();
  models::TrainResult r = stepper_->train_on_batch(batch);
  timing_.data_seconds += std::chrono::duration<double>(t1 - t0).count();
  timing_.compute_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  ++timing_.steps;
  return r;
}

ValidationScores TrainingRun::validate() {
  model_->eval();
  ValidationScores s = tools::validate(*stepper_, validation_, data_.normalizer, data_.area_weights,
                                       data_.info().variables, data_.info().dt_hours, cfg_.training.batch_size, grid_,
                                       data_.info().nlon);
  model_->train();
  if (auto* sched = stepper_->schedule()) {
    // Rank 0's loss on every rank: a plateau schedule must change every replica's rate at once,
    // also where the ranks' devices round differently.
    double loss = s.loss;
    if (!grid_.is_single_process()) {
      Tensor t = from_vector(std::vector<double>{loss});
      grid_.comm(dist::Group::world)->broadcast(t, 0);
      loss = t.item<double>();
    }
    sched->step_metric(loss);
  }
  return s;
}

models::Checkpoint TrainingRun::checkpoint() const {
  models::Checkpoint c;
  c.model = models::whole_state_dict(*model_, grid_);
  c.optimizer = models::whole_training_state(stepper_->training_state(), *model_, grid_);
  c.step = step();
  c.rng.seed = cfg_.seed;
  c.config = cfg_.text;
  c.metadata[kMetaNormalizer] = normalizer_to_string(data_.normalizer);
  c.metadata[kMetaVariables] = fmt::format("{}", fmt::join(data_.info().variables, ","));
  return c;
}

namespace {

// The settings a resumed run can follow: they shape the rest of the run, not the state the
// checkpoint holds (weights, optimizer moments, schedule position, data order).
bool safe_to_change_on_resume(const std::string& key) {
  auto under = [&](const char* section) { return key.rfind(std::string(section) + ".", 0) == 0; };
  if (key == "schedule.type") return false;  // the schedule's saved state belongs to its type
  return key == "optimizer.lr" || under("schedule") || key == "training.steps" || key == "training.log_every" ||
         key == "training.checkpoint_every" || key == "training.clip_grad_norm" || key == "validation.every" ||
         under("output") || under("distributed");
}

}  // namespace

std::vector<ConfigChange> TrainingRun::restore(const models::Checkpoint& c) {
  const std::vector<ConfigChange> changes = config_changes(c.config, cfg_.text);
  std::vector<std::string> refused;
  for (const auto& ch : changes)
    if (!safe_to_change_on_resume(ch.key)) refused.push_back(fmt::format("{}: {} -> {}", ch.key, ch.before, ch.after));
  GS_CHECK(refused.empty(),
           "resume: the configuration changed where a resumed run cannot follow: {}. Those keys must keep the values "
           "the checkpoint was trained with (its configuration is config.yaml in the run directory). A resume may "
           "change optimizer.lr, the schedule's settings (not its type), training.steps, log_every, "
           "checkpoint_every and clip_grad_norm, validation.every, output.* and distributed.*",
           fmt::join(refused, "; "));
  GS_CHECK(c.step <= cfg_.training.steps,
           "resume: training.steps is {} but the checkpoint is at step {}; expected at least the checkpoint's step",
           cfg_.training.steps, c.step);
  auto it = c.metadata.find(kMetaNormalizer);
  GS_CHECK(it != c.metadata.end(), "resume: the checkpoint has no '{}' metadata", kMetaNormalizer);
  GS_CHECK(it->second == normalizer_to_string(data_.normalizer),
           "resume: the data's normalisation statistics differ from the checkpoint's ({} vs {}); the data changed",
           normalizer_to_string(data_.normalizer), it->second);
  model_->load_state_dict(models::local_state_dict(c.model, *model_, grid_));
  stepper_->load_training_state(models::local_training_state(c.optimizer, *model_, grid_));
  GS_CHECK(stepper_->global_step() == c.step, "resume: the checkpoint's step {} disagrees with its stepper state ({})",
           c.step, stepper_->global_step());
  return changes;
}

std::vector<std::filesystem::path> TrainingRun::write_validation_maps(const ValidationScores& s,
                                                                      const std::filesystem::path& dir) const {
  // The first sample's tiles put together (every rank takes part; rank 0 writes).
  auto whole = [&](const Tensor& tile) {
    return dist::gather_shards(tile, dist::Distribution::sharded_2d(tile.dim() - 2, tile.dim() - 1), grid_);
  };
  // The predicted channels of the truth, beside the prediction, in physical units.
  const models::ChannelLayout l = data_.info().layout();
  const models::Normalizer out_norm = output_normalizer(data_.normalizer, l);
  const Tensor truth = out_norm.denormalize(whole(output_channels(select(validation_.truth, 0, 0), l)));  // (n, P+D, H, W)
  const Tensor pred = out_norm.denormalize(whole(select(s.prediction, 0, 0)));
  if (!grid_.is_root()) return {};
  const int64_t n = truth.size(0);
  std::vector<int64_t> leads = {0};
  if (n > 1) leads.push_back(n - 1);
  return write_maps(dir, truth, pred, s.variables, leads, data_.info().dt_hours, cfg_.output.map_scale,
                    fmt::format("step {}", step()));
}

}  // namespace gs::tools
