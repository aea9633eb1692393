// Finding a file's coordinates as CF says to (internal to models/data): a 1-D variable is the
// latitude, longitude, time or vertical coordinate of its dimension by its attributes (units
// degrees_north / degrees_east and their variants, "<unit> since <date>", pressure units or a
// `positive` attribute; standard_name; axis), whatever its name, and whatever the name of its
// dimension (a variable `lat` over the dimension `latitude` is found). Names (lat, latitude, lon,
// longitude, time) are only a fallback for files without attributes.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/data/netcdf_file.h"

namespace gs::models {

enum class CfAxis { none, latitude, longitude, time, vertical };
const char* cf_axis_name(CfAxis a);

// The axis a 1-D variable is a coordinate of, by its attributes alone.
CfAxis cf_axis_of(const NcFile& f, int var);

struct CfCoordinate {
  int dim = -1;
  int var = -1;      // -1: the dimension has no coordinate variable
  std::string name;  // the coordinate variable's name, else the dimension's
};

struct CfCoordinates {
  CfCoordinate lat, lon, time;  // time.dim -1: the file has no time dimension
  std::map<int, CfCoordinate> vertical;  // by dimension: the vertical coordinates found
};

// Names given by the user (empty: search) override the attributes.
struct CfNames {
  std::string lat, lon, time;
};

// The file's latitude, longitude and time coordinates and its vertical ones. `data_vars` are the
// variables asked for (empty: all), used only to break a tie between two candidates of one axis;
// a tie they do not break is an error naming both and how to choose (data.netcdf.lat_name, ...).
// No latitude or longitude at all is an error saying what was looked for and what the file has.
CfCoordinates find_coordinates(const NcFile& f, const CfNames& names, const std::vector<int>& data_vars);

}  // namespace gs::models
