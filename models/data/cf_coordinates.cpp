// CF coordinate identification (cf_coordinates.h). Attributes, as CF 1.x sections 4.1-4.4 name them.
#include "models/data/cf_coordinates.h"

#include <algorithm>
#include <cctype>

namespace gs::models {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool one_of(const std::string& s, std::initializer_list<const char*> options) {
  return std::any_of(options.begin(), options.end(), [&](const char* o) { return s == o; });
}

// CF 4.1 / 4.2: the units that make a variable a latitude or a longitude (matched as strings:
// udunits would read "degrees_north" and "degrees" alike).
bool latitude_units(const std::string& u) {
  return one_of(u, {"degrees_north", "degree_north", "degree_n", "degrees_n", "degreen", "degreesn"});
}
bool longitude_units(const std::string& u) {
  return one_of(u, {"degrees_east", "degree_east", "degree_e", "degrees_e", "degreee", "degreese"});
}
// CF 4.3.1: pressure units identify a vertical coordinate.
bool pressure_units(const std::string& u) {
  return one_of(u, {"pa", "hpa", "kpa", "mbar", "millibar", "millibars", "mb", "bar", "decibar", "dbar", "atm"});
}
bool vertical_standard_name(const std::string& s) {
  return one_of(s, {"air_pressure", "altitude", "height", "height_above_reference_ellipsoid", "depth",
                    "model_level_number", "atmosphere_ln_pressure_coordinate", "atmosphere_sigma_coordinate",
                    "atmosphere_hybrid_sigma_pressure_coordinate", "atmosphere_hybrid_height_coordinate",
                    "atmosphere_sleve_coordinate", "ocean_sigma_coordinate", "ocean_s_coordinate",
                    "ocean_double_sigma_coordinate", "ocean_sigma_z_coordinate", "geopotential_height"});
}

struct Candidate {
  int var, dim;
};

}  // namespace

const char* cf_axis_name(CfAxis a) {
  switch (a) {
    case CfAxis::latitude: return "latitude";
    case CfAxis::longitude: return "longitude";
    case CfAxis::time: return "time";
    case CfAxis::vertical: return "vertical";
    case CfAxis::none: break;
  }
  return "none";
}

CfAxis cf_axis_of(const NcFile& f, int var) {
  if (f.var_dims(var).size() != 1) return CfAxis::none;
  const std::string units = lower(f.text_attr(var, "units").value_or(""));
  const std::string standard = lower(f.text_attr(var, "standard_name").value_or(""));
  const std::string axis = lower(f.text_attr(var, "axis").value_or(""));
  if (latitude_units(units) || standard == "latitude" || axis == "y") return CfAxis::latitude;
  if (longitude_units(units) || standard == "longitude" || axis == "x") return CfAxis::longitude;
  if (units.find(" since ") != std::string::npos || standard == "time" || axis == "t") return CfAxis::time;
  const std::string positive = lower(f.text_attr(var, "positive").value_or(""));
  if (axis == "z" || positive == "up" || positive == "down" || pressure_units(units) || vertical_standard_name(standard))
    return CfAxis::vertical;
  return CfAxis::none;
}

CfCoordinates find_coordinates(const NcFile& f, const CfNames& names, const std::vector<int>& data_vars) {
  std::vector<Candidate> by_axis[5];
  const int n = f.var_count();
  for (int v = 0; v < n; ++v) {
    const CfAxis a = cf_axis_of(f, v);
    if (a != CfAxis::none) by_axis[static_cast<int>(a)].push_back({v, f.var_dims(v)[0]});
  }
  // The dims data variables end with: (..., lat, lon); the first non-sample dim is time.
  std::vector<int> used_lat_dims, used_lon_dims, used_first_dims;
  const auto consider = [&](int v) {
    const std::vector<int> d = f.var_dims(v);
    if (d.size() < 2) return;
    used_lat_dims.push_back(d[d.size() - 2]);
    used_lon_dims.push_back(d.back());
    used_first_dims.push_back(d.front());
    if (d.size() >= 4) used_first_dims.push_back(d[1]);
  };
  if (!data_vars.empty()) std::for_each(data_vars.begin(), data_vars.end(), consider);
  else
    for (int v = 0; v < n; ++v) consider(v);

  // By name: a given name is a variable (or, without one, a dimension) of that name; else the
  // attribute candidates; else the fallback names. Ties are broken by what the data uses.
  auto pick = [&](CfAxis axis, const std::string& given, std::initializer_list<const char*> fallback,
                  const std::vector<int>& used, const char* option, bool required) -> CfCoordinate {
    const char* what = cf_axis_name(axis);
    if (!given.empty()) {
      if (auto v = f.find_var(given); v && f.var_dims(*v).size() == 1) return {f.var_dims(*v)[0], *v, given};
      if (auto d = f.find_dim(given)) return {*d, -1, given};
      f.bad("has no {} coordinate named '{}' ({} was given); its variables: {}", what, given, option,
            fmt::join(f.all_var_names(), ", "));
    }
    std::vector<Candidate> c = by_axis[static_cast<int>(axis)];
    if (c.empty())
      for (const char* name : fallback) {
        if (auto v = f.find_var(name); v && f.var_dims(*v).size() == 1) c.push_back({*v, f.var_dims(*v)[0]});
        else if (auto d = f.find_dim(name); d && !v) return {*d, -1, name};
        if (!c.empty()) break;
      }
    if (c.size() > 1) {
      std::vector<Candidate> in_use;
      for (const auto& x : c)
        if (std::find(used.begin(), used.end(), x.dim) != used.end()) in_use.push_back(x);
      if (!in_use.empty()) c = in_use;
    }
    if (c.size() > 1) {  // then the conventional name (ACE's outputs have init_time(sample) beside time(time))
      std::vector<Candidate> named;
      for (const auto& x : c)
        if (std::any_of(fallback.begin(), fallback.end(), [&](const char* nm) { return f.var_name(x.var) == nm; }))
          named.push_back(x);
      if (named.size() == 1) c = named;
    }
    if (c.size() > 1) {
      std::vector<std::string> list;
      for (const auto& x : c) list.push_back(fmt::format("'{}' over '{}'", f.var_name(x.var), f.dim_name(x.dim)));
      f.bad("has {} candidate {} coordinates ({}); name the one to use with {}", c.size(), what, fmt::join(list, ", "),
            option);
    }
    if (c.empty()) {
      if (!required) return {};
      f.bad("has no {} coordinate: expected a 1-D variable with units {} (or standard_name {}, or axis {}), or one "
            "named {}; its variables: {}",
            what, axis == CfAxis::latitude ? "degrees_north" : "degrees_east", what,
            axis == CfAxis::latitude ? "Y" : "X", fmt::join(fallback, " or "), fmt::join(f.all_var_names(), ", "));
    }
    return {c[0].dim, c[0].var, f.var_name(c[0].var)};
  };
  CfCoordinates out;
  out.lat = pick(CfAxis::latitude, names.lat, {"lat", "latitude"}, used_lat_dims, "data.netcdf.lat_name", true);
  out.lon = pick(CfAxis::longitude, names.lon, {"lon", "longitude"}, used_lon_dims, "data.netcdf.lon_name", true);
  out.time = pick(CfAxis::time, names.time, {"time"}, used_first_dims, "data.netcdf.time_name", false);
  if (out.time.dim < 0) {
    // A file without a time coordinate variable may still have an unlimited (record) dimension.
    int unlimited = -1;
    f.check(nc_inq_unlimdim(f.id(), &unlimited), "reading the unlimited dimension");
    if (unlimited >= 0 && unlimited != out.lat.dim && unlimited != out.lon.dim)
      out.time = {unlimited, -1, f.dim_name(unlimited)};
  }
  if (out.lat.dim == out.lon.dim)
    f.bad("its latitude '{}' and longitude '{}' share the dimension '{}'; expected a latitude-longitude grid (a "
          "dimension each)",
          out.lat.name, out.lon.name, f.dim_name(out.lat.dim));
  for (const auto& c : by_axis[static_cast<int>(CfAxis::vertical)])
    out.vertical.emplace(c.dim, CfCoordinate{c.dim, c.var, f.var_name(c.var)});
  return out;
}

}  // namespace gs::models
