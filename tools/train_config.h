// The training configuration of `gradsphere train` (YAML, read strictly through ConfigNode): what
// data, which model, how to optimise, how to validate, where to write. Every section maps onto the
// option structs of models/, so the defaults here are the library's defaults. The reference file
// is tools/configs/swe_small.yaml; every accepted key is listed in tools/configs/README.md.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/data/netcdf_io.h"
#include "models/data/swe_data.h"
#include "models/noise_sfno.h"
#include "models/optim.h"
#include "models/sfno.h"
#include "models/stepper.h"
#include "tools/config.h"

namespace gs::tools {

struct DataConfig {
  std::string source = "swe";  // swe | netcdf
  DType dtype = DType::f32;
  // swe: the training set and a validation set drawn from other seeds.
  models::SweDataOptions swe;
  // Generation estimated to take longer than this (either set) is an error before it starts.
  double max_generation_minutes = 30;
  int64_t validation_trajectories = 2;
  uint64_t validation_seed = 1000;
  // netcdf
  std::vector<std::string> train_files, validation_files;
  models::NetcdfReadOptions netcdf;
  // data.variables: the variables with their roles and levels (models/data/variables.h), for either
  // source; empty: every variable of the data, all prognostic.
  std::vector<models::VariableRequest> variables;
};

// loss: what the stepper's loss weighs (models/step_loss.h), as fme's loss options.
struct LossConfig {
  // fme StepLossConfig.weights: per variable (or channel) name, the factor the normalised prediction
  // and target are multiplied by before the squared error (so a weight w scales that variable's
  // squared error by w^2, as in fme); unnamed output variables 1.
  std::vector<std::pair<std::string, double>> weights;
  // fme NetworkAndLossNormalizationConfig.residual: prognostic variables' loss normalised by the
  // standard deviation of their one-step change (ACE's scaling-residual) instead of the full-field
  // one the network uses; diagnostics keep the full-field scaling.
  bool residual_scaling = false;
  // loss.type: mse | crps | energy_score | mix (with loss.mix: {mse, crps, energy_score} weights);
  // loss.crps_alpha: fme's almost_fair_crps_alpha. CRPS and energy score need
  // training.ensemble_members >= 2 (models/ensemble_loss.h).
  std::string type = "mse";
  models::LossTerms terms{};
};

struct ModelConfig {
  std::string type = "sfno";  // sfno | noise_sfno
  models::SfnoOptions sfno;
  models::NoiseSfnoOptions noise_sfno;
};

struct OptimizerConfig {
  std::string type = "adam";  // sgd | adam | adamw
  models::SGDOptions sgd;
  models::AdamOptions adam;
};

struct ScheduleConfig {
  std::string type = "constant";  // constant | warmup_cosine | step | reduce_on_plateau
  int64_t warmup_steps = 0;
  double min_lr = 0;
  int64_t step_size = 1000;
  double gamma = 0.5;
  double factor = 0.5;
  int64_t patience = 2;
  double threshold = 1e-4;
  int64_t cooldown = 0;
};

struct TrainingConfig {
  int64_t steps = 1000;
  int64_t batch_size = 4;
  int64_t rollout_steps = 1;  // forward steps per training sample (ACE's n_forward_steps)
  models::StepperOptions stepper;
  int64_t log_every = 10;          // metrics.csv rows
  int64_t checkpoint_every = 500;  // plus one at the end
};

struct ValidationConfig {
  int64_t every = 250;     // steps; 0: only at the end
  int64_t samples = 16;    // initial conditions, spread evenly over the validation windows
  int64_t lead_steps = 4;  // rollout length (4 x 6 h = 24 h with the default data)
};

struct OutputConfig {
  std::string dir = "runs/train";
  bool maps = true;
  int map_scale = 4;  // pixels per grid point in the PNG maps
};

// `distributed.cost_model:` the inputs of `--grid auto` (distributed/grid_planner.h); a missing
// rate, bandwidth, latency or memory limit is measured at start-up (tools/grid_plan.h).
struct CostModelConfig {
  std::optional<double> flops_per_second, bandwidth_bytes_per_second, latency_seconds, memory_limit_bytes;
  double transpose_hidden_share = 0;  // of transpose time hidden by pipelining (none measured on CPUs: 0)
  double allreduce_hidden_share = 0;  // of the gradient all-reduce overlapped with backward (the reducer)
};

// `distributed:` how a run under mpiexec splits over its processes (the --grid flag wins).
struct DistributedConfig {
  std::string grid;  // "[E]xDxHxW"; "auto": chosen by the cost model; empty: every process a data replica
  // `reducer: tape | hooks`: how gradients are reduced (distributed/reducer.h): on the tape (the
  // default) or by DDP-style hooks outside it. The same weights either way, to rounding.
  bool tape_reducer = true;
  CostModelConfig cost_model;
};

struct TrainConfig {
  uint64_t seed = 0;  // model initialisation, batch order, noise
  DataConfig data;
  ModelConfig model;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  TrainingConfig training;
  ValidationConfig validation;
  LossConfig loss;
  OutputConfig output;
  DistributedConfig distributed;
  std::string text;    // the YAML the configuration was read from (stored in checkpoints)
  std::string source;  // its file name
};

// Reads and validates everything; unknown keys, wrong types and impossible values are errors that
// name the key and what is accepted. Cross-field checks (e.g. validation samples vs. data) happen
// where the data is known (train_setup.cpp).
TrainConfig parse_train_config(const ConfigNode& root);
TrainConfig load_train_config(const std::string& path);
TrainConfig train_config_from_string(const std::string& text, const std::string& source);

}  // namespace gs::tools
