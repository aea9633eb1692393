// Turning a TrainConfig into the objects of a run: the data (generated or read), the model, the
// optimizer, the schedule and the stepper; and the deterministic batch order. Shared by
// `gradsphere train`, `gradsphere rollout` and `gradsphere bench train`.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <utility>
#include <vector>

#include "distributed/process_grid.h"
#include "models/data/dataset.h"
#include "models/lr_schedule.h"
#include "models/stepper.h"
#include "tools/train_config.h"

namespace gs::tools {

using Window = std::pair<int64_t, int64_t>;  // (trajectory, first state)

// The states are read on demand, each rank reading only its tile (and, in training, its share of
// the batch): see models/data/trajectory_source.h.
struct TrainingData {
  std::shared_ptr<models::TrajectorySource> train, validation;
  models::Normalizer normalizer;   // fitted on the training set (with residual stds for loss.residual_scaling)
  std::vector<Window> train_windows;
  std::vector<double> area_weights;  // per latitude row, ACE's cos-lat weights (sum 1)
  const models::TrajectoryInfo& info() const { return train->info(); }
};

// Generates the shallow-water sets or opens the NetCDF files, fits the normaliser, lists windows
// of rollout_steps + 1 states. Throws when the data is too short for the rollout or the validation.
// On a grid of several processes the generated sets are written once, by world rank 0, as NetCDF
// files in `scratch_dir` (every rank then reads its tiles of them), and the normaliser's statistics
// are gathered in shares (each rank its tile of every data_size-th state) and summed exactly, so
// every grid trains on the same samples with the same normaliser as one process, bit for bit.
TrainingData load_training_data(const TrainConfig& config, const dist::ProcessGrid& grid = {},
                                const std::filesystem::path& scratch_dir = {});
// The validation set alone (rollout needs no training data); on a grid of several processes as above.
std::shared_ptr<models::TrajectorySource> load_validation_data(const TrainConfig& config,
                                                                const dist::ProcessGrid& grid = {},
                                                                const std::filesystem::path& scratch_dir = {});
// The configured data.variables applied to a source of `config`'s kind: NetCDF files are opened with
// them (netcdf_io.h), generated data is viewed through them (selected_source.h).
std::shared_ptr<models::TrajectorySource> open_data_files(const TrainConfig& config,
                                                          const std::vector<std::string>& files);

// The stepper options of a run on `data` with the normaliser `norm`: the configured ones with the
// data's channel layout (roles) and the loss scales of the configuration's loss section (loss_scales).
models::StepperOptions stepper_options(const TrainConfig& config, const models::TrajectoryInfo& data,
                                       const models::Normalizer& norm);
// Per output channel (prognostic, then diagnostic): loss.weights' weight of the channel or of its
// variable (T for every level T_k), times, with loss.residual_scaling and for a prognostic channel,
// std / residual_std. Empty when every scale is 1 (the stepper's plain loss). A weight naming no
// output channel or variable (a forcing, a typo) is an error listing the names that take one.
std::vector<double> loss_scales(const LossConfig& loss, const models::TrajectoryInfo& data,
                                const models::Normalizer& norm);
// The run log's account of the data: channels by role with their levels and units, the reader's
// notes, the masked (missing) values per variable.
std::string describe_variables(const models::TrajectoryInfo& data, const models::Normalizer& norm);

// The grid of the job: `flag` (--grid DxHxW), else the configuration's distributed.grid, else every
// rank a data replica; checked against the world size (errors name `command`). Collective. With
// `config_grid_if_it_fits`, the configuration's grid is used only when it has as many ranks as the
// job (rollout: a checkpoint trained on 1x2x2 forecasts on one process too).
// `world` is the job's communicator (dist::world_communicator() when null; a GPU job passes its
// NCCL or host-staging world).
dist::ProcessGrid make_process_grid(const std::string& flag, const TrainConfig& config, const char* command,
                                    bool config_grid_if_it_fits = false, dist::CommPtr world = nullptr);

std::shared_ptr<models::Model> build_model(const TrainConfig& config, const models::TrajectoryInfo& data,
                                           const dist::ProcessGrid& grid = {});
std::shared_ptr<models::Optimizer> build_optimizer(const TrainConfig& config, const models::Model& model);
std::shared_ptr<models::LrSchedule> build_schedule(const TrainConfig& config);

// The windows of optimizer step `step`: the training windows in a fresh pseudo-random order every
// epoch (a permutation keyed by (seed, epoch)), batch_size at a time, epochs running on without a
// gap. A function of (seed, step) only, so a resumed run sees exactly the batches it would have.
std::vector<Window> batch_windows(const std::vector<Window>& windows, int64_t batch_size, uint64_t seed, int64_t step);

// The normaliser as checkpoint metadata ("mean", "std" and, when fitted, "residual_std" as
// comma-separated full-precision lists) and back.
std::string normalizer_to_string(const models::Normalizer& n);
models::Normalizer normalizer_from_string(const std::string& s);

}  // namespace gs::tools
