// Gridded trajectories in memory, their normalisation, and the batches the stepper trains on. The
// shallow-water generator (swe_data.h) and the NetCDF reader (netcdf_io.h) both produce a
// TrajectoryData; the NetCDF writer stores rollouts in the same form.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "models/data/trajectory_source.h"
#include "ops/sphere/grids.h"

namespace gs::models {

struct TrajectoryData {
  std::vector<std::string> variables;  // channel names, e.g. {"geopotential", "vorticity", "divergence"}
  std::vector<std::string> units;      // one per variable, or empty
  std::vector<VariableRole> roles = {};  // one per variable in role order, or empty (all prognostic)
  std::vector<ChannelLevel> levels = {};  // one per variable, or empty (no levels)
  sphere::GridKind grid = sphere::GridKind::equiangular;
  int64_t nlat = 0, nlon = 0;
  double dt_hours = 1.0;               // time between consecutive states of a trajectory
  std::vector<Tensor> trajectories;    // each (T, C, nlat, nlon), f32 or f64, physical units
  // Throws unless every trajectory is 4-D with C == variables.size(), the grid sizes, one dtype, and T >= 1.
  void validate() const;
  int64_t channels() const { return static_cast<int64_t>(variables.size()); }
  TrajectoryInfo info() const;  // validates first
};

// The trajectories as a source (the tensors are shared, not copied).
std::shared_ptr<TrajectorySource> memory_source(TrajectoryData data);

// Latitudes (degrees, north to south, row 0 first) and longitudes (degrees east from 0) of a grid.
std::vector<double> latitudes_deg(sphere::GridKind grid, int64_t nlat);
std::vector<double> longitudes_deg(int64_t nlon);

// The part of the normaliser's statistics one rank gathers: its tile of every parts-th state
// (counting the states of all trajectories in order, from `part`).
struct StatsShare {
  Span rows, cols;
  int64_t part = 0, parts = 1;
};
// Sums int64 vectors element-wise over every rank that gathers a share (in place); empty: one rank.
using SumOverRanks = std::function<void(std::vector<int64_t>&)>;

// Per-channel affine normalisation: x_norm = (x - mean_c) / std_c, with ACE's full-field
// statistics (fme's network normalisation: global_means_path / global_stds_path, computed here from
// the training data).
struct Normalizer {
  std::vector<double> mean, std;
  // Per channel: the standard deviation of x(t + 1) - x(t) within a trajectory (ACE's
  // scaling-residual.nc, which fme's residual normalisation scales the loss of prognostic variables
  // with); empty when not fitted.
  std::vector<double> residual_std = {};
  // Per channel: the missing values (masked points) fit() saw, for the run's log; not stored.
  std::vector<int64_t> missing = {};
  // Mean and standard deviation of each channel over every state and grid point of `data`
  // (uniform over grid points, as ACE's stats files; missing values left out); a channel with std 0
  // gets std 1; a channel with no valid value is an error naming it.
  static Normalizer fit(const TrajectoryData& data);
  // The same statistics gathered in shares over ranks: two passes (mean, then squared deviations)
  // with exact sums (exact_sum.h), so every way of splitting the work gives the same bits; with
  // `residual`, residual_std too (pairs of consecutive states, both valid).
  static Normalizer fit(const TrajectorySource& source, const StatsShare& share = {}, const SumOverRanks& sum = {},
                        bool residual = false);
  // x (..., C, H, W) with C == mean.size().
  Tensor normalize(const Tensor& x) const;
  Tensor denormalize(const Tensor& x) const;
};

// A training sample of the stepper: the state at t and the n states after it, normalised.
struct Batch {
  Tensor input;    // (B, C, H, W)
  Tensor targets;  // (B, n, C, H, W)
};

// Every window of n_steps + 1 consecutive states, as (trajectory, first state) pairs, in order.
std::vector<std::pair<int64_t, int64_t>> list_windows(const TrajectoryData& data, int64_t n_steps);
std::vector<std::pair<int64_t, int64_t>> list_windows(const TrajectoryInfo& info, int64_t n_steps);
// The batch of the given windows, normalised, in `dtype` (f32 or f64).
Batch make_batch(const TrajectoryData& data, const Normalizer& norm,
                 const std::vector<std::pair<int64_t, int64_t>>& windows, int64_t n_steps, DType dtype);
// The same from a source, on a tile: (B, C, rows, cols) and (B, n, C, rows, cols); only the tile of
// the windows' states is read.
Batch make_batch(const TrajectorySource& source, const Normalizer& norm,
                 const std::vector<std::pair<int64_t, int64_t>>& windows, int64_t n_steps, DType dtype,
                 Span rows = {}, Span cols = {});

}  // namespace gs::models
