// Gridded trajectories in NetCDF files (through the NetCDF C library), read as xarray and CF read
// them and written in the CF conventions that xarray, ncview and CDO understand.
//
// Read: data variables over (time, lat, lon), (time, lev, lat, lon) (one channel per level, named
// <name>_<k>, k the level's index in file order), (lat, lon) (time-invariant: the same field at
// every state, for forcings such as land fraction), each with an optional leading sample dimension
// (several trajectories). Coordinates are found by their CF attributes whatever their names
// (cf_coordinates.h); times in any of the CF calendars standard/gregorian, proleptic_gregorian,
// noleap/365_day, all_leap/366_day, 360_day, julian (cf_time.h), at equal steps; a longitude that
// repeats its first column at +360 loses the repeat. Missing values (fill values, missing_value,
// outside valid_min/valid_max/valid_range, NaN) read as NaN: masks for the loss and the metrics.
// Everything the reader leaves out is named in TrajectoryInfo::notes with the reason.
//
// Written: one trajectory as variables (time, lat, lon); several (same T) as (sample, time, lat,
// lon), as ACE's inference output; coordinate variables lat (degrees_north, row 0 the
// northernmost), lon (degrees_east, from 0), time (CF units and calendar) and, with several
// trajectories, sample (0, 1, ...). Files are NetCDF-4 (HDF5), each data variable in the
// trajectory's dtype (f32 -> float, f64 -> double).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/data/dataset.h"
#include "models/data/variables.h"

namespace gs::models {

// How several files make trajectories: `time` joins files that follow each other in time into one
// trajectory (each must start one step after the previous one ends: a gap or an overlap is an
// error naming both files and the times); `trajectories` makes each file (each sample of it) its
// own trajectory; `automatic` joins along time when the files have no sample dimension and the
// second starts after the first ends, and says which it chose in the notes.
enum class NetcdfJoin { automatic, time, trajectories };

struct NetcdfReadOptions {
  // Variables to read, with their roles and levels; the channels come in role order (variables.h).
  // Empty: every variable over (time, [level,] lat, lon) or with a sample dimension, all prognostic,
  // in file order (the others are named in the notes).
  std::vector<VariableRequest> variables;
  // The latitude rule; the file's latitudes must match it within lat_tolerance_deg. Unset: the
  // rule whose latitudes match (the file's "gradsphere_grid" attribute, when present, is tried first).
  std::optional<sphere::GridKind> grid;
  double lat_tolerance_deg = 1e-6;
  // Hours between states; only needed when a file holds a single time (otherwise it is read from
  // the time coordinate, and a given value must agree with it).
  std::optional<double> dt_hours;
  DType dtype = DType::f32;  // of the tensors produced (f32 or f64)
  // Coordinate (or dimension) names that override the CF search; empty: found by attributes, then
  // by the names lat/latitude, lon/longitude, time.
  std::string lat_name, lon_name, time_name;
  NetcdfJoin join = NetcdfJoin::automatic;
};
const char* join_name(NetcdfJoin j);  // "automatic", "time", "trajectories"

// Reads one file (one trajectory, or one per sample). Latitudes stored south to north are flipped to
// north first; longitudes are rolled so column 0 is at 0 degrees east. Throws gs::Error naming the file
// (and variable) for a missing variable, a dimension mismatch, an unknown grid, non-uniform longitudes
// or times, infinite values.
TrajectoryData read_netcdf(const std::filesystem::path& path, const NetcdfReadOptions& options = {});
// Several files, each contributing its trajectories; all must agree on variables, grid and dt.
TrajectoryData read_netcdf(const std::vector<std::filesystem::path>& paths, const NetcdfReadOptions& options = {});
// The files opened for reading piece by piece: the layout and coordinates are checked here, the
// values (with the same checks as read_netcdf) when read() asks for a window of states on a tile,
// through hyperslabs of exactly that window and tile. The files stay open while the source lives.
std::shared_ptr<TrajectorySource> open_netcdf(const std::vector<std::filesystem::path>& paths,
                                              const NetcdfReadOptions& options = {});

struct NetcdfWriteOptions {
  std::string title = "gradsphere trajectories";
  std::string history = {};                            // appended after the "created by gradsphere" line
  std::string reference_time = "2000-01-01 00:00:00";  // time units: "hours since <reference_time>"
  double start_hours = 0.0;                            // time of state 0 after the reference
  std::string calendar = "standard";                   // the CF calendar of the time coordinate
  std::string time_units = {};                           // CF time units; empty: "hours since <reference_time>"
  std::vector<std::string> long_names = {};               // one per variable, or empty (the variable names)
  std::map<std::string, std::string> attributes = {};     // extra global attributes
  int deflate_level = 0;                               // 0 (none) to 9
  // An ensemble (write_netcdf only): > 0 puts a 'member' dim of this size after 'sample'; the
  // trajectories are then sample-major, members of sample s at s * members .. s * members + members - 1.
  int64_t members = 0;
};

// Writes `data` atomically (temporary file + rename). Several trajectories must have the same
// number of states.
void write_netcdf(const std::filesystem::path& path, const TrajectoryData& data,
                  const NetcdfWriteOptions& options = {});

// A file written one state at a time along an unlimited time dimension, for rollouts longer than
// memory holds: each append() writes its state through to the library; close() commits the file
// (temporary file + rename), so a run that fails leaves no half-written file behind. The states are
// (C, H, W) of `like`'s channels, grid and dtype (missing values as NaN).
class NetcdfStreamWriter {
 public:
  NetcdfStreamWriter(const std::filesystem::path& path, const TrajectoryInfo& like, const NetcdfWriteOptions& options);
  ~NetcdfStreamWriter();
  NetcdfStreamWriter(const NetcdfStreamWriter&) = delete;
  NetcdfStreamWriter& operator=(const NetcdfStreamWriter&) = delete;
  // One state at time `time_value` (in the options' time units).
  void append(const Tensor& state, double time_value);
  void close();
  int64_t states() const { return states_; }

 private:
  struct File;
  std::filesystem::path path_;
  TrajectoryInfo like_;
  std::unique_ptr<File> file_;
  int64_t states_ = 0;
};

}  // namespace gs::models
