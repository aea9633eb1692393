// Turning a TrainConfig into the objects of a run: the data (generated or read), the model, the
// optimizer, the schedule and the stepper; and the deterministic batch order. Shared by
// `gradsphere train`, `gradsphere rollout` and `gradsphere bench train`.
#pragma once
#include <cstdint>
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

struct TrainingData {
  models::TrajectoryData train, validation;
  models::Normalizer normalizer;   // fitted on the training set
  std::vector<Window> train_windows;
  std::vector<double> area_weights;  // per latitude row, ACE's cos-lat weights (sum 1)
};

// Generates the shallow-water sets or reads the NetCDF files, fits the normaliser, lists windows
// of rollout_steps + 1 states. Throws when the data is too short for the rollout or the validation.
TrainingData load_training_data(const TrainConfig& config);
// The validation set alone (rollout needs no training data), normalised with `normalizer`.
models::TrajectoryData load_validation_data(const TrainConfig& config);

std::shared_ptr<models::Model> build_model(const TrainConfig& config, const models::TrajectoryData& data,
                                           const dist::ProcessGrid& grid = {});
std::shared_ptr<models::Optimizer> build_optimizer(const TrainConfig& config, const models::Model& model);
std::shared_ptr<models::LrSchedule> build_schedule(const TrainConfig& config);

// The windows of optimizer step `step`: the training windows in a fresh pseudo-random order every
// epoch (a permutation keyed by (seed, epoch)), batch_size at a time, epochs running on without a
// gap. A function of (seed, step) only, so a resumed run sees exactly the batches it would have.
std::vector<Window> batch_windows(const std::vector<Window>& windows, int64_t batch_size, uint64_t seed, int64_t step);

// The normaliser as checkpoint metadata ("mean" and "std" as comma-separated full-precision lists)
// and back.
std::string normalizer_to_string(const models::Normalizer& n);
models::Normalizer normalizer_from_string(const std::string& s);

}  // namespace gs::tools
