// `gradsphere train --grid auto` (or `distributed.grid: auto`): the grid planner's inputs from the
// configured model and data (planner_workload), the machine's figures from the configuration or
// short start-up probes (cost_inputs), and the choice itself (choose_grid), which prints the best
// three grids on rank 0. The cost model is distributed/grid_planner.h.
#pragma once
#include <string>

#include "distributed/grid_planner.h"
#include "engine/device.h"
#include "models/data/trajectory_source.h"
#include "tools/train_config.h"

namespace gs::tools {

// The shape of the training data (sphere, channels and roles) without generating or reading it:
// generated data from data.swe, NetCDF files from their metadata.
models::TrajectoryInfo planned_data_info(const TrainConfig& config);

// The model's costs for the planner: flops of forward + backward per sample (counted from the
// configured SFNO's layers: encoder, transforms, spectral contraction, MLP, skips, decoder), its
// distributed transforms, its parameter bytes by reduction group (the model built once on one
// process), optimizer state, activation memory per sample, and the run's batch, members and
// rollout.
dist::PlannerWorkload planner_workload(const TrainConfig& config, const models::TrajectoryInfo& data);

// The configured figures; a missing one measured here (collective over `world`; every rank gets
// rank 0's): a GEMM for the rate, all-reduces of 8 bytes and 4 MB for latency and bandwidth, the
// host memory shared by this node's ranks for the limit. Under a second.
dist::CostInputs cost_inputs(const CostModelConfig& config, const dist::CommPtr& world);

// Whether the training code accepts `grid` for this run ("" when it does): its own checks of the
// device, the batch split and the ensemble members.
dist::GridCheck training_grid_check(const TrainConfig& config, Device device);

// The planned grid (collective: rank 0 plans and prints, every rank gets its choice).
dist::GridSpec choose_grid(const TrainConfig& config, const dist::CommPtr& world, Device device);

}  // namespace gs::tools
