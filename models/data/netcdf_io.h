// Gridded trajectories in NetCDF files (through the NetCDF C library), in the CF conventions that
// xarray, ncview and CDO understand.
//
// Layout written and read:
//   one trajectory:     variables (time, lat, lon)
//   several (same T):   variables (sample, time, lat, lon), as ACE's inference output
// with coordinate variables lat (degrees_north, row 0 the northernmost), lon (degrees_east, from 0),
// time ("hours since <reference>", calendar "standard") and, with several trajectories, sample
// (0, 1, ...). Files are NetCDF-4 (HDF5), each data variable in the trajectory's dtype (f32 -> float,
// f64 -> double).
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "models/data/dataset.h"

namespace gs::models {

struct NetcdfReadOptions {
  // Variables to read, in channel order (the names of the config). Empty: every variable over
  // (time, lat, lon) or (sample, time, lat, lon), in file order.
  std::vector<std::string> variables;
  // The latitude rule; the file's latitudes must match it within lat_tolerance_deg. Unset: the
  // rule whose latitudes match (the file's "gradsphere_grid" attribute, when present, is tried first).
  std::optional<sphere::GridKind> grid;
  double lat_tolerance_deg = 1e-6;
  // Hours between states; only needed when a file holds a single time (otherwise it is read from
  // the time coordinate, and a given value must agree with it).
  std::optional<double> dt_hours;
  DType dtype = DType::f32;  // of the tensors produced (f32 or f64)
  // Dimension names; empty: "lat" or "latitude", "lon" or "longitude", "time".
  std::string lat_name, lon_name, time_name;
};

// Reads one file (one trajectory, or one per sample). Latitudes stored south to north are flipped to
// north first; longitudes are rolled so column 0 is at 0 degrees east. Throws gs::Error naming the file
// (and variable) for a missing variable, a dimension mismatch, an unknown grid, non-uniform longitudes
// or times, missing or non-finite values.
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
  std::string history;                                 // appended after the "created by gradsphere" line
  std::string reference_time = "2000-01-01 00:00:00";  // time units: "hours since <reference_time>"
  double start_hours = 0.0;                            // time of state 0 after the reference
  std::vector<std::string> long_names = {};               // one per variable, or empty (the variable names)
  std::map<std::string, std::string> attributes = {};     // extra global attributes
  int deflate_level = 0;                               // 0 (none) to 9
};

// Writes `data` atomically (temporary file + rename). Several trajectories must have the same
// number of states.
void write_netcdf(const std::filesystem::path& path, const TrajectoryData& data,
                  const NetcdfWriteOptions& options = {});

}  // namespace gs::models
