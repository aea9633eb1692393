// Gridded trajectories in memory, their normalisation, and the batches the stepper trains on. The
// shallow-water generator (swe_data.h) and the NetCDF reader (netcdf_io.h) both produce a
// TrajectoryData; the NetCDF writer stores rollouts in the same form.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"
#include "ops/sphere/grids.h"

namespace gs::models {

struct TrajectoryData {
  std::vector<std::string> variables;  // channel names, e.g. {"geopotential", "vorticity", "divergence"}
  std::vector<std::string> units;      // one per variable, or empty
  sphere::GridKind grid = sphere::GridKind::equiangular;
  int64_t nlat = 0, nlon = 0;
  double dt_hours = 1.0;               // time between consecutive states of a trajectory
  std::vector<Tensor> trajectories;    // each (T, C, nlat, nlon), f32 or f64, physical units
  // Throws unless every trajectory is 4-D with C == variables.size(), the grid sizes, one dtype, and T >= 1.
  void validate() const;
  int64_t channels() const { return static_cast<int64_t>(variables.size()); }
};

// Latitudes (degrees, north to south, row 0 first) and longitudes (degrees east from 0) of a grid.
std::vector<double> latitudes_deg(sphere::GridKind grid, int64_t nlat);
std::vector<double> longitudes_deg(int64_t nlon);

// Per-channel affine normalisation: x_norm = (x - mean_c) / std_c.
struct Normalizer {
  std::vector<double> mean, std;
  // Mean and standard deviation of each channel over every state and grid point of `data`
  // (uniform over grid points, as ACE's stats files); a channel with std 0 gets std 1.
  static Normalizer fit(const TrajectoryData& data);
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
// The batch of the given windows, normalised, in `dtype` (f32 or f64).
Batch make_batch(const TrajectoryData& data, const Normalizer& norm,
                 const std::vector<std::pair<int64_t, int64_t>>& windows, int64_t n_steps, DType dtype);

}  // namespace gs::models
