// Where training reads its states from: trajectories held in memory, or files read piece by piece
// (netcdf_io.h). A reader asks for a window of states and a latitude/longitude tile, so a rank of a
// spatially split run reads only its tile and a data-parallel replica only its share of a batch;
// nothing needs the whole data set in one process.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "ops/sphere/grids.h"

namespace gs::models {

// A range [start, start + count) of rows or columns; count 0 means all of them.
struct Span {
  int64_t start = 0, count = 0;
};

// What a set of trajectories holds, without the values.
struct TrajectoryInfo {
  std::vector<std::string> variables;  // channel names
  std::vector<std::string> units;      // one per variable, or empty
  sphere::GridKind grid = sphere::GridKind::equiangular;
  int64_t nlat = 0, nlon = 0;
  double dt_hours = 1.0;
  DType dtype = DType::f32;            // of the tensors read()
  std::vector<int64_t> states;         // per trajectory
  int64_t channels() const { return static_cast<int64_t>(variables.size()); }
  int64_t trajectories() const { return static_cast<int64_t>(states.size()); }
};

class TrajectorySource {
 public:
  virtual ~TrajectorySource() = default;
  virtual const TrajectoryInfo& info() const = 0;
  // States [first, first + n) of one trajectory on rows x cols of the grid (north first, column 0
  // at 0 E), physical units: (n, C, rows.count, cols.count) in info().dtype. Throws gs::Error naming
  // the trajectory and states when they are out of range, and the file for a bad value in a file.
  virtual Tensor read(int64_t trajectory, int64_t first, int64_t n, Span rows = {}, Span cols = {}) const = 0;

 protected:
  // Checks the request against info() and fills in a zero count (whole rows or columns).
  void check_request(int64_t trajectory, int64_t first, int64_t n, Span& rows, Span& cols) const;
};

}  // namespace gs::models
