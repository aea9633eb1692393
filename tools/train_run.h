// One training run's state: the configuration, the data, the model, the stepper and the validation
// set, with the operations the `train` command sequences (a step, a validation, a checkpoint and
// its restoration), and the files of a run directory.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "models/checkpoint.h"
#include "models/stepper.h"
#include "tools/config_changes.h"
#include "tools/train_config.h"
#include "tools/train_setup.h"
#include "tools/validation.h"

namespace gs::tools {

struct RunPaths {
  explicit RunPaths(const std::filesystem::path& root);
  void create() const;  // the directory and maps/
  // data: generated data for the tile reads of a multi-process run
  std::filesystem::path root, checkpoint, config, metrics, validation, loss_curve, skill_plot, maps, data;
  std::filesystem::path spread_skill_plot, rank_histogram;  // an ensemble's
};

// On a process grid (mpiexec -n N gradsphere train --grid DxHxW) every rank reads only its share of
// each batch (the data replicas) on its tile of every field (the spatial grid), and the stepper
// reduces the gradients; generated data is written once to `scratch_dir` for those reads; the batch order depends on the seed only, so every grid
// trains on the same samples in the same order. validate() and checkpoint() are collective: the
// scores are the whole sphere's and the checkpoint holds whole tensors (on every rank), as one
// process writes them; restore() takes such a checkpoint on any grid.
// Refuses a GPU run on a spatially split grid, naming `command` and a grid that works.
void check_device_grid(Device device, const dist::ProcessGrid& grid, const char* command);
// The global batch splits evenly over the grid's data replicas (each reads its equal share).
void check_batch_grid(int64_t batch_size, const dist::ProcessGrid& grid, const char* command);

class TrainingRun {
 public:
  // `device`: where the model, its optimizer state and the batches live (a CUDA device: one
  // process only); the data is read and the model initialised on the CPU either way.
  explicit TrainingRun(const TrainConfig& config, const dist::ProcessGrid& grid = {},
                       const std::filesystem::path& scratch_dir = {}, Device device = Device::cpu());

  // Data, model (type, parameter count) and optimiser in a few lines.
  std::string describe() const;
  int64_t step() const { return stepper_->global_step(); }
  // One optimizer step on the batch of the current step.
  models::TrainResult train_step();
  // Where train_step's time went, summed over the steps of this process: reading and normalising
  // the batch (this rank's tile reads) and the stepper's work.
  struct StepTiming {
    double data_seconds = 0, compute_seconds = 0;
    int64_t steps = 0;
  };
  const StepTiming& step_timing() const { return timing_; }
  // Rollout validation (model in eval mode, back to train mode after); feeds the plateau schedule.
  ValidationScores validate();
  models::Checkpoint checkpoint() const;
  // Loads weights, optimizer, schedule and step. The configuration may differ from the checkpoint's
  // only in the settings a resumed run can follow (learning rate, schedule settings, steps, output
  // cadence; returned, for the caller to report); any other change, or data with other
  // normalisation statistics, is refused with the keys named.
  std::vector<ConfigChange> restore(const models::Checkpoint& ckpt);
  // Maps of the first validation sample at the first and last lead, physical units. Collective
  // (the tiles are gathered); world rank 0 writes them, the others return no paths.
  std::vector<std::filesystem::path> write_validation_maps(const ValidationScores& scores,
                                                           const std::filesystem::path& dir) const;
  const dist::ProcessGrid& grid() const { return grid_; }

  const TrainConfig& config() const { return cfg_; }
  const TrainingData& data() const { return data_; }
  models::Model& model() { return *model_; }
  models::Stepper& stepper() { return *stepper_; }

 private:
  // The whole model's parameter count (real degrees of freedom); collective.
  int64_t count_whole_parameters() const;

  TrainConfig cfg_;
  dist::ProcessGrid grid_;
  Device device_;
  int64_t parameters_ = 0;
  TrainingData data_;
  dist::Block rows_, cols_;  // this rank's tile
  std::shared_ptr<models::Model> model_;
  std::unique_ptr<models::Stepper> stepper_;
  ValidationSet validation_;
  double data_seconds_ = 0;
  StepTiming timing_;
};

// Checkpoint metadata keys that `rollout` reads back.
inline constexpr const char* kMetaNormalizer = "normalizer";
inline constexpr const char* kMetaVariables = "variables";

}  // namespace gs::tools
