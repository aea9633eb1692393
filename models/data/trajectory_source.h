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
#include "models/data/variables.h"
#include "ops/sphere/grids.h"

namespace gs::models {

// A range [start, start + count) of rows or columns; count 0 means all of them.
struct Span {
  int64_t start = 0, count = 0;
};

// The level a channel is of a variable over levels (an empty coordinate: a single-level field).
struct ChannelLevel {
  std::string coordinate;  // the level coordinate variable's name, e.g. "lev" or "plev"
  std::string units;       // its units, e.g. "hPa" (empty when the file gives none)
  double value = 0;        // the level's coordinate value
  int64_t index = -1;      // its index along the level dimension (file order)
  bool has_level() const { return !coordinate.empty(); }
};

// What a set of trajectories holds, without the values.
struct TrajectoryInfo {
  std::vector<std::string> variables;  // channel names (T_0, T_1, ... for the levels of T)
  std::vector<std::string> units;      // one per variable, or empty
  // Per channel, in role order (variables.h); empty: every channel prognostic.
  std::vector<VariableRole> roles = {};
  std::vector<ChannelLevel> levels = {};  // per channel, or empty (no channel has a level)
  sphere::GridKind grid = sphere::GridKind::equiangular;
  int64_t nlat = 0, nlon = 0;
  double dt_hours = 1.0;
  DType dtype = DType::f32;            // of the tensors read()
  std::vector<int64_t> states;         // per trajectory
  // The time axis as the source keeps it, for output in the same calendar: CF units
  // ("hours since 1990-01-01 00:00:00"; empty when unknown), the calendar, and the time value of
  // each trajectory's first state in those units.
  std::string time_units = {}, calendar = {};
  std::vector<double> start_times = {};
  // What the reader did that the user should hear of (variables skipped and why, a repeated
  // longitude column dropped, files joined along time): the run's log prints them.
  std::vector<std::string> notes = {};
  int64_t channels() const { return static_cast<int64_t>(variables.size()); }
  int64_t trajectories() const { return static_cast<int64_t>(states.size()); }
  ChannelLayout layout() const { return layout_of(roles, channels()); }
};

class TrajectorySource {
 public:
  virtual ~TrajectorySource() = default;
  virtual const TrajectoryInfo& info() const = 0;
  // States [first, first + n) of one trajectory on rows x cols of the grid (north first, column 0
  // at 0 E), physical units: (n, C, rows.count, cols.count) in info().dtype. A missing value (a
  // fill value, NaN, outside the valid range) reads as NaN: the loss and the metrics mask it.
  // Throws gs::Error naming the trajectory and states when they are out of range, and the file for
  // a bad value in a file (an infinity, a value that overflows when unpacked).
  virtual Tensor read(int64_t trajectory, int64_t first, int64_t n, Span rows = {}, Span cols = {}) const = 0;

 protected:
  // Checks the request against info() and fills in a zero count (whole rows or columns).
  void check_request(int64_t trajectory, int64_t first, int64_t n, Span& rows, Span& cols) const;
};

}  // namespace gs::models
