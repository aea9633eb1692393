// libFuzzer target: the NetCDF reader (models/data/netcdf_io.h), structure-aware. The bytes do not
// become the file itself: they choose a file that the netCDF library writes (dimensions, coordinate
// values right or wrong, flipped or rolled, time units, variable types, CF attributes such as
// _FillValue, missing_value, scale_factor, _Unsigned and valid_range, values written or left as the
// default fill) and then the read options and tiles to ask for. That aims the search at our
// decoding and checking, not at HDF5's file parser, which is not ours to fix. Every input must read
// or throw gs::Error.
#include <netcdf.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/error.h"
#include "models/data/netcdf_io.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using gs_fuzz::FuzzInput;

const nc_type kTypes[] = {NC_BYTE, NC_UBYTE, NC_SHORT, NC_USHORT, NC_INT, NC_FLOAT, NC_DOUBLE, NC_INT64};
const char* const kTimeUnits[] = {"hours since 2000-01-01", "days since 1979-01-01", "seconds since 1970-01-01",
                                  "fortnights since 2000-01-01", "hours", ""};

// Writes the chosen file; false when the netCDF library refuses the choices (not our reader's business).
bool write_file(FuzzInput& in, const std::filesystem::path& path) {
  int id = 0;
  if (nc_create(path.c_str(), NC_CLOBBER | NC_NETCDF4, &id) != NC_NOERR) return false;
  auto ok = [&](int status) { return status == NC_NOERR; };
  const size_t nlat = static_cast<size_t>(in.range(1, 9)), nlon = static_cast<size_t>(in.range(1, 12)),
               ntime = static_cast<size_t>(in.range(1, 4)), nsample = static_cast<size_t>(in.range(0, 2));
  int dt, dlat, dlon, ds = -1;
  bool good = ok(nc_def_dim(id, "time", ntime, &dt)) && ok(nc_def_dim(id, in.flip() ? "lat" : "latitude", nlat, &dlat)) &&
              ok(nc_def_dim(id, "lon", nlon, &dlon));
  if (good && nsample > 0) good = ok(nc_def_dim(id, "sample", nsample, &ds));
  int vlat = -1, vlon = -1, vtime = -1, var = -1;
  char lat_name[NC_MAX_NAME + 1] = {};
  if (good) good = ok(nc_inq_dimname(id, dlat, lat_name));
  if (good && in.range(0, 7) != 0) good = ok(nc_def_var(id, lat_name, in.flip() ? NC_FLOAT : NC_DOUBLE, 1, &dlat, &vlat));
  if (good && in.range(0, 7) != 0) good = ok(nc_def_var(id, "lon", NC_DOUBLE, 1, &dlon, &vlon));
  if (good && in.flip()) {
    good = ok(nc_def_var(id, "time", NC_DOUBLE, 1, &dt, &vtime));
    const std::string units = in.flip() ? kTimeUnits[in.range(0, 5)] : in.text(24);
    if (good && in.range(0, 3) != 0) good = ok(nc_put_att_text(id, vtime, "units", units.size(), units.data()));
  }
  const nc_type type = kTypes[in.range(0, 7)];
  std::vector<int> dims = {dt, dlat, dlon};
  if (ds >= 0) dims.insert(dims.begin(), ds);
  if (good) good = ok(nc_def_var(id, "v", type, static_cast<int>(dims.size()), dims.data(), &var));
  if (good && in.flip()) good = ok(nc_def_var_fill(id, var, NC_NOFILL, nullptr));
  // CF attributes, each present or not.
  for (const char* att : {"_FillValue", "missing_value", "scale_factor", "add_offset", "valid_min", "valid_max"}) {
    if (!good || !in.flip()) continue;
    const double v = in.number();
    const nc_type att_type = std::string(att) == "_FillValue" ? type : NC_DOUBLE;  // netCDF wants the var's type
    good = ok(nc_put_att_double(id, var, att, att_type, 1, &v)) || std::string(att) == "_FillValue";
  }
  if (good && in.flip()) {
    const double r[3] = {in.number(), in.number(), in.number()};
    good = ok(nc_put_att_double(id, var, "valid_range", NC_DOUBLE, static_cast<size_t>(in.range(1, 3)), r));
  }
  if (good && in.flip()) {
    const std::string u = in.flip() ? (in.flip() ? "true" : "false") : in.text(8);
    good = ok(nc_put_att_text(id, var, "_Unsigned", u.size(), u.data()));
  }
  if (good && in.flip()) {
    const std::string g = in.flip() ? "legendre-gauss" : in.text(16);
    good = ok(nc_put_att_text(id, NC_GLOBAL, "gradsphere_grid", g.size(), g.data()));
  }
  if (good) good = ok(nc_enddef(id));
  // Coordinates: a real grid's latitudes (maybe reversed or nudged) or anything; longitudes from a
  // chosen start with a chosen spacing.
  if (good && vlat >= 0) {
    std::vector<double> lat;
    const int grid = static_cast<int>(in.range(0, 3));
    try {
      if (grid < 3)
        lat = gs::models::latitudes_deg(grid == 0   ? gs::sphere::GridKind::equiangular
                                        : grid == 1 ? gs::sphere::GridKind::legendre_gauss
                                                    : gs::sphere::GridKind::lobatto,
                                        static_cast<int64_t>(nlat));
    } catch (const gs::Error&) {
    }
    lat.resize(nlat, 0.0);
    if (grid == 3 || in.range(0, 7) == 0)
      for (auto& x : lat) x = in.flip() ? in.number() : x + 1e-3 * static_cast<double>(in.range(-3, 3));
    if (in.flip()) std::reverse(lat.begin(), lat.end());
    good = ok(nc_put_var_double(id, vlat, lat.data()));
  }
  if (good && vlon >= 0) {
    const double start = in.flip() ? -180.0 : static_cast<double>(in.range(-4, 4)) * (360.0 / static_cast<double>(nlon));
    const double step = (360.0 / static_cast<double>(nlon)) * (in.range(0, 7) == 0 ? 1.01 : 1.0);
    std::vector<double> lon(nlon);
    for (size_t j = 0; j < nlon; ++j) lon[j] = start + step * static_cast<double>(j);
    good = ok(nc_put_var_double(id, vlon, lon.data()));
  }
  if (good && vtime >= 0) {
    std::vector<double> t(ntime);
    const double step = in.flip() ? 0.25 : in.number();
    for (size_t k = 0; k < ntime; ++k) t[k] = step * static_cast<double>(k) + (in.range(0, 15) == 0 ? 1e-3 : 0.0);
    good = ok(nc_put_var_double(id, vtime, t.data()));
  }
  if (good && in.range(0, 5) != 0) {  // else the variable is never written
    std::vector<double> values(ntime * nlat * nlon * std::max<size_t>(nsample, 1));
    for (auto& x : values) x = in.range(0, 3) == 0 ? in.number() : static_cast<double>(in.range(-100, 100));
    const int status = nc_put_var_double(id, var, values.data());
    good = status == NC_NOERR || status == NC_ERANGE;  // out-of-range values for the type: the library's call
  }
  nc_close(id);
  return good;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("gs-fuzz-netcdf-" + std::to_string(::getpid()) + ".nc");
  FuzzInput in(data, size);
  if (!write_file(in, path)) return 0;
  gs::models::NetcdfReadOptions opt;
  if (in.flip()) opt.variables = {in.flip() ? "v" : in.text(4)};
  if (in.flip()) opt.dt_hours = in.flip() ? 6.0 : in.number();
  if (in.flip()) opt.grid = in.flip() ? gs::sphere::GridKind::equiangular : gs::sphere::GridKind::legendre_gauss;
  opt.dtype = in.flip() ? gs::DType::f64 : gs::DType::f32;
  try {
    (void)gs::models::read_netcdf(path, opt);
  } catch (const gs::Error&) {
  }
  try {
    auto source = gs::models::open_netcdf({path, path}, opt);
    for (int k = 0; k < 4 && !in.empty(); ++k) {
      try {
        (void)source->read(in.range(-1, 4), in.range(-1, 4), in.range(0, 5), {in.range(-1, 9), in.range(0, 9)},
                           {in.range(-1, 12), in.range(0, 12)});
      } catch (const gs::Error&) {
      }
    }
  } catch (const gs::Error&) {
  }
  return 0;
}
