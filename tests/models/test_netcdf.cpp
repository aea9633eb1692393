// NetCDF I/O: exact write -> read round trips, the CF metadata other tools rely on (read back through
// the C API), files from other writers (south-to-north latitudes, longitudes from -180, f32
// coordinates, packed values), and the errors bad files and bad variables get.
#include <doctest/doctest.h>
#include <netcdf.h>

#include <cmath>
#include <fstream>
#include <random>

#include "engine/factory.h"
#include "models/data/netcdf_io.h"
#include "ops/ops.h"
#include "tests/tensor_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::models;
using gs_test::contains;
using gs_test::error_of;
namespace fs = std::filesystem;
using TempDir = gs_test::TempDir;

namespace {

void nc(int status) { REQUIRE_MESSAGE(status == NC_NOERR, nc_strerror(status)); }

TrajectoryData sample_data(DType dtype, int n_traj = 1, int64_t T = 4) {
  TrajectoryData d;
  d.variables = {"geopotential", "vorticity", "divergence"};
  d.units = {"m^2 s^-2", "s^-1", ""};
  d.grid = sphere::GridKind::legendre_gauss;
  d.nlat = 6;
  d.nlon = 12;
  d.dt_hours = 6.0;
  for (int i = 0; i < n_traj; ++i)
    d.trajectories.push_back(randn({T, 3, d.nlat, d.nlon}, RandomKey{42, static_cast<uint64_t>(i)}, dtype));
  return d;
}

std::string text_attr(int id, int var, const char* name) {
  size_t len = 0;
  if (nc_inq_attlen(id, var, name, &len) != NC_NOERR) return "(missing)";
  std::string s(len, '\0');
  nc(nc_get_att_text(id, var, name, s.data()));
  return s;
}

int var_id(int id, const char* name) {
  int v = -1;
  nc(nc_inq_varid(id, name, &v));
  return v;
}

std::vector<std::string> dim_names(int id, int var) {
  int nd = 0;
  nc(nc_inq_varndims(id, var, &nd));
  std::vector<int> dims(static_cast<size_t>(nd));
  nc(nc_inq_vardimid(id, var, dims.data()));
  std::vector<std::string> names;
  for (int d : dims) {
    char buf[NC_MAX_NAME + 1] = {};
    nc(nc_inq_dimname(id, d, buf));
    names.push_back(buf);
  }
  return names;
}

// A file as another tool would write it: coordinates and one variable "t2m" over `dims` (names in the
// order given, sizes from the coordinates), values[i] = value(i) in storage order.
struct ForeignFile {
  std::vector<double> lat, lon, time;
  std::string time_units = "days since 1979-01-01";
  std::vector<std::string> dims = {"time", "lat", "lon"};
  nc_type coord_type = NC_DOUBLE;
  std::function<double(size_t)> value = [](size_t i) { return static_cast<double>(i); };
  std::vector<std::pair<std::string, double>> var_attrs;

  void write(const fs::path& p) const {
    int id;
    nc(nc_create(p.c_str(), NC_CLOBBER | NC_NETCDF4, &id));
    std::map<std::string, int> dim_of;
    std::map<std::string, const std::vector<double>*> coords = {{"lat", &lat}, {"lon", &lon}, {"time", &time}};
    for (const auto& [name, values] : coords) {
      int d, v;
      nc(nc_def_dim(id, name.c_str(), values->size(), &d));
      dim_of[name] = d;
      if (name == "time" && values->empty()) continue;
      nc(nc_def_var(id, name.c_str(), name == "time" ? NC_DOUBLE : coord_type, 1, &d, &v));
      if (name == "time" && !time_units.empty())
        nc(nc_put_att_text(id, v, "units", time_units.size(), time_units.c_str()));
    }
    std::vector<int> dids;
    size_t n = 1;
    for (const auto& name : dims) {
      dids.push_back(dim_of.at(name));
      n *= coords.at(name)->empty() ? 1 : coords.at(name)->size();
    }
    int var;
    nc(nc_def_var(id, "t2m", NC_DOUBLE, static_cast<int>(dids.size()), dids.data(), &var));
    for (const auto& [key, v] : var_attrs) nc(nc_put_att_double(id, var, key.c_str(), NC_DOUBLE, 1, &v));
    nc(nc_enddef(id));
    for (const auto& [name, values] : coords)
      if (!values->empty()) nc(nc_put_var_double(id, var_id(id, name.c_str()), values->data()));
    std::vector<double> data(n);
    for (size_t i = 0; i < n; ++i) data[i] = value(i);
    nc(nc_put_var_double(id, var, data.data()));
    nc(nc_close(id));
  }
};

std::vector<double> lons(int64_t n, double start) {
  std::vector<double> v;
  for (int64_t j = 0; j < n; ++j) v.push_back(start + 360.0 * static_cast<double>(j) / static_cast<double>(n));
  return v;
}

}  // namespace

TEST_CASE("netcdf: write -> read round trip is exact for f32 and f64, one trajectory and several") {
  TempDir dir("netcdf");
  for (DType dtype : {DType::f32, DType::f64})
    for (int n_traj : {1, 3}) {
      CAPTURE(dtype_name(dtype));
      CAPTURE(n_traj);
      TrajectoryData d = sample_data(dtype, n_traj);
      fs::path p = dir / "rollout.nc";
      write_netcdf(p, d);
      NetcdfReadOptions opt;
      opt.dtype = dtype;
      TrajectoryData back = read_netcdf(p, opt);
      CHECK(back.variables == d.variables);
      CHECK(back.units == d.units);
      CHECK(back.grid == d.grid);  // inferred from the latitudes
      CHECK(back.nlat == d.nlat);
      CHECK(back.nlon == d.nlon);
      CHECK(back.dt_hours == 6.0);
      REQUIRE(back.trajectories.size() == d.trajectories.size());
      for (size_t i = 0; i < d.trajectories.size(); ++i) {
        CHECK(back.trajectories[i].sizes() == d.trajectories[i].sizes());
        CHECK(back.trajectories[i].dtype() == dtype);
        CHECK(back.trajectories[i].to_vector<double>() == d.trajectories[i].to_vector<double>());
      }
    }
}

TEST_CASE("netcdf: an ensemble's members go along a 'member' dim after 'sample', each value in its place") {
  TempDir dir("netcdf_members");
  for (int samples : {1, 2}) {
    CAPTURE(samples);
    const int members = 3;
    TrajectoryData d = sample_data(DType::f64, samples * members);  // sample-major
    const fs::path p = dir / "ens.nc";
    write_netcdf(p, d, NetcdfWriteOptions{.members = members});
    int id = -1;
    nc(nc_open(p.c_str(), NC_NOWRITE, &id));
    const int v = var_id(id, d.variables[1].c_str());
    const std::vector<std::string> want = samples > 1 ? std::vector<std::string>{"sample", "member", "time", "lat", "lon"}
                                                      : std::vector<std::string>{"member", "time", "lat", "lon"};
    CHECK(dim_names(id, v) == want);
    CHECK(text_attr(id, var_id(id, "member"), "standard_name") == "realization");
    // Sample s, member m, state t of channel 1: trajectory s * members + m.
    const int64_t T = d.trajectories[0].size(0), field = d.nlat * d.nlon;
    for (int s = 0; s < samples; ++s)
      for (int m = 0; m < members; ++m) {
        std::vector<size_t> start = {static_cast<size_t>(m), static_cast<size_t>(T - 1), 0, 0};
        std::vector<size_t> count = {1, 1, static_cast<size_t>(d.nlat), static_cast<size_t>(d.nlon)};
        if (samples > 1) start.insert(start.begin(), static_cast<size_t>(s)), count.insert(count.begin(), 1);
        std::vector<double> got(static_cast<size_t>(field));
        nc(nc_get_vara_double(id, v, start.data(), count.data(), got.data()));
        const auto all = d.trajectories[static_cast<size_t>(s * members + m)].to_vector<double>();
        const auto from = all.begin() + ((T - 1) * 3 + 1) * field;
        CHECK(got == std::vector<double>(from, from + field));
      }
    nc(nc_close(id));
  }
  TrajectoryData d = sample_data(DType::f64, 4);
  CHECK(gs_test::contains(gs_test::error_of([&] { write_netcdf(dir / "bad.nc", d, {.members = 3}); }),
                          "whole ensembles of 3 members, got 4 trajectories"));
}

TEST_CASE("netcdf: the file carries CF coordinates and attributes") {
  TempDir dir("netcdf");
  TrajectoryData d = sample_data(DType::f32, 2, 3);
  d.grid = sphere::GridKind::equiangular;
  d.nlat = 7;
  d.trajectories = {randn({3, 3, 7, 12}, RandomKey{1, 0}), randn({3, 3, 7, 12}, RandomKey{1, 1})};
  NetcdfWriteOptions opt;
  opt.title = "SWE rollout";
  opt.history = "gradsphere rollout config.yaml";
  opt.reference_time = "1979-01-01 00:00:00";
  opt.start_hours = 12.0;
  opt.long_names = {"geopotential height times g", "relative vorticity", "divergence"};
  opt.attributes = {{"source", "unit test"}};
  write_netcdf(dir / "cf.nc", d, opt);

  int id;
  nc(nc_open((dir / "cf.nc").c_str(), NC_NOWRITE, &id));
  CHECK(text_attr(id, NC_GLOBAL, "Conventions") == "CF-1.8");
  CHECK(text_attr(id, NC_GLOBAL, "title") == "SWE rollout");
  CHECK(contains(text_attr(id, NC_GLOBAL, "history"), "gradsphere rollout config.yaml"));
  CHECK(text_attr(id, NC_GLOBAL, "source") == "unit test");
  CHECK(text_attr(id, NC_GLOBAL, "gradsphere_grid") == "equiangular");
  int lat = var_id(id, "lat"), lon = var_id(id, "lon"), time = var_id(id, "time");
  CHECK(text_attr(id, lat, "units") == "degrees_north");
  CHECK(text_attr(id, lat, "standard_name") == "latitude");
  CHECK(text_attr(id, lon, "units") == "degrees_east");
  CHECK(text_attr(id, lon, "standard_name") == "longitude");
  CHECK(text_attr(id, time, "units") == "hours since 1979-01-01 00:00:00");
  CHECK(text_attr(id, time, "calendar") == "standard");
  int z = var_id(id, "geopotential");
  CHECK(dim_names(id, z) == std::vector<std::string>{"sample", "time", "lat", "lon"});
  CHECK(text_attr(id, z, "units") == "m^2 s^-2");
  CHECK(text_attr(id, z, "long_name") == "geopotential height times g");
  CHECK(text_attr(id, var_id(id, "divergence"), "units") == "(missing)");  // empty units are left out
  nc_type type;
  nc(nc_inq_vartype(id, z, &type));
  CHECK(type == NC_FLOAT);
  std::vector<double> lat_v(7), lon_v(12), time_v(3);
  nc(nc_get_var_double(id, lat, lat_v.data()));
  nc(nc_get_var_double(id, lon, lon_v.data()));
  nc(nc_get_var_double(id, time, time_v.data()));
  CHECK(lat_v.front() == doctest::Approx(90.0));  // north first; the equiangular grid has both poles
  CHECK(lat_v[3] == doctest::Approx(0.0).epsilon(1e-12));
  CHECK(lat_v.back() == doctest::Approx(-90.0));
  CHECK(lon_v[0] == 0.0);
  CHECK(lon_v[3] == doctest::Approx(90.0));
  CHECK(time_v == std::vector<double>{12.0, 18.0, 24.0});
  // One value: sample 1, time 2, variable 'vorticity', row 4, column 5.
  size_t start[4] = {1, 2, 4, 5}, count[4] = {1, 1, 1, 1};
  float v = 0;
  nc(nc_get_vara_float(id, var_id(id, "vorticity"), start, count, &v));
  CHECK(v == d.trajectories[1].to_vector<float>()[((2 * 3 + 1) * 7 + 4) * 12 + 5]);
  nc(nc_close(id));
}

TEST_CASE("netcdf: a south-to-north file with longitudes from -180 is flipped and rolled") {
  TempDir dir("netcdf");
  const int64_t nlat = 5, nlon = 8;
  std::vector<double> lat = latitudes_deg(sphere::GridKind::equiangular, nlat);
  std::reverse(lat.begin(), lat.end());  // south first
  ForeignFile ff;
  ff.lat = lat;
  ff.lon = lons(nlon, -180.0);
  ff.time = {0.0, 0.25, 0.5};  // days: 6-hourly
  ff.value = [](size_t i) { return static_cast<double>(i); };
  ff.write(dir / "era.nc");
  NetcdfReadOptions opt;
  opt.variables = {"t2m"};
  opt.dtype = DType::f64;
  TrajectoryData d = read_netcdf(dir / "era.nc", opt);
  CHECK(d.grid == sphere::GridKind::equiangular);
  CHECK(d.dt_hours == doctest::Approx(6.0));
  CHECK(d.units.empty());
  REQUIRE(d.trajectories.size() == 1);
  REQUIRE(d.trajectories[0].sizes() == Shape{3, 1, nlat, nlon});
  std::vector<double> v = d.trajectories[0].to_vector<double>();
  for (int64_t t = 0; t < 3; ++t)
    for (int64_t i = 0; i < nlat; ++i)
      for (int64_t j = 0; j < nlon; ++j) {
        // Row i (from the north) is file row nlat-1-i; column j (at j*45 E) is file column (j+4) % 8.
        double file_index = static_cast<double>((t * nlat + (nlat - 1 - i)) * nlon + (j + nlon / 2) % nlon);
        CHECK(v[(t * nlat + i) * nlon + j] == file_index);
      }
}

TEST_CASE("netcdf: f32 coordinates, packed values and a single time with dt from the options") {
  TempDir dir("netcdf");
  ForeignFile ff;
  ff.lat = latitudes_deg(sphere::GridKind::legendre_gauss, 4);
  ff.lon = lons(8, 0.0);
  ff.time = {5.0};
  ff.time_units = "hours since 2000-01-01";
  ff.coord_type = NC_FLOAT;  // Gaussian latitudes rounded to f32: off by ~1e-6 degrees
  ff.var_attrs = {{"scale_factor", 0.5}, {"add_offset", 100.0}};
  ff.write(dir / "packed.nc");
  NetcdfReadOptions opt;
  opt.dtype = DType::f64;
  CHECK(contains(error_of([&] { read_netcdf(dir / "packed.nc", opt); }), "single time"));
  opt.dt_hours = 3.0;
  TrajectoryData d = read_netcdf(dir / "packed.nc", opt);
  CHECK(d.grid == sphere::GridKind::legendre_gauss);
  CHECK(d.dt_hours == 3.0);
  CHECK(d.trajectories[0].to_vector<double>()[9] == 9 * 0.5 + 100.0);
}

TEST_CASE("netcdf: several files make several trajectories") {
  TempDir dir("netcdf");
  TrajectoryData a = sample_data(DType::f32, 1, 3), b = sample_data(DType::f32, 2, 5);
  write_netcdf(dir / "a.nc", a);
  write_netcdf(dir / "b.nc", b);
  TrajectoryData all = read_netcdf(std::vector<fs::path>{dir / "a.nc", dir / "b.nc"});
  REQUIRE(all.trajectories.size() == 3);
  CHECK(all.trajectories[0].size(0) == 3);
  CHECK(all.trajectories[2].size(0) == 5);
  CHECK(all.trajectories[2].to_vector<float>() == b.trajectories[1].to_vector<float>());

  TrajectoryData c = sample_data(DType::f32);
  c.dt_hours = 1.0;
  write_netcdf(dir / "c.nc", c);
  std::string err = error_of([&] { read_netcdf(std::vector<fs::path>{dir / "a.nc", dir / "c.nc"}); });
  CHECK(contains(err, "c.nc"));
  CHECK(contains(err, "time step 1 vs 6 hours"));
}

TEST_CASE("netcdf: bad files and variables give errors naming the file and the variable") {
  TempDir dir("netcdf");
  fs::path p = dir / "bad.nc";
  auto read_error = [&](const ForeignFile& ff, NetcdfReadOptions opt = {}) {
    ff.write(p);
    return error_of([&] { read_netcdf(p, opt); });
  };
  ForeignFile good;
  good.lat = latitudes_deg(sphere::GridKind::equiangular, 5);
  good.lon = lons(8, 0.0);
  good.time = {0.0, 1.0, 2.0};
  REQUIRE(read_error(good) == "(no error)");

  NetcdfReadOptions want_z;
  want_z.variables = {"z500"};
  std::string err = read_error(good, want_z);
  CHECK(contains(err, p.string()));
  CHECK(contains(err, "has no variable 'z500'"));
  CHECK(contains(err, "t2m"));

  ForeignFile swapped = good;
  swapped.dims = {"time", "lon", "lat"};
  err = read_error(swapped);
  CHECK(contains(err, "has no data variable over (time, [level,] lat, lon) to read"));
  NetcdfReadOptions want_t2m;
  want_t2m.variables = {"t2m"};
  err = read_error(swapped, want_t2m);
  CHECK(contains(err, "variable 't2m' is (..., lon, lat): expected latitude before longitude"));

  ForeignFile uneven = good;
  uneven.time = {0.0, 1.0, 3.0};
  CHECK(contains(read_error(uneven), "irregular steps: the first gap is between 1979-01-02 00:00:00 and "
                                     "1979-01-04 00:00:00 (48 hours; the first step is 24 hours)"));

  ForeignFile no_units = good;
  no_units.time_units = "";
  CHECK(contains(read_error(no_units), "has no units attribute"));
  ForeignFile bad_units = good;
  bad_units.time_units = "fortnights since 2000-01-01";
  CHECK(contains(read_error(bad_units), "time coordinate 'time'"));
  CHECK(contains(read_error(bad_units), "fortnights"));

  ForeignFile off_grid = good;
  off_grid.lat = {80, 40, 0, -40, -80};
  CHECK(contains(read_error(off_grid), "match no supported grid"));
  NetcdfReadOptions lg;
  lg.grid = sphere::GridKind::legendre_gauss;
  CHECK(contains(read_error(good, lg), "are not the legendre-gauss grid"));

  ForeignFile shifted = good;
  shifted.lon = lons(8, 22.5);  // cell centres: no column at 0 E
  CHECK(contains(read_error(shifted), "expected a grid with a column at 0 degrees east"));
  ForeignFile gappy = good;
  gappy.lon[3] += 1.0;
  CHECK(contains(read_error(gappy), "equal steps of 360/8 = 45 degrees"));

  // Missing values (NaN, the fill value) read as NaN: masks for the loss and the metrics.
  ForeignFile holes = good;
  holes.value = [](size_t i) { return i == 17 ? NAN : 1.0; };
  holes.write(p);
  std::vector<double> v = read_netcdf(p).trajectories[0].to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) CHECK((i == 17 ? std::isnan(v[i]) : v[i] == 1.0));
  ForeignFile filled = good;
  filled.var_attrs = {{"_FillValue", 3.0}};
  filled.value = [](size_t i) { return static_cast<double>(i % 4); };
  filled.write(p);
  v = read_netcdf(p).trajectories[0].to_vector<double>();
  for (size_t i = 0; i < v.size(); ++i) CHECK((i % 4 == 3 ? std::isnan(v[i]) : v[i] == static_cast<double>(i % 4)));
  ForeignFile infinite = good;
  infinite.value = [](size_t i) { return i == 5 ? INFINITY : 1.0; };
  CHECK(contains(read_error(infinite), "variable 't2m' has an infinite value (inf) at sample 0, time 0"));

  CHECK(contains(error_of([&] { read_netcdf(dir / "none.nc"); }), "does not exist"));
  std::ofstream(dir / "junk.nc") << "this is not a NetCDF file";
  err = error_of([&] { read_netcdf(dir / "junk.nc"); });
  CHECK(contains(err, "junk.nc"));
  CHECK(contains(err, "cannot open it"));
}

TEST_CASE("netcdf: writing is atomic and checks its input") {
  TempDir dir("netcdf");
  fs::path p = dir / "out.nc";
  TrajectoryData d = sample_data(DType::f32);
  write_netcdf(p, d);
  auto before = fs::file_size(p);

  TrajectoryData bad_names = d;
  bad_names.variables[1] = "bad/name";  // '/' is not allowed in NetCDF names: fails inside the library
  std::string err = error_of([&] { write_netcdf(p, bad_names); });
  CHECK(contains(err, "defining variable 'bad/name'"));
  CHECK(contains(err, p.string()));
  CHECK(fs::file_size(p) == before);
  CHECK(dir.entries() == 1);  // the temporary file is gone
  CHECK(read_netcdf(p).variables == d.variables);

  TrajectoryData ragged = sample_data(DType::f32, 2);
  ragged.trajectories[1] = randn({2, 3, 6, 12}, RandomKey{3, 3});
  CHECK(contains(error_of([&] { write_netcdf(p, ragged); }), "same number of states"));
  NetcdfWriteOptions opt;
  opt.long_names = {"only one"};
  CHECK(contains(error_of([&] { write_netcdf(p, d, opt); }), "expected 3 long names"));
  CHECK(dir.entries() == 1);
}

TEST_CASE("netcdf: every window on every tile reads exactly the whole read's values, flipped, rolled and wrapped") {
  TempDir dir("netcdf");
  const int64_t nlat = 5, nlon = 8, T = 4;
  std::vector<double> lat = latitudes_deg(sphere::GridKind::equiangular, nlat);
  std::reverse(lat.begin(), lat.end());  // south first: tiles map to reversed file rows
  ForeignFile ff;
  ff.lat = lat;
  ff.lon = lons(nlon, -135.0);  // column 0 at 0 E is file column 3: tiles past column 4 wrap in the file
  ff.time = {0.0, 0.25, 0.5, 0.75};
  ff.value = [](size_t i) { return 0.5 * static_cast<double>(i) - 7.0; };
  ff.write(dir / "a.nc");
  write_netcdf(dir / "b.nc", sample_data(DType::f64, 2, T));  // a second file of two trajectories
  NetcdfReadOptions opt;
  opt.variables = {"t2m"};
  opt.dtype = DType::f64;
  const Tensor whole = read_netcdf(dir / "a.nc", opt).trajectories[0];
  auto source = open_netcdf({dir / "a.nc"}, opt);
  CHECK(source->info().states == std::vector<int64_t>{T});
  int tiles = 0;
  for (int64_t r0 = 0; r0 < nlat; ++r0)
    for (int64_t nr = 1; r0 + nr <= nlat; ++nr)
      for (int64_t c0 = 0; c0 < nlon; ++c0)
        for (int64_t nc_ = 1; c0 + nc_ <= nlon; nc_ += 2) {
          const int64_t t0 = (r0 + c0) % 3, n = 1 + (nr + nc_) % (T - t0);
          const Tensor tile = source->read(0, t0, n, {r0, nr}, {c0, nc_});
          const Tensor expect = narrow(narrow(narrow(whole, 0, t0, n), 2, r0, nr), 3, c0, nc_);
          REQUIRE(gs_test::exactly_equal(tile, expect));
          ++tiles;
        }
  CHECK(tiles > 100);
  // Several files: trajectories in file order, each tile from its own file.
  NetcdfReadOptions all;
  all.dtype = DType::f32;
  const TrajectoryData b = sample_data(DType::f64, 2, T);
  auto two = open_netcdf({dir / "b.nc", dir / "b.nc"}, all);
  REQUIRE(two->info().trajectories() == 4);
  const Tensor tile = two->read(3, 1, 2, {2, 3}, {5, 7});
  CHECK(tile.dtype() == DType::f32);
  CHECK(gs_test::exactly_equal(tile, cast_copy(narrow(narrow(narrow(b.trajectories[1], 0, 1, 2), 2, 2, 3), 3, 5, 7),
                                               DType::f32)));
  CHECK(contains(error_of([&] { two->read(4, 0, 1); }), "trajectory 4: out of range (the data has 4 trajectories)"));
  CHECK(contains(error_of([&] { two->read(0, 3, 2); }), "states 3..4 of trajectory 0: out of range (it has 4 states)"));
  CHECK(contains(error_of([&] { two->read(0, 0, 1, {4, 3}); }), "latitude rows [4, 7): out of range (the grid has 6)"));
}

TEST_CASE("netcdf: a missing value reads as NaN in the tiles that contain it, and only there") {
  TempDir dir("netcdf");
  const int64_t nlat = 4, nlon = 6;
  ForeignFile ff;
  ff.lat = latitudes_deg(sphere::GridKind::equiangular, nlat);
  ff.lon = lons(nlon, 0.0);
  ff.time = {0.0, 0.25};
  ff.var_attrs = {{"_FillValue", -999.0}};
  // The fill value at time 1, row 3, column 5 (the south-east tile).
  ff.value = [&](size_t i) { return i == static_cast<size_t>((1 * nlat + 3) * nlon + 5) ? -999.0 : 1.0; };
  ff.write(dir / "gap.nc");
  NetcdfReadOptions opt;
  opt.dtype = DType::f64;
  opt.variables = {"t2m"};
  auto source = open_netcdf({dir / "gap.nc"}, opt);
  auto nans = [](const Tensor& t) {
    int64_t n = 0;
    for (double x : t.to_vector<double>()) n += std::isnan(x);
    return n;
  };
  CHECK(nans(source->read(0, 0, 2, {0, 2}, {0, 3})) == 0);  // the north-west tile is complete
  CHECK(nans(source->read(0, 0, 1, {2, 2}, {3, 3})) == 0);  // the gap's tile at the other time
  // The south-east tile at time 1: rows 2..3, columns 3..5; the gap is its row 1, column 2 (north first).
  const std::vector<double> tile = source->read(0, 1, 1, {2, 2}, {3, 3}).to_vector<double>();
  CHECK(nans(from_vector(tile)) == 1);
  CHECK(std::isnan(tile[1 * 3 + 2]));
}

namespace {

// A 1-time, 2x4 file with lat/lon coordinates and one variable "v" of `type` written by `fill_values`
// (or left unwritten), with `attrs` set before the data.
void write_typed(const fs::path& p, nc_type type, const std::function<void(int, int)>& attrs,
                 const std::function<void(int, int)>& fill_values) {
  int id, dims[3], var, lat, lon;
  nc(nc_create(p.c_str(), NC_CLOBBER | NC_NETCDF4, &id));
  nc(nc_def_dim(id, "time", 1, &dims[0]));
  nc(nc_def_dim(id, "lat", 2, &dims[1]));
  nc(nc_def_dim(id, "lon", 4, &dims[2]));
  nc(nc_def_var(id, "lat", NC_DOUBLE, 1, &dims[1], &lat));
  nc(nc_def_var(id, "lon", NC_DOUBLE, 1, &dims[2], &lon));
  nc(nc_def_var(id, "v", type, 3, dims, &var));
  attrs(id, var);
  nc(nc_enddef(id));
  const std::vector<double> lats = latitudes_deg(sphere::GridKind::equiangular, 2), lonv = lons(4, 0.0);
  nc(nc_put_var_double(id, lat, lats.data()));
  nc(nc_put_var_double(id, lon, lonv.data()));
  if (fill_values) fill_values(id, var);
  nc(nc_close(id));
}

}  // namespace

TEST_CASE("netcdf: _Unsigned packed shorts, default fill values and valid ranges are read as CF says") {
  TempDir dir("netcdf");
  NetcdfReadOptions opt;
  opt.dtype = DType::f64;
  opt.dt_hours = 6.0;
  // Unsigned shorts: the stored -1 is 65535, -32768 is 32768; then scale and offset.
  write_typed(
      dir / "u16.nc", NC_SHORT,
      [](int id, int var) {
        nc(nc_put_att_text(id, var, "_Unsigned", 4, "true"));
        const double scale = 0.5, offset = -10.0;
        nc(nc_put_att_double(id, var, "scale_factor", NC_DOUBLE, 1, &scale));
        nc(nc_put_att_double(id, var, "add_offset", NC_DOUBLE, 1, &offset));
      },
      [](int id, int var) {
        const short v[8] = {0, 1, -1, -32768, 32767, 2, 3, 4};
        nc(nc_put_var_short(id, var, v));
      });
  const auto u = read_netcdf(dir / "u16.nc", opt).trajectories[0].to_vector<double>();
  CHECK(u == std::vector<double>{-10.0, -9.5, 65535 * 0.5 - 10, 32768 * 0.5 - 10, 32767 * 0.5 - 10, -9.0, -8.5, -8.0});
  // A variable never written and without _FillValue reads netCDF's default fill: missing, not 9.97e36.
  write_typed(dir / "unwritten.nc", NC_FLOAT, [](int, int) {}, {});
  for (double x : read_netcdf(dir / "unwritten.nc", opt).trajectories[0].to_vector<double>()) CHECK(std::isnan(x));
  // valid_range: a value outside it is missing too.
  write_typed(
      dir / "range.nc", NC_DOUBLE,
      [](int id, int var) {
        const double range[2] = {0.0, 100.0};
        nc(nc_put_att_double(id, var, "valid_range", NC_DOUBLE, 2, range));
      },
      [](int id, int var) {
        const double v[8] = {0, 1, 2, 3, 4, 5, 150, 7};
        nc(nc_put_var_double(id, var, v));
      });
  const auto ranged = read_netcdf(dir / "range.nc", opt).trajectories[0].to_vector<double>();
  for (size_t i = 0; i < ranged.size(); ++i) CHECK((i == 6 ? std::isnan(ranged[i]) : ranged[i] == static_cast<double>(i)));
  // Attributes of an _Unsigned variable are stored signed too: valid_range [0, -6b] is 0..250 and a
  // missing_value of -1b is 255.
  write_typed(
      dir / "u8.nc", NC_BYTE,
      [](int id, int var) {
        nc(nc_put_att_text(id, var, "_Unsigned", 4, "true"));
        const signed char range[2] = {0, -6}, missing = -1;
        nc(nc_put_att_schar(id, var, "valid_range", NC_BYTE, 2, range));
        nc(nc_put_att_schar(id, var, "missing_value", NC_BYTE, 1, &missing));
      },
      [](int id, int var) {
        const signed char v[8] = {0, 1, -56, -7, 100, 2, 3, 4};  // 200 and 249 as unsigned
        nc(nc_put_var_schar(id, var, v));
      });
  CHECK(read_netcdf(dir / "u8.nc", opt).trajectories[0].to_vector<double>() ==
        std::vector<double>{0, 1, 200, 249, 100, 2, 3, 4});
  write_typed(
      dir / "u8gap.nc", NC_BYTE,
      [](int id, int var) {
        nc(nc_put_att_text(id, var, "_Unsigned", 4, "true"));
        const signed char missing = -1;
        nc(nc_put_att_schar(id, var, "missing_value", NC_BYTE, 1, &missing));
      },
      [](int id, int var) {
        const signed char v[8] = {0, 1, 2, 3, 4, -1, 6, 7};
        nc(nc_put_var_schar(id, var, v));
      });
  CHECK(std::isnan(read_netcdf(dir / "u8gap.nc", opt).trajectories[0].to_vector<double>()[5]));
  // A value that scale_factor takes past the double range.
  write_typed(
      dir / "huge.nc", NC_DOUBLE,
      [](int id, int var) {
        const double scale = 1e300;
        nc(nc_put_att_double(id, var, "scale_factor", NC_DOUBLE, 1, &scale));
      },
      [](int id, int var) {
        const double v[8] = {0, 1, 2, 3, 1e10, 5, 6, 7};
        nc(nc_put_var_double(id, var, v));
      });
  CHECK(contains(error_of([&] { read_netcdf(dir / "huge.nc", opt); }), "a value that overflows when unpacked (10000000000)"));
  // Text variables and bad _Unsigned values are errors that say so.
  write_typed(dir / "bad.nc", NC_INT, [](int id, int var) { nc(nc_put_att_text(id, var, "_Unsigned", 3, "yes")); },
              {});
  CHECK(contains(error_of([&] { read_netcdf(dir / "bad.nc", opt); }),
                 "variable 'v' has _Unsigned = \"yes\"; expected \"true\" or \"false\""));
}
