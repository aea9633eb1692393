// NetCDF files laid out as climate tools write them (CAM/E3SM, CMIP, ERA5, CDO output), written
// through the netCDF C API and read back through open_netcdf / read_netcdf: variables over pressure
// levels, coordinates under other names, south-to-north latitudes and longitudes from -180, a closed
// longitude seam, the CF calendars, yearly files joined along time, fill values and masks, and the
// variables the reader leaves out (always named in the notes). Every error names the file.
#include <doctest/doctest.h>
#include <netcdf.h>

#include <cmath>
#include <deque>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "models/data/netcdf_io.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::models;
using gs_test::contains;
using gs_test::error_of;
namespace fs = std::filesystem;

namespace {

void nc_ok(int status, const std::string& what) {
  INFO(what);
  REQUIRE_MESSAGE(status == NC_NOERR, std::string(nc_strerror(status)));
}

using Index = std::vector<size_t>;                   // a position along a variable's dimensions
using ValueAt = std::function<double(const Index&)>;  // the value stored there

// One variable of a file being built: its dimensions (by name), stored type, attributes and values.
struct NcVar {
  std::string name;
  std::vector<std::string> dims;
  nc_type type = NC_DOUBLE;
  ValueAt value;  // unset: never written
  std::vector<std::pair<std::string, std::string>> texts;
  std::vector<std::pair<std::string, std::vector<double>>> numbers;  // stored in the variable's type

  NcVar& text(const std::string& key, const std::string& v) {
    texts.emplace_back(key, v);
    return *this;
  }
  NcVar& num(const std::string& key, std::vector<double> v) {
    numbers.emplace_back(key, std::move(v));
    return *this;
  }
};

// A NetCDF-4 file described piece by piece, then written in one go: dimensions (fixed or
// unlimited), variables in definition order (the file order the reader sees), global attributes.
struct NcBuild {
  struct Dim {
    std::string name;
    size_t len;
    bool unlimited;
  };
  std::vector<Dim> dims;
  std::deque<NcVar> vars;  // a deque: references returned by var() stay valid
  std::vector<std::pair<std::string, std::string>> globals;

  NcBuild& dim(const std::string& name, size_t len, bool unlimited = false) {
    dims.push_back({name, len, unlimited});
    return *this;
  }
  NcVar& var(const std::string& name, std::vector<std::string> on, ValueAt value, nc_type type = NC_DOUBLE) {
    vars.push_back(NcVar{name, std::move(on), type, std::move(value), {}, {}});
    return vars.back();
  }
  // A dimension (named `dim_name`, or `name`) and a 1-D variable `name` over it holding `values`.
  NcVar& coord(const std::string& name, const std::vector<double>& values, std::string dim_name = "",
               nc_type type = NC_DOUBLE, bool unlimited = false) {
    if (dim_name.empty()) dim_name = name;
    dim(dim_name, values.size(), unlimited);
    return var(name, {dim_name}, [values](const Index& x) { return values[x[0]]; }, type);
  }
  NcBuild& global(const std::string& key, const std::string& value) {
    globals.emplace_back(key, value);
    return *this;
  }
  size_t len(const std::string& name) const {
    for (const Dim& d : dims)
      if (d.name == name) return d.len;
    FAIL("no dimension " << name);
    return 0;
  }

  void write(const fs::path& p) const {
    int id;
    nc_ok(nc_create(p.c_str(), NC_CLOBBER | NC_NETCDF4, &id), "creating " + p.string());
    std::map<std::string, int> dim_id;
    for (const Dim& d : dims) {
      int did;
      nc_ok(nc_def_dim(id, d.name.c_str(), d.unlimited ? NC_UNLIMITED : d.len, &did), "dim " + d.name);
      dim_id[d.name] = did;
    }
    for (const auto& [key, value] : globals)
      nc_ok(nc_put_att_text(id, NC_GLOBAL, key.c_str(), value.size(), value.c_str()), "global " + key);
    std::vector<int> var_ids;
    for (const NcVar& v : vars) {
      std::vector<int> dids;
      for (const auto& d : v.dims) dids.push_back(dim_id.at(d));
      int vid;
      nc_ok(nc_def_var(id, v.name.c_str(), v.type, static_cast<int>(dids.size()), dids.data(), &vid), "var " + v.name);
      for (const auto& [key, value] : v.texts)
        nc_ok(nc_put_att_text(id, vid, key.c_str(), value.size(), value.c_str()), v.name + ":" + key);
      for (const auto& [key, value] : v.numbers)
        nc_ok(nc_put_att_double(id, vid, key.c_str(), v.type, value.size(), value.data()), v.name + ":" + key);
      var_ids.push_back(vid);
    }
    nc_ok(nc_enddef(id), "enddef");
    for (size_t k = 0; k < vars.size(); ++k) {
      const NcVar& v = vars[k];
      if (!v.value) continue;
      std::vector<size_t> shape;
      size_t n = 1;
      for (const auto& d : v.dims) shape.push_back(len(d)), n *= len(d);
      std::vector<double> data(n);
      Index x(shape.size(), 0);
      for (size_t i = 0; i < n; ++i) {  // row-major, the last dimension fastest
        data[i] = v.value(x);
        for (size_t d = shape.size(); d-- > 0;) {
          if (++x[d] < shape[d]) break;
          x[d] = 0;
        }
      }
      const std::vector<size_t> start(shape.size(), 0);
      if (n == 0) continue;
      if (v.type == NC_FLOAT) {  // as floats: the library refuses infinities converted from doubles
        const std::vector<float> f(data.begin(), data.end());
        nc_ok(nc_put_vara_float(id, var_ids[k], start.data(), shape.data(), f.data()), "writing " + v.name);
      } else {
        nc_ok(nc_put_vara_double(id, var_ids[k], start.data(), shape.data(), data.data()), "writing " + v.name);
      }
    }
    nc_ok(nc_close(id), "closing " + p.string());
  }
};

constexpr int64_t kLat = 5, kLon = 8;
// The equiangular 5-point latitudes as a tool writes them (round numbers, north first).
const std::vector<double> kLats = {90, 45, 0, -45, -90};

std::vector<double> lons_from(double start, int64_t n = kLon) {
  std::vector<double> v;
  for (int64_t j = 0; j < n; ++j) v.push_back(start + 360.0 * static_cast<double>(j) / static_cast<double>(n));
  return v;
}

// The usual coordinates: time (unlimited, as CAM and CDO write it, with CF units and calendar), lat
// (north first, degrees_north) and lon (from 0, degrees_east).
NcBuild cf_grid(const std::string& time_units, const std::vector<double>& times, const std::string& calendar = "standard",
                const std::vector<double>& lats = kLats, const std::vector<double>& lons = lons_from(0.0)) {
  NcBuild b;
  b.global("Conventions", "CF-1.8").global("source", "test_netcdf_cf");
  NcVar& t = b.coord("time", times, "", NC_DOUBLE, true).text("units", time_units).text("standard_name", "time");
  if (!calendar.empty()) t.text("calendar", calendar);
  b.coord("lat", lats).text("units", "degrees_north").text("standard_name", "latitude");
  b.coord("lon", lons).text("units", "degrees_east").text("standard_name", "longitude");
  return b;
}

// Distinct, exactly representable (f32 too) values of a (time, lat, lon) field, offset by `base`.
ValueAt surface(double base) {
  return [base](const Index& x) { return base + 100.0 * double(x[0]) + 10.0 * double(x[1]) + double(x[2]); };
}
// ... and of a (time, lev, lat, lon) field: 1000 per level.
ValueAt layered(double base) {
  return [base](const Index& x) {
    return base + 1000.0 * double(x[1]) + 100.0 * double(x[0]) + 10.0 * double(x[2]) + double(x[3]);
  };
}

LevelSelection level_values(std::vector<double> v) {
  LevelSelection s;
  s.values = std::move(v);
  return s;
}
LevelSelection level_indices(std::vector<int64_t> k) {
  LevelSelection s;
  s.indices = std::move(k);
  return s;
}

NetcdfReadOptions f64_options(std::vector<VariableRequest> variables = {}) {
  NetcdfReadOptions o;
  o.dtype = DType::f64;
  o.variables = std::move(variables);
  return o;
}

using Expect = std::function<double(int64_t t, int64_t c, int64_t i, int64_t j)>;

// Every (t, c, i, j) of a (T, C, H, W) f64 tensor equals expect(t, c, i, j) exactly (NaN where a NaN
// is expected); the count of differences and the first one are reported.
void check_values(const Tensor& got, const Expect& expect) {
  REQUIRE(got.dtype() == DType::f64);
  REQUIRE(got.sizes().size() == 4);
  const Shape s = got.sizes();
  const std::vector<double> v = got.to_vector<double>();
  int64_t wrong = 0;
  std::string first;
  for (int64_t t = 0; t < s[0]; ++t)
    for (int64_t c = 0; c < s[1]; ++c)
      for (int64_t i = 0; i < s[2]; ++i)
        for (int64_t j = 0; j < s[3]; ++j) {
          const double g = v[static_cast<size_t>(((t * s[1] + c) * s[2] + i) * s[3] + j)], e = expect(t, c, i, j);
          if (std::isnan(e) ? std::isnan(g) : g == e) continue;
          if (wrong++ == 0) first = fmt::format("(t {}, c {}, row {}, col {}): got {}, expected {}", t, c, i, j, g, e);
        }
  CHECK_MESSAGE(wrong == 0, wrong << " values differ; the first at " << first);
}

// An error that names `file` and says every one of `parts`.
void check_error(const std::string& err, const fs::path& file, std::initializer_list<std::string> parts) {
  INFO("error: " << err);
  CHECK(err != "(no error)");
  CHECK_MESSAGE(contains(err, file.string()), "the error should name " << file.string());
  for (const std::string& part : parts) CHECK_MESSAGE(contains(err, part), "expected to contain: " << part);
}

bool any_note(const TrajectoryInfo& info, std::initializer_list<std::string> parts) {
  for (const std::string& note : info.notes) {
    bool all = true;
    for (const std::string& p : parts) all = all && contains(note, p);
    if (all) return true;
  }
  return false;
}

std::string notes_of(const TrajectoryInfo& info) { return fmt::format("{}", fmt::join(info.notes, " | ")); }

// The levels file of the first cases: T over 4 pressure levels, then the surface fields PS and PRECT.
const std::vector<double> kPlev = {1000, 850, 500, 250};
fs::path write_levels(const gs_test::TempDir& dir) {
  NcBuild b = cf_grid("hours since 2000-01-01 00:00:00", {0, 6, 12, 18});
  b.coord("lev", kPlev).text("units", "hPa").text("positive", "down").text("axis", "Z").text("long_name",
                                                                                             "pressure level");
  b.var("T", {"time", "lev", "lat", "lon"}, layered(0), NC_FLOAT).text("units", "K");
  b.var("PS", {"time", "lat", "lon"}, surface(100000), NC_FLOAT).text("units", "Pa");
  b.var("PRECT", {"time", "lat", "lon"}, surface(500), NC_FLOAT).text("units", "m/s");
  const fs::path p = dir / "levels.nc";
  b.write(p);
  return p;
}
double T_at(int64_t t, int64_t k, int64_t i, int64_t j) { return layered(0)({size_t(t), size_t(k), size_t(i), size_t(j)}); }
double PS_at(int64_t t, int64_t i, int64_t j) { return surface(100000)({size_t(t), size_t(i), size_t(j)}); }
double PRECT_at(int64_t t, int64_t i, int64_t j) { return surface(500)({size_t(t), size_t(i), size_t(j)}); }

}  // namespace

// ---------------------------------------------------------------------------------------------------
// 1. Levels

TEST_CASE("netcdf cf: a variable over pressure levels reads as one channel per level, in file order") {
  gs_test::TempDir dir("netcdf-cf");
  const fs::path p = write_levels(dir);
  auto source = open_netcdf({p}, f64_options());
  const TrajectoryInfo& info = source->info();
  CHECK(info.variables == std::vector<std::string>{"T_0", "T_1", "T_2", "T_3", "PS", "PRECT"});
  CHECK(info.units == std::vector<std::string>{"K", "K", "K", "K", "Pa", "m/s"});
  CHECK(info.roles == std::vector<VariableRole>(6, VariableRole::prognostic));
  CHECK(info.layout() == ChannelLayout::all_prognostic(6));
  REQUIRE(info.levels.size() == 6);
  for (int64_t k = 0; k < 4; ++k) {
    CAPTURE(k);
    const ChannelLevel& l = info.levels[static_cast<size_t>(k)];
    CHECK(l.has_level());
    CHECK(l.coordinate == "lev");
    CHECK(l.units == "hPa");
    CHECK(l.value == kPlev[static_cast<size_t>(k)]);
    CHECK(l.index == k);
  }
  CHECK(!info.levels[4].has_level());
  CHECK(!info.levels[5].has_level());
  CHECK(info.grid == sphere::GridKind::equiangular);
  CHECK(info.nlat == kLat);
  CHECK(info.nlon == kLon);
  CHECK(info.dt_hours == 6.0);
  CHECK(info.states == std::vector<int64_t>{4});
  CHECK(info.calendar == "standard");
  CHECK(info.time_units == "hours since 2000-01-01 00:00:00");
  CHECK(info.start_times == std::vector<double>{0.0});
  CHECK_MESSAGE(info.notes.empty(), notes_of(info));

  const Expect expect = [](int64_t t, int64_t c, int64_t i, int64_t j) {
    return c < 4 ? T_at(t, c, i, j) : c == 4 ? PS_at(t, i, j) : PRECT_at(t, i, j);
  };
  const TrajectoryData d = read_netcdf(p, f64_options());
  CHECK(d.variables == info.variables);
  CHECK(d.levels.size() == 6);
  REQUIRE(d.trajectories.size() == 1);
  REQUIRE(d.trajectories[0].sizes() == Shape{4, 6, kLat, kLon});
  check_values(d.trajectories[0], expect);
  // A window on a tile: the level channels read from their own levels.
  check_values(source->read(0, 2, 2, {1, 3}, {4, 4}), [&](int64_t t, int64_t c, int64_t i, int64_t j) {
    return expect(t + 2, c, i + 1, j + 4);
  });
}

TEST_CASE("netcdf cf: levels selected by value or by index, in the order asked; bad selections name the levels") {
  gs_test::TempDir dir("netcdf-cf");
  const fs::path p = write_levels(dir);

  auto by_value = open_netcdf({p}, f64_options({VariableRequest("T", VariableRole::prognostic,
                                                                level_values({850, 500}))}));
  CHECK(by_value->info().variables == std::vector<std::string>{"T_1", "T_2"});
  REQUIRE(by_value->info().levels.size() == 2);
  CHECK(by_value->info().levels[0].value == 850);
  CHECK(by_value->info().levels[0].index == 1);
  CHECK(by_value->info().levels[1].value == 500);
  CHECK(by_value->info().levels[1].index == 2);
  check_values(by_value->read(0, 0, 4), [](int64_t t, int64_t c, int64_t i, int64_t j) { return T_at(t, 1 + c, i, j); });

  auto by_index = open_netcdf({p}, f64_options({VariableRequest("T", VariableRole::prognostic,
                                                                level_indices({3, 0}))}));
  CHECK(by_index->info().variables == std::vector<std::string>{"T_3", "T_0"});
  REQUIRE(by_index->info().levels.size() == 2);
  CHECK(by_index->info().levels[0].value == 250);
  CHECK(by_index->info().levels[1].value == 1000);
  CHECK(by_index->info().levels[0].units == "hPa");
  check_values(by_index->read(0, 0, 4),
               [](int64_t t, int64_t c, int64_t i, int64_t j) { return T_at(t, c == 0 ? 3 : 0, i, j); });
  // The same through read_netcdf.
  const TrajectoryData d = read_netcdf(p, f64_options({VariableRequest("T", VariableRole::prognostic,
                                                                       level_indices({3, 0}))}));
  CHECK(d.variables == std::vector<std::string>{"T_3", "T_0"});
  check_values(d.trajectories[0], [](int64_t t, int64_t c, int64_t i, int64_t j) { return T_at(t, c == 0 ? 3 : 0, i, j); });

  auto error_for = [&](LevelSelection sel, const std::string& var = "T") {
    return error_of([&] { open_netcdf({p}, f64_options({VariableRequest(var, VariableRole::prognostic, sel)})); });
  };
  check_error(error_for(level_values({700})), p,
              {"variable 'T' has no level 700 hPa", "its levels along 'lev': 1000, 850, 500, 250"});
  check_error(error_for(level_values({850, 700})), p, {"variable 'T' has no level 700 hPa"});
  check_error(error_for(level_indices({4})), p,
              {"variable 'T': level index 4 is out of range", "its level dimension 'lev' has 4 levels"});
  check_error(error_for(level_indices({-1})), p, {"variable 'T': level index -1 is out of range"});
  check_error(error_for(LevelSelection{.values = {850}, .indices = {1}}), p,
              {"variable 'T': level 1 is selected twice"});
  check_error(error_for(level_values({850}), "PS"), p,
              {"variable 'PS' has dims (time, lat, lon): it has no level dimension to select levels from"});
}

TEST_CASE("netcdf cf: a level dimension without a coordinate variable has its indices as levels") {
  gs_test::TempDir dir("netcdf-cf");
  NcBuild b = cf_grid("hours since 2000-01-01", {0, 6});
  b.dim("ilev", 3);  // no variable ilev
  b.var("Q", {"time", "ilev", "lat", "lon"}, layered(0.5), NC_FLOAT).text("units", "kg/kg");
  const fs::path p = dir / "ilev.nc";
  b.write(p);
  auto source = open_netcdf({p}, f64_options());
  const TrajectoryInfo& info = source->info();
  CHECK(info.variables == std::vector<std::string>{"Q_0", "Q_1", "Q_2"});
  // Read as levels, but said (once): a dimension that is no vertical coordinate may be a mistake.
  CHECK_MESSAGE(info.notes.size() == 1, notes_of(info));
  CHECK(any_note(info, {"'ilev.nc': dimension 'ilev' (3 entries) has no CF vertical coordinate",
                        "its entries are taken as levels, one channel each"}));
  REQUIRE(info.levels.size() == 3);
  for (int64_t k = 0; k < 3; ++k) {
    CAPTURE(k);
    CHECK(info.levels[static_cast<size_t>(k)].coordinate == "ilev");
    CHECK(info.levels[static_cast<size_t>(k)].units == "");
    CHECK(info.levels[static_cast<size_t>(k)].value == static_cast<double>(k));
    CHECK(info.levels[static_cast<size_t>(k)].index == k);
  }
  check_values(source->read(0, 0, 2), [](int64_t t, int64_t c, int64_t i, int64_t j) {
    return layered(0.5)({size_t(t), size_t(c), size_t(i), size_t(j)});
  });
  // Selecting by value selects by index.
  auto two = open_netcdf({p}, f64_options({VariableRequest("Q", VariableRole::prognostic, level_values({2}))}));
  CHECK(two->info().variables == std::vector<std::string>{"Q_2"});
  check_error(error_of([&] {
                open_netcdf({p}, f64_options({VariableRequest("Q", VariableRole::prognostic, level_values({3}))}));
              }),
              p, {"variable 'Q' has no level 3", "its levels along 'ilev': 0, 1, 2"});
}

TEST_CASE("netcdf cf: a vertical dimension before time is refused with the order expected, not read as samples") {
  gs_test::TempDir dir("netcdf-cf");
  NcBuild b = cf_grid("hours since 2000-01-01", {0, 6});
  b.coord("lev", {850, 500}).text("units", "hPa").text("positive", "down");
  b.var("T", {"lev", "time", "lat", "lon"}, layered(0), NC_FLOAT).text("units", "K");
  b.var("PS", {"time", "lat", "lon"}, surface(100000), NC_FLOAT).text("units", "Pa");
  const fs::path p = dir / "lev_first.nc";
  b.write(p);
  check_error(error_of([&] { open_netcdf({p}, f64_options({"PS", "T"})); }), p,
              {"variable 'T' has dims (lev, time, lat, lon): its vertical dimension 'lev' comes before time",
               "expected ([sample,] time, lev, lat, lon)", "ncpdq -a time,lev"});
  // Not asked for: skipped, with the same reason in the notes, and the rest is read.
  const TrajectoryInfo info = open_netcdf({p}, f64_options())->info();
  CHECK(info.variables == std::vector<std::string>{"PS"});
  CHECK(any_note(info, {"'lev_first.nc': variable 'T' (lev, time, lat, lon) skipped", "comes before time"}));
}

TEST_CASE("netcdf cf: a level coordinate named unlike its dimension is found by its attributes") {
  gs_test::TempDir dir("netcdf-cf");
  NcBuild b = cf_grid("hours since 2000-01-01", {0, 6});
  b.coord("pressure", {92500, 50000}, "plev").text("units", "Pa").text("standard_name", "air_pressure");
  b.var("ta", {"time", "plev", "lat", "lon"}, layered(200), NC_FLOAT).text("units", "K");
  const fs::path p = dir / "cmip.nc";
  b.write(p);
  const TrajectoryInfo info = open_netcdf({p}, f64_options())->info();
  CHECK(info.variables == std::vector<std::string>{"ta_0", "ta_1"});
  REQUIRE(info.levels.size() == 2);
  CHECK(info.levels[0].coordinate == "pressure");
  CHECK(info.levels[0].units == "Pa");
  CHECK(info.levels[0].value == 92500);
  CHECK(info.levels[1].value == 50000);
}

TEST_CASE("netcdf cf: requests with roles come in role order (prognostic, forcing, diagnostic) whatever the request order") {
  gs_test::TempDir dir("netcdf-cf");
  const fs::path p = write_levels(dir);
  const std::vector<VariableRequest> requests = {
      VariableRequest("PRECT", VariableRole::diagnostic),
      VariableRequest("T", VariableRole::forcing, level_values({500, 850})),
      VariableRequest("PS", VariableRole::prognostic),
  };
  auto source = open_netcdf({p}, f64_options(requests));
  const TrajectoryInfo& info = source->info();
  CHECK(info.variables == std::vector<std::string>{"PS", "T_2", "T_1", "PRECT"});
  CHECK(info.roles == std::vector<VariableRole>{VariableRole::prognostic, VariableRole::forcing, VariableRole::forcing,
                                                VariableRole::diagnostic});
  CHECK(info.layout() == ChannelLayout{1, 2, 1});
  CHECK(info.units == std::vector<std::string>{"Pa", "K", "K", "m/s"});
  REQUIRE(info.levels.size() == 4);
  CHECK(!info.levels[0].has_level());
  CHECK(info.levels[1].value == 500);
  CHECK(info.levels[2].value == 850);
  CHECK(!info.levels[3].has_level());
  const Expect expect = [](int64_t t, int64_t c, int64_t i, int64_t j) {
    return c == 0 ? PS_at(t, i, j) : c == 1 ? T_at(t, 2, i, j) : c == 2 ? T_at(t, 1, i, j) : PRECT_at(t, i, j);
  };
  check_values(source->read(0, 0, 4), expect);
  const TrajectoryData d = read_netcdf(p, f64_options(requests));
  CHECK(d.roles == info.roles);
  CHECK(d.variables == info.variables);
  check_values(d.trajectories[0], expect);
  // A name listed twice is an error.
  CHECK(contains(error_of([&] { open_netcdf({p}, f64_options({"PS", VariableRequest("PS", VariableRole::forcing)})); }),
                 "'PS' is listed twice"));
  // A variable the file does not have: the file and its variables are named.
  check_error(error_of([&] { open_netcdf({p}, f64_options({"Z3"})); }), p,
              {"has no variable 'Z3'", "T", "PS", "PRECT"});
}

// ---------------------------------------------------------------------------------------------------
// 2. Renamed coordinates

TEST_CASE("netcdf cf: lat/lon variables over the dimensions latitude/longitude") {
  gs_test::TempDir dir("netcdf-cf");
  NcBuild b;
  b.coord("time", {0, 6, 12}, "time", NC_DOUBLE, true).text("units", "hours since 1979-01-01");
  b.coord("lat", kLats, "latitude").text("units", "degrees_north");
  b.coord("lon", lons_from(0.0), "longitude").text("units", "degrees_east");
  b.var("t2m", {"time", "latitude", "longitude"}, surface(250), NC_FLOAT).text("units", "K");
  const fs::path p = dir / "era5.nc";
  b.write(p);
  auto source = open_netcdf({p}, f64_options());
  CHECK(source->info().variables == std::vector<std::string>{"t2m"});
  CHECK(source->info().grid == sphere::GridKind::equiangular);
  CHECK(source->info().nlat == kLat);
  CHECK(source->info().nlon == kLon);
  CHECK(source->info().dt_hours == 6.0);
  CHECK_MESSAGE(source->info().notes.empty(), notes_of(source->info()));
  check_values(source->read(0, 0, 3), [](int64_t t, int64_t, int64_t i, int64_t j) {
    return surface(250)({size_t(t), size_t(i), size_t(j)});
  });
}

TEST_CASE("netcdf cf: coordinates y/x found by standard_name alone, and by axis alone") {
  gs_test::TempDir dir("netcdf-cf");
  // y (south to north) and x (from -180) with standard_name latitude/longitude and plain "degrees".
  {
    NcBuild b;
    b.coord("t", {0, 0.25}, "t").text("units", "days since 2010-01-01").text("calendar", "gregorian");
    b.coord("y", {-90, -45, 0, 45, 90}).text("standard_name", "latitude").text("units", "degrees");
    b.coord("x", lons_from(-180.0)).text("standard_name", "longitude").text("units", "degrees");
    b.var("sst", {"t", "y", "x"}, surface(0), NC_FLOAT);
    const fs::path p = dir / "yx_standard_name.nc";
    b.write(p);
    auto source = open_netcdf({p}, f64_options());
    CHECK(source->info().variables == std::vector<std::string>{"sst"});
    CHECK(source->info().grid == sphere::GridKind::equiangular);
    CHECK(source->info().nlat == kLat);
    CHECK(source->info().nlon == kLon);
    CHECK(source->info().dt_hours == 6.0);
    CHECK(source->info().calendar == "standard");
    // Row i (north first) is file row 4 - i; column j (j * 45 E) is file column (j + 4) % 8.
    check_values(source->read(0, 0, 2), [](int64_t t, int64_t, int64_t i, int64_t j) {
      return 100.0 * double(t) + 10.0 * double(kLat - 1 - i) + double((j + 4) % kLon);
    });
  }
  // Coordinates whose only CF mark is axis Y / X (no units, no standard_name).
  {
    NcBuild b;
    b.coord("time", {0, 3, 6}).text("units", "hours since 2010-01-01 00:00:00");
    b.coord("rows", kLats).text("axis", "Y");
    b.coord("cols", lons_from(0.0)).text("axis", "X");
    b.var("u10", {"time", "rows", "cols"}, surface(-50), NC_DOUBLE).text("units", "m s-1");
    const fs::path p = dir / "yx_axis.nc";
    b.write(p);
    const TrajectoryData d = read_netcdf(p, f64_options());
    CHECK(d.variables == std::vector<std::string>{"u10"});
    CHECK(d.units == std::vector<std::string>{"m s-1"});
    CHECK(d.grid == sphere::GridKind::equiangular);
    CHECK(d.nlat == kLat);
    CHECK(d.nlon == kLon);
    CHECK(d.dt_hours == 3.0);
    REQUIRE(d.trajectories.size() == 1);
    check_values(d.trajectories[0], [](int64_t t, int64_t, int64_t i, int64_t j) {
      return surface(-50)({size_t(t), size_t(i), size_t(j)});
    });
  }
}

TEST_CASE("netcdf cf: two latitude candidates the data do not tell apart: an error naming both; lat_name chooses") {
  gs_test::TempDir dir("netcdf-cf");
  NcBuild b;
  b.coord("time", {0, 6}).text("units", "hours since 2000-01-01");
  b.coord("glat", kLats).text("units", "degrees_north");
  const std::vector<double> gauss = latitudes_deg(sphere::GridKind::legendre_gauss, 4);
  b.coord("rlat", gauss).text("units", "degrees_north");
  b.coord("lon", lons_from(0.0)).text("units", "degrees_east");
  b.var("A", {"time", "glat", "lon"}, surface(0));
  b.var("B", {"time", "rlat", "lon"}, surface(1000));
  const fs::path p = dir / "two_lats.nc";
  b.write(p);

  check_error(error_of([&] { open_netcdf({p}, f64_options()); }), p,
              {"has 2 candidate latitude coordinates ('glat' over 'glat', 'rlat' over 'rlat')",
               "name the one to use with data.netcdf.lat_name"});

  NetcdfReadOptions rlat = f64_options();
  rlat.lat_name = "rlat";
  auto source = open_netcdf({p}, rlat);
  CHECK(source->info().variables == std::vector<std::string>{"B"});
  CHECK(source->info().grid == sphere::GridKind::legendre_gauss);
  CHECK(source->info().nlat == 4);
  CHECK(source->info().nlon == kLon);
  CHECK_MESSAGE(any_note(source->info(), {"two_lats.nc", "variable 'A' (time, glat, lon) skipped",
                                          "not a field over (rlat, lon)"}),
                notes_of(source->info()));
  check_values(source->read(0, 0, 2), [](int64_t t, int64_t, int64_t i, int64_t j) {
    return surface(1000)({size_t(t), size_t(i), size_t(j)});
  });

  NetcdfReadOptions glat = f64_options();
  glat.lat_name = "glat";
  const TrajectoryData a = read_netcdf(p, glat);
  CHECK(a.variables == std::vector<std::string>{"A"});
  CHECK(a.grid == sphere::GridKind::equiangular);
  CHECK(a.nlat == kLat);
  check_values(a.trajectories[0],
               [](int64_t t, int64_t, int64_t i, int64_t j) { return surface(0)({size_t(t), size_t(i), size_t(j)}); });

  // The variable asked for breaks the tie.
  const TrajectoryData only_a = read_netcdf(p, f64_options({"A"}));
  CHECK(only_a.nlat == kLat);
  CHECK(only_a.grid == sphere::GridKind::equiangular);
  const TrajectoryData only_b = read_netcdf(p, f64_options({"B"}));
  CHECK(only_b.nlat == 4);
  CHECK(only_b.grid == sphere::GridKind::legendre_gauss);

  // A chosen latitude the variable is not over, and a name the file does not have.
  glat.variables = {"B"};
  check_error(error_of([&] { open_netcdf({p}, glat); }), p,
              {"variable 'B' is not a field over (glat, lon) as its last two dimensions"});
  NetcdfReadOptions missing = f64_options();
  missing.lat_name = "nav_lat";
  check_error(error_of([&] { open_netcdf({p}, missing); }), p,
              {"has no latitude coordinate named 'nav_lat' (data.netcdf.lat_name was given)"});
}

// ---------------------------------------------------------------------------------------------------
// 3. South-to-north latitudes, longitudes from -180

TEST_CASE("netcdf cf: latitudes south to north and longitudes from -180 land in the right rows and columns") {
  gs_test::TempDir dir("netcdf-cf");
  NcBuild b = cf_grid("hours since 2000-01-01", {0, 6, 12}, "standard", {-90, -45, 0, 45, 90}, lons_from(-180.0));
  // file value: 100 t + 10 (file row) + (file column)
  b.var("tas", {"time", "lat", "lon"}, surface(0), NC_FLOAT).text("units", "K");
  const fs::path p = dir / "s2n.nc";
  b.write(p);
  auto source = open_netcdf({p}, f64_options());
  const TrajectoryData d = read_netcdf(p, f64_options());
  REQUIRE(d.trajectories.size() == 1);
  REQUIRE(d.trajectories[0].sizes() == Shape{3, 1, kLat, kLon});
  const std::vector<double> v = d.trajectories[0].to_vector<double>();
  auto at = [&](int64_t t, int64_t i, int64_t j) { return v[static_cast<size_t>((t * kLat + i) * kLon + j)]; };
  CHECK(at(0, 0, 0) == 44);   // 90N, 0E: file row 4 (90N), file column 4 (0E)
  CHECK(at(0, 4, 0) == 4);    // 90S, 0E: file row 0
  CHECK(at(0, 1, 6) == 32);   // 45N, 270E = 90W: file row 3, file column 2 (-90)
  CHECK(at(0, 2, 4) == 20);   // 0N, 180E: file column 0 (-180)
  CHECK(at(2, 3, 7) == 213);  // t 2, 45S, 315E = 45W: file row 1, file column 3 (-45)
  CHECK(at(1, 0, 3) == 147);  // t 1, 90N, 135E: file column 7 (135)
  check_values(d.trajectories[0], [](int64_t t, int64_t, int64_t i, int64_t j) {
    return 100.0 * double(t) + 10.0 * double(kLat - 1 - i) + double((j + 4) % kLon);
  });
  // A tile over 135E..225E (columns 3..5 = file columns 7, 0, 1: it wraps in the file) of the north.
  check_values(source->read(0, 1, 1, {0, 2}, {3, 3}), [](int64_t, int64_t, int64_t i, int64_t j) {
    return 100.0 + 10.0 * double(kLat - 1 - i) + double((3 + j + 4) % kLon);
  });
}

// ---------------------------------------------------------------------------------------------------
// 4. A closed longitude seam

TEST_CASE("netcdf cf: a longitude that repeats its first column at +360 is read without the repeat, with a note") {
  gs_test::TempDir dir("netcdf-cf");
  // 0, 45, ..., 360: 9 columns, the last the first again (values too, as a model writes them).
  std::vector<double> closed = lons_from(0.0);
  closed.push_back(360.0);
  NcBuild b = cf_grid("hours since 2000-01-01", {0, 6}, "standard", kLats, closed);
  b.var("ts", {"time", "lat", "lon"}, [](const Index& x) { return 100.0 * double(x[0]) + 10.0 * double(x[1]) + double(x[2] % kLon); });
  const fs::path p = dir / "seam.nc";
  b.write(p);
  auto source = open_netcdf({p}, f64_options());
  const TrajectoryInfo& info = source->info();
  CHECK(info.nlon == kLon);
  CHECK(info.nlat == kLat);
  CHECK(info.grid == sphere::GridKind::equiangular);
  REQUIRE(info.notes.size() == 1);
  CHECK(contains(info.notes[0], "seam.nc"));
  CHECK(contains(info.notes[0], "longitude 'lon' repeats its first column (0 degrees) at 360 degrees"));
  CHECK(contains(info.notes[0], "8 columns remain"));
  check_values(source->read(0, 0, 2), [](int64_t t, int64_t, int64_t i, int64_t j) {
    return 100.0 * double(t) + 10.0 * double(i) + double(j);
  });

  // -180 .. 180 closed: the repeat goes and the rest is rolled to start at 0E.
  std::vector<double> from_west = lons_from(-180.0);
  from_west.push_back(180.0);
  NcBuild w = cf_grid("hours since 2000-01-01", {0, 6}, "standard", kLats, from_west);
  w.var("ts", {"time", "lat", "lon"}, [](const Index& x) { return 100.0 * double(x[0]) + 10.0 * double(x[1]) + double(x[2] % kLon); });
  const fs::path pw = dir / "seam_west.nc";
  w.write(pw);
  auto west = open_netcdf({pw}, f64_options());
  CHECK(west->info().nlon == kLon);
  CHECK(any_note(west->info(), {"seam_west.nc", "repeats its first column (-180 degrees) at 180 degrees"}));
  check_values(west->read(0, 0, 2), [](int64_t t, int64_t, int64_t i, int64_t j) {
    return 100.0 * double(t) + 10.0 * double(i) + double((j + 4) % kLon);
  });

  // Nine distinct columns (40 degrees apart) are no seam: all of them are read, and nothing is noted.
  NcBuild nine = cf_grid("hours since 2000-01-01", {0, 6}, "standard", kLats, lons_from(0.0, 9));
  nine.var("ts", {"time", "lat", "lon"}, surface(0));
  nine.write(dir / "nine.nc");
  auto n9 = open_netcdf({dir / "nine.nc"}, f64_options());
  CHECK(n9->info().nlon == 9);
  CHECK_MESSAGE(n9->info().notes.empty(), notes_of(n9->info()));
}

// ---------------------------------------------------------------------------------------------------
// 5. Calendars

namespace {

// A file of one (time, lat, lon) variable "ts" at `times` in `units` and `calendar` (none when empty);
// ts = 100 * (offset + t) + 10 i + j.
fs::path write_timed(const fs::path& p, const std::string& units, const std::vector<double>& times,
                     const std::string& calendar = "standard", size_t offset = 0) {
  NcBuild b = cf_grid(units, times, calendar);
  b.var("ts", {"time", "lat", "lon"},
        [offset](const Index& x) { return 100.0 * double(offset + x[0]) + 10.0 * double(x[1]) + double(x[2]); },
        NC_FLOAT)
      .text("units", "K")
      .num("_FillValue", {-9999});
  b.write(p);
  return p;
}

Expect timed(int64_t first) {
  return [first](int64_t t, int64_t, int64_t i, int64_t j) {
    return 100.0 * double(first + t) + 10.0 * double(i) + double(j);
  };
}

}  // namespace

TEST_CASE("netcdf cf: noleap time across Feb 28 reads at 6 h; the calendar and units are kept") {
  gs_test::TempDir dir("netcdf-cf");
  // Days 58.5 .. 59.25 since 2000-01-01: 2000-02-28 12:00 to 2000-03-01 06:00 in noleap (no Feb 29).
  const fs::path p = write_timed(dir / "noleap.nc", "days since 2000-01-01", {58.5, 58.75, 59.0, 59.25}, "noleap");
  auto source = open_netcdf({p}, f64_options());
  const TrajectoryInfo& info = source->info();
  CHECK(info.dt_hours == 6.0);
  CHECK(info.calendar == "noleap");
  CHECK(info.time_units == "days since 2000-01-01");
  CHECK(info.start_times == std::vector<double>{58.5});
  CHECK(info.states == std::vector<int64_t>{4});
  check_values(source->read(0, 0, 4), timed(0));

  // The calendar decides where the next file continues: after 2000-03-01 06:00 noleap comes
  // 2000-03-01 12:00 ...
  const fs::path next = write_timed(dir / "noleap_next.nc", "hours since 2000-03-01 00:00:00", {12, 18}, "noleap", 4);
  auto joined = open_netcdf({p, next}, f64_options());
  CHECK(joined->info().states == std::vector<int64_t>{6});
  CHECK_MESSAGE(any_note(joined->info(), {"2 files joined along time into one trajectory of 6 states",
                                          "2000-02-28 12:00:00 to 2000-03-01 18:00:00 (noleap calendar)"}),
                notes_of(joined->info()));
  check_values(joined->read(0, 0, 6), timed(0));
  // ... while in the standard calendar day 59.25 is 2000-02-29 06:00: the same pair has a gap.
  const fs::path std_first = write_timed(dir / "standard.nc", "days since 2000-01-01", {58.5, 58.75, 59.0, 59.25});
  const fs::path std_next = write_timed(dir / "standard_next.nc", "hours since 2000-03-01 00:00:00", {12, 18}, "standard", 4);
  const std::string err = error_of([&] { open_netcdf({std_first, std_next}, f64_options()); });
  check_error(err, std_first, {"do not continue in time", "the first ends at 2000-02-29 06:00:00",
                               "the second starts at 2000-03-01 12:00:00", "expected 2000-02-29 12:00:00",
                               "standard calendar"});
  CHECK(contains(err, std_next.string()));

  // 365_day is noleap by another name.
  const fs::path alias = write_timed(dir / "365.nc", "days since 2000-01-01", {58.5, 58.75}, "365_day");
  CHECK(open_netcdf({alias}, f64_options())->info().calendar == "noleap");
}

TEST_CASE("netcdf cf: 360_day, proleptic_gregorian and gregorian (= standard) calendars") {
  gs_test::TempDir dir("netcdf-cf");
  // 360_day: days 29.5 .. 30.25 are 2000-01-30 12:00 to 2000-02-01 06:00 (30-day months).
  const fs::path d360 = write_timed(dir / "d360.nc", "days since 2000-01-01", {29.5, 29.75, 30.0, 30.25}, "360_day");
  const fs::path d360_next = write_timed(dir / "d360_next.nc", "days since 2000-02-01", {0.5, 0.75}, "360_day", 4);
  auto s360 = open_netcdf({d360}, f64_options());
  CHECK(s360->info().calendar == "360_day");
  CHECK(s360->info().dt_hours == 6.0);
  CHECK(s360->info().time_units == "days since 2000-01-01");
  check_values(s360->read(0, 0, 4), timed(0));
  auto joined = open_netcdf({d360, d360_next}, f64_options());
  CHECK(joined->info().states == std::vector<int64_t>{6});
  CHECK_MESSAGE(any_note(joined->info(), {"2000-01-30 12:00:00 to 2000-02-01 18:00:00 (360_day calendar)"}),
                notes_of(joined->info()));
  check_values(joined->read(0, 2, 4), timed(2));

  const fs::path pg = write_timed(dir / "pg.nc", "hours since 1500-02-28 00:00:00", {0, 12, 24, 36}, "proleptic_gregorian");
  auto spg = open_netcdf({pg}, f64_options());
  CHECK(spg->info().calendar == "proleptic_gregorian");
  CHECK(spg->info().dt_hours == 12.0);
  check_values(spg->read(0, 0, 4), timed(0));

  const fs::path greg = write_timed(dir / "greg.nc", "hours since 1990-01-01", {0, 1, 2}, "Gregorian");
  CHECK(open_netcdf({greg}, f64_options())->info().calendar == "standard");
  CHECK(open_netcdf({greg}, f64_options())->info().dt_hours == 1.0);
  const fs::path none = write_timed(dir / "none.nc", "hours since 1990-01-01", {0, 1, 2}, "");
  CHECK(open_netcdf({none}, f64_options())->info().calendar == "standard");
}

TEST_CASE("netcdf cf: an unknown calendar, months since, and irregular steps are errors that say why") {
  gs_test::TempDir dir("netcdf-cf");
  const fs::path lunar = write_timed(dir / "lunar.nc", "days since 2000-01-01", {0, 1}, "lunar");
  check_error(error_of([&] { open_netcdf({lunar}, f64_options()); }), lunar,
              {"time coordinate 'time'", "unknown calendar 'lunar'",
               "standard (or gregorian), proleptic_gregorian, noleap (or 365_day), all_leap (or 366_day), 360_day, julian"});

  const fs::path months = write_timed(dir / "monthly.nc", "months since 2000-01-01", {0, 1, 2}, "standard");
  check_error(error_of([&] { read_netcdf(months, f64_options()); }), months,
              {"time coordinate 'time'", "time units 'months since 2000-01-01' count in months",
               "not the months or years of the standard calendar", "udunits", "a month as a year/12",
               "re-encode the time coordinate in days or hours"});

  const fs::path uneven = write_timed(dir / "uneven.nc", "hours since 1990-01-01", {0, 6, 12, 24, 30});
  check_error(error_of([&] { read_netcdf(uneven, f64_options()); }), uneven,
              {"time coordinate 'time' has irregular steps",
               "the first gap is between 1990-01-01 12:00:00 and 1990-01-02 00:00:00 (12 hours; the first step is 6 "
               "hours)",
               "expected equal steps (standard calendar)"});

  // A time step given in the options must agree with the file's.
  const fs::path six = write_timed(dir / "six.nc", "hours since 1990-01-01", {0, 6});
  NetcdfReadOptions three = f64_options();
  three.dt_hours = 3.0;
  check_error(error_of([&] { open_netcdf({six}, three); }), six,
              {"its time step is 6 hours but dt_hours = 3 was expected"});
}

// ---------------------------------------------------------------------------------------------------
// 6. Files joined along time

TEST_CASE("netcdf cf: yearly files that continue each other join into one trajectory") {
  gs_test::TempDir dir("netcdf-cf");
  const fs::path a = write_timed(dir / "1990.nc", "hours since 1990-01-01", {0, 6, 12, 18});
  // Continues exactly, with its own reference date.
  const fs::path b = write_timed(dir / "1991.nc", "hours since 1990-01-02", {0, 6, 12, 18}, "standard", 4);
  for (NetcdfJoin join : {NetcdfJoin::automatic, NetcdfJoin::time}) {
    CAPTURE(join_name(join));
    NetcdfReadOptions opt = f64_options();
    opt.join = join;
    auto source = open_netcdf({a, b}, opt);
    const TrajectoryInfo& info = source->info();
    CHECK(info.trajectories() == 1);
    CHECK(info.states == std::vector<int64_t>{8});
    CHECK(info.dt_hours == 6.0);
    CHECK(info.time_units == "hours since 1990-01-01");
    CHECK(info.start_times == std::vector<double>{0.0});
    CHECK_MESSAGE(any_note(info, {"2 files joined along time into one trajectory of 8 states, 1990-01-01 00:00:00 to "
                                  "1990-01-02 18:00:00 (standard calendar)"}),
                  notes_of(info));
    // A window across the boundary: states 2, 3 of 1990.nc then 0, 1 of 1991.nc.
    check_values(source->read(0, 2, 4), timed(2));
    check_values(source->read(0, 3, 2, {1, 2}, {6, 2}), [](int64_t t, int64_t, int64_t i, int64_t j) {
      return timed(3)(t, 0, i + 1, j + 6);
    });
    check_values(source->read(0, 5, 3), timed(5));  // inside the second file only
  }
  const TrajectoryData d = read_netcdf(std::vector<fs::path>{a, b}, f64_options());
  REQUIRE(d.trajectories.size() == 1);
  REQUIRE(d.trajectories[0].sizes() == Shape{8, 1, kLat, kLon});
  check_values(d.trajectories[0], timed(0));

  // Three files, the third in days: a window spans all three.
  const fs::path c = write_timed(dir / "1992.nc", "days since 1990-01-03", {0, 0.25, 0.5, 0.75}, "standard", 8);
  auto three = open_netcdf({a, b, c}, f64_options());
  CHECK(three->info().states == std::vector<int64_t>{12});
  CHECK(any_note(three->info(), {"3 files joined along time into one trajectory of 12 states, 1990-01-01 00:00:00 to "
                                 "1990-01-03 18:00:00"}));
  check_values(three->read(0, 3, 6), timed(3));

  // join: trajectories reads each file as its own trajectory.
  NetcdfReadOptions separate = f64_options();
  separate.join = NetcdfJoin::trajectories;
  auto two = open_netcdf({a, b}, separate);
  CHECK(two->info().states == std::vector<int64_t>{4, 4});
  CHECK(two->info().start_times == std::vector<double>{0.0, 24.0});  // in the first file's units
  CHECK(any_note(two->info(), {"2 files read as 2 separate trajectories"}));
  check_values(two->read(0, 0, 4), timed(0));
  check_values(two->read(1, 0, 4), timed(4));
  CHECK(contains(error_of([&] { two->read(0, 2, 4); }), "states 2..5 of trajectory 0: out of range (it has 4 states)"));
}

TEST_CASE("netcdf cf: a gap, an overlap or two calendars between joined files are errors naming both files") {
  gs_test::TempDir dir("netcdf-cf");
  const fs::path a = write_timed(dir / "1990.nc", "hours since 1990-01-01", {0, 6, 12, 18});
  // One step late.
  const fs::path late = write_timed(dir / "late.nc", "hours since 1990-01-02", {6, 12, 18, 24}, "standard", 4);
  for (NetcdfJoin join : {NetcdfJoin::automatic, NetcdfJoin::time}) {
    CAPTURE(join_name(join));
    NetcdfReadOptions opt = f64_options();
    opt.join = join;
    const std::string err = error_of([&] { open_netcdf({a, late}, opt); });
    check_error(err, a, {"do not continue in time", "the first ends at 1990-01-01 18:00:00",
                         "the second starts at 1990-01-02 06:00:00", "expected 1990-01-02 00:00:00",
                         "one step of 6 h later; standard calendar", "data.netcdf.join: trajectories"});
    CHECK_MESSAGE(contains(err, late.string()), err);
  }
  // An overlap (starts at 1990-01-01 12:00) joined along time.
  const fs::path overlap = write_timed(dir / "overlap.nc", "hours since 1990-01-01", {12, 18, 24, 30});
  NetcdfReadOptions time = f64_options();
  time.join = NetcdfJoin::time;
  const std::string err = error_of([&] { open_netcdf({a, overlap}, time); });
  check_error(err, a, {"do not continue in time", "the second starts at 1990-01-01 12:00:00",
                       "expected 1990-01-02 00:00:00"});
  CHECK(contains(err, overlap.string()));
  // Files in the wrong order joined along time.
  const fs::path b = write_timed(dir / "1991.nc", "hours since 1990-01-02", {0, 6, 12, 18}, "standard", 4);
  check_error(error_of([&] { open_netcdf({b, a}, time); }), b,
              {"the first ends at 1990-01-02 18:00:00 and the second starts at 1990-01-01 00:00:00"});

  // Two calendars, whatever the join: times of two calendars are not compared, and one data set
  // carries one calendar (its start times, its written forecasts).
  const fs::path noleap = write_timed(dir / "noleap.nc", "hours since 1990-01-02", {0, 6, 12, 18}, "noleap", 4);
  for (NetcdfJoin join : {NetcdfJoin::automatic, NetcdfJoin::time, NetcdfJoin::trajectories}) {
    CAPTURE(join_name(join));
    NetcdfReadOptions opt = f64_options();
    opt.join = join;
    const std::string cal = error_of([&] { open_netcdf({a, noleap}, opt); });
    check_error(cal, a, {"use the calendars standard and noleap; the files of one data set need one calendar"});
    CHECK(contains(cal, noleap.string()));
  }
}

TEST_CASE("netcdf cf: automatic join keeps files that start together (or overlap) as separate trajectories, and says so") {
  gs_test::TempDir dir("netcdf-cf");
  const fs::path a = write_timed(dir / "member1.nc", "hours since 1990-01-01", {0, 6, 12, 18});
  const fs::path b = write_timed(dir / "member2.nc", "hours since 1990-01-01", {0, 6, 12, 18}, "standard", 10);
  auto source = open_netcdf({a, b}, f64_options());
  CHECK(source->info().states == std::vector<int64_t>{4, 4});
  CHECK(source->info().start_times == std::vector<double>{0.0, 0.0});
  CHECK_MESSAGE(any_note(source->info(), {"2 files read as 2 separate trajectories",
                                          "they do not follow each other in time"}),
                notes_of(source->info()));
  check_values(source->read(0, 0, 4), timed(0));
  check_values(source->read(1, 0, 4), timed(10));
  // An overlap under automatic is no join either.
  const fs::path overlap = write_timed(dir / "overlap.nc", "hours since 1990-01-01", {12, 18, 24, 30});
  auto o = open_netcdf({a, overlap}, f64_options());
  CHECK(o->info().states == std::vector<int64_t>{4, 4});
  CHECK(o->info().start_times == std::vector<double>{0.0, 12.0});
}

TEST_CASE("netcdf cf: join = time with a file that has a sample dimension is an error") {
  gs_test::TempDir dir("netcdf-cf");
  const fs::path a = write_timed(dir / "1990.nc", "hours since 1990-01-01", {0, 6, 12, 18});
  // Two ensemble members over (sample, time, lat, lon), continuing a in time.
  NcBuild s = cf_grid("hours since 1990-01-02", {0, 6, 12, 18});
  s.coord("sample", {0, 1});
  s.var("ts", {"sample", "time", "lat", "lon"},
        [](const Index& x) { return 1000.0 * double(x[0]) + 100.0 * double(4 + x[1]) + 10.0 * double(x[2]) + double(x[3]); },
        NC_FLOAT)
      .text("units", "K");
  const fs::path ens = dir / "ensemble.nc";
  s.write(ens);
  NetcdfReadOptions time = f64_options();
  time.join = NetcdfJoin::time;
  check_error(error_of([&] { open_netcdf({a, ens}, time); }), ens,
              {"data.netcdf.join is 'time', which needs files of one trajectory each (no sample dimension) with a "
               "time coordinate"});
  // Automatic: one trajectory from the first file and one per sample of the second.
  auto source = open_netcdf({a, ens}, f64_options());
  CHECK(source->info().states == std::vector<int64_t>{4, 4, 4});
  CHECK(source->info().start_times == std::vector<double>{0.0, 24.0, 24.0});
  CHECK(any_note(source->info(), {"2 files read as 3 separate trajectories",
                                  "files with a sample dimension hold several trajectories each"}));
  check_values(source->read(0, 0, 4), timed(0));
  check_values(source->read(2, 1, 2), [](int64_t t, int64_t, int64_t i, int64_t j) {
    return 1000.0 + 100.0 * double(4 + 1 + t) + 10.0 * double(i) + double(j);
  });
}

// ---------------------------------------------------------------------------------------------------
// 7. Fill values and masks

namespace {

const std::set<std::pair<size_t, size_t>> kLand = {{0, 0}, {0, 1}, {1, 2}, {1, 3}, {2, 3}, {3, 6}, {4, 7}};
bool is_land(size_t i, size_t j) { return kLand.count({i, j}) > 0; }
double ocean(size_t t, size_t i, size_t j) { return 271.5 + double(t) + 0.5 * double(i) + 0.25 * double(j); }

}  // namespace

TEST_CASE("netcdf cf: _FillValue over land, missing_value, valid_range and NaN read as NaN; the rest exactly") {
  gs_test::TempDir dir("netcdf-cf");
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  NcBuild b = cf_grid("days since 1990-01-01", {0, 1, 2});
  b.var("SST", {"time", "lat", "lon"},
        [](const Index& x) { return is_land(x[1], x[2]) ? -9999.0 : ocean(x[0], x[1], x[2]); }, NC_FLOAT)
      .text("units", "K")
      .num("_FillValue", {-9999});
  b.var("SIC", {"time", "lat", "lon"}, [](const Index& x) { return is_land(x[1], x[2]) ? 1e20 : 0.125 * double(x[2]); },
        NC_FLOAT)
      .num("missing_value", {1e20});
  // valid_range [-2, 40] in degrees C: 45 is out (NaN); the bounds themselves are in.
  b.var("SSTC", {"time", "lat", "lon"},
        [](const Index& x) {
          if (x[1] == 2 && x[2] == 2) return 45.0;
          if (x[1] == 2 && x[2] == 4) return -2.0;
          if (x[1] == 2 && x[2] == 5) return 40.0;
          if (x[1] == 3 && x[2] == 1) return -3.0;
          return double(x[2]);
        },
        NC_DOUBLE)
      .num("valid_range", {-2, 40});
  // NaN stored as such (as xarray writes missing values without a fill value).
  b.var("ICE", {"time", "lat", "lon"}, [nan](const Index& x) { return x[0] == 1 && x[1] == 4 ? nan : 0.5 * double(x[2]); },
        NC_DOUBLE);
  const fs::path p = dir / "sst.nc";
  b.write(p);

  auto source = open_netcdf({p}, f64_options());
  CHECK(source->info().variables == std::vector<std::string>{"SST", "SIC", "SSTC", "ICE"});
  CHECK_MESSAGE(source->info().notes.empty(), notes_of(source->info()));
  check_values(source->read(0, 0, 3), [nan](int64_t t, int64_t c, int64_t i, int64_t j) {
    const size_t ti = size_t(t), ii = size_t(i), jj = size_t(j);
    switch (c) {
      case 0: return is_land(ii, jj) ? nan : ocean(ti, ii, jj);
      case 1: return is_land(ii, jj) ? nan : 0.125 * double(j);
      case 2:
        if (i == 2 && j == 2) return nan;
        if (i == 2 && j == 4) return -2.0;
        if (i == 2 && j == 5) return 40.0;
        if (i == 3 && j == 1) return nan;
        return double(j);
      default: return t == 1 && i == 4 ? nan : 0.5 * double(j);
    }
  });
  // The count of missing values in SST: 7 land points at each of 3 times.
  const TrajectoryData d = read_netcdf(p, f64_options({"SST"}));
  int64_t missing = 0;
  for (double x : d.trajectories[0].to_vector<double>()) missing += std::isnan(x);
  CHECK(missing == 3 * static_cast<int64_t>(kLand.size()));
  // f32 reads give the same values (and NaNs).
  NetcdfReadOptions f32 = f64_options({"SST"});
  f32.dtype = DType::f32;
  const std::vector<float> v32 = read_netcdf(p, f32).trajectories[0].to_vector<float>();
  CHECK(std::isnan(v32[0]));
  CHECK(v32[static_cast<size_t>(2 * kLat * kLon + 4 * kLon + 6)] == static_cast<float>(ocean(2, 4, 6)));
}

TEST_CASE("netcdf cf: an infinity stored is an error naming the file, the variable and where") {
  gs_test::TempDir dir("netcdf-cf");
  constexpr double inf = std::numeric_limits<double>::infinity();
  NcBuild b = cf_grid("hours since 1990-01-01", {0, 6, 12});
  b.var("SST", {"time", "lat", "lon"}, [inf](const Index& x) { return x[0] == 1 && x[1] == 2 && x[2] == 3 ? inf : 280.0; },
        NC_FLOAT)
      .num("_FillValue", {-9999});
  b.var("SLP", {"time", "lat", "lon"}, [inf](const Index& x) { return x[0] == 2 && x[1] == 0 && x[2] == 7 ? -inf : 1e5; },
        NC_DOUBLE);
  const fs::path p = dir / "inf.nc";
  b.write(p);
  // Opening checks the layout; the values are checked as they are read.
  auto source = open_netcdf({p}, f64_options());
  check_values(source->read(0, 0, 1), [](int64_t, int64_t c, int64_t, int64_t) { return c == 0 ? 280.0 : 1e5; });
  check_error(error_of([&] { source->read(0, 1, 1); }), p,
              {"variable 'SST' has an infinite value (inf) at sample 0, time 1, lat row 2, lon column 3",
               "expected finite values (missing ones as a fill value or NaN)"});
  check_error(error_of([&] { read_netcdf(p, f64_options({"SLP"})); }), p,
              {"variable 'SLP' has an infinite value (-inf) at sample 0, time 2, lat row 0, lon column 7"});
  // A tile that leaves the infinity out reads.
  check_values(source->read(0, 1, 1, {0, 2}, {0, 8}), [](int64_t, int64_t c, int64_t, int64_t) { return c == 0 ? 280.0 : 1e5; });
}

// ---------------------------------------------------------------------------------------------------
// 8. Nothing silent

namespace {

// A CAM-like history file: time bounds, a time-invariant land fraction, a 1-D series, Gaussian
// weights, then a surface field and a field over levels.
fs::path write_cam(const gs_test::TempDir& dir) {
  NcBuild b = cf_grid("days since 1990-01-01 00:00:00", {0, 0.25, 0.5}, "noleap");
  b.vars.front().text("bounds", "time_bnds");
  b.coord("lev", {850, 500}).text("units", "hPa").text("positive", "down");
  b.dim("nbnd", 2);
  b.var("time_bnds", {"time", "nbnd"}, [](const Index& x) { return 0.25 * double(x[0]) + 0.25 * double(x[1]); });
  b.var("land_fraction", {"lat", "lon"}, [](const Index& x) { return 0.125 * double(x[1]) + 0.0625 * double(x[0]); },
        NC_FLOAT);
  b.var("co2vmr", {"time"}, [](const Index&) { return 3.5e-4; });
  b.var("gw", {"lat"}, [](const Index& x) { return 0.1 * double(x[0]); });
  b.var("TS", {"time", "lat", "lon"}, surface(250), NC_FLOAT).text("units", "K");
  b.var("U", {"time", "lev", "lat", "lon"}, layered(-20), NC_FLOAT).text("units", "m/s");
  const fs::path p = dir / "cam.h0.nc";
  b.write(p);
  return p;
}
double land_fraction(int64_t i, int64_t j) { return 0.125 * double(j) + 0.0625 * double(i); }

}  // namespace

TEST_CASE("netcdf cf: with no variables asked, the fields are read and every other variable is named in the notes") {
  gs_test::TempDir dir("netcdf-cf");
  const fs::path p = write_cam(dir);
  auto source = open_netcdf({p}, f64_options());
  const TrajectoryInfo& info = source->info();
  CHECK(info.variables == std::vector<std::string>{"TS", "U_0", "U_1"});
  CHECK(info.calendar == "noleap");
  CHECK(info.dt_hours == 6.0);
  INFO(notes_of(info));
  CHECK(info.notes.size() == 4);
  CHECK(any_note(info, {"'cam.h0.nc': variable 'time_bnds' (time, nbnd) skipped",
                        "is not a field over (lat, lon) as its last two dimensions"}));
  CHECK(any_note(info, {"'cam.h0.nc': variable 'land_fraction' (lat, lon) skipped", "is time-invariant",
                        "list it in data.variables (e.g. as a forcing)"}));
  CHECK(any_note(info, {"'cam.h0.nc': variable 'co2vmr' (time) skipped", "is not a field over (lat, lon)"}));
  CHECK(any_note(info, {"'cam.h0.nc': variable 'gw' (lat) skipped", "is not a field over (lat, lon)"}));
  for (const char* quiet : {"'time'", "'lat'", "'lon'", "'lev'", "'TS'", "'U'"})
    CHECK_MESSAGE(!any_note(info, {quiet}), quiet);
  check_values(source->read(0, 0, 3), [](int64_t t, int64_t c, int64_t i, int64_t j) {
    return c == 0 ? surface(250)({size_t(t), size_t(i), size_t(j)})
                  : layered(-20)({size_t(t), size_t(c - 1), size_t(i), size_t(j)});
  });
}

TEST_CASE("netcdf cf: asking for a variable the reader cannot use is an error saying why; a time-invariant one is read") {
  gs_test::TempDir dir("netcdf-cf");
  const fs::path p = write_cam(dir);
  check_error(error_of([&] { open_netcdf({p}, f64_options({"TS", "time_bnds"})); }), p,
              {"variable 'time_bnds' is not a field over (lat, lon) as its last two dimensions"});
  check_error(error_of([&] { read_netcdf(p, f64_options({"co2vmr"})); }), p,
              {"variable 'co2vmr' is not a field over (lat, lon) as its last two dimensions"});
  // A time-invariant field alone gives no states.
  check_error(error_of([&] { open_netcdf({p}, f64_options({VariableRequest("land_fraction", VariableRole::forcing)})); }),
              p, {"has no time dimension for its variables (land_fraction)"});

  // As a forcing beside a prognostic field (asked in either order): the same field at every state.
  for (bool forcing_first : {false, true}) {
    CAPTURE(forcing_first);
    std::vector<VariableRequest> req = {VariableRequest("TS"), VariableRequest("land_fraction", VariableRole::forcing)};
    if (forcing_first) std::swap(req[0], req[1]);
    auto source = open_netcdf({p}, f64_options(req));
    const TrajectoryInfo& info = source->info();
    CHECK(info.variables == std::vector<std::string>{"TS", "land_fraction"});
    CHECK(info.roles == std::vector<VariableRole>{VariableRole::prognostic, VariableRole::forcing});
    CHECK(info.units == std::vector<std::string>{"K", ""});
    CHECK(info.states == std::vector<int64_t>{3});
    CHECK_MESSAGE(info.notes.empty(), notes_of(info));
    const Expect expect = [](int64_t t, int64_t c, int64_t i, int64_t j) {
      return c == 0 ? surface(250)({size_t(t), size_t(i), size_t(j)}) : land_fraction(i, j);
    };
    check_values(source->read(0, 0, 3), expect);
    check_values(source->read(0, 1, 2, {2, 3}, {5, 3}),
                 [&](int64_t t, int64_t c, int64_t i, int64_t j) { return expect(t + 1, c, i + 2, 5 + j); });
    const TrajectoryData d = read_netcdf(p, f64_options(req));
    check_values(d.trajectories[0], expect);
  }
}

// ---------------------------------------------------------------------------------------------------
// 9. Every error names the file

TEST_CASE("netcdf cf: errors about the grid and the files name the file") {
  gs_test::TempDir dir("netcdf-cf");
  // No latitude at all.
  NcBuild nolat;
  nolat.coord("time", {0, 6}).text("units", "hours since 2000-01-01");
  nolat.coord("row", kLats);
  nolat.coord("lon", lons_from(0.0)).text("units", "degrees_east");
  nolat.var("ts", {"time", "row", "lon"}, surface(0));
  const fs::path p1 = dir / "nolat.nc";
  nolat.write(p1);
  check_error(error_of([&] { open_netcdf({p1}, f64_options()); }), p1,
              {"has no latitude coordinate", "degrees_north", "its variables: time, row, lon, ts"});
  // Latitude in radians.
  NcBuild radians = cf_grid("hours since 2000-01-01", {0, 6});
  radians.vars[1].texts = {{"units", "radians"}, {"standard_name", "latitude"}};
  radians.var("ts", {"time", "lat", "lon"}, surface(0));
  const fs::path p2 = dir / "radians.nc";
  radians.write(p2);
  check_error(error_of([&] { open_netcdf({p2}, f64_options()); }), p2,
              {"coordinate 'lat' has units 'radians'; expected degrees"});
  // Files that do not match: the second file and the first are named.
  const fs::path a = write_timed(dir / "a.nc", "hours since 1990-01-01", {0, 6});
  NcBuild other = cf_grid("hours since 1990-01-01 12:00", {0, 6});
  other.var("tas", {"time", "lat", "lon"}, surface(0));
  const fs::path b = dir / "b.nc";
  other.write(b);
  const std::string err = error_of([&] { open_netcdf({a, b}, f64_options()); });
  check_error(err, b, {"does not match", "variables"});
  CHECK(contains(err, a.string()));
  // A time coordinate name the file does not have.
  NetcdfReadOptions when = f64_options();
  when.time_name = "when";
  check_error(error_of([&] { open_netcdf({a}, when); }), a,
              {"has no time coordinate named 'when' (data.netcdf.time_name was given)", "its variables: time, lat, lon, ts"});
  // Only forcings asked for: nothing to predict. (The message does not name the file: see the report.)
  CHECK(contains(error_of([&] { open_netcdf({a}, f64_options({VariableRequest("ts", VariableRole::forcing)})); }),
                 "expected at least one prognostic or diagnostic channel"));
  // A file that is not there.
  check_error(error_of([&] { open_netcdf({a, dir / "missing.nc"}, f64_options()); }), dir / "missing.nc",
              {"does not exist"});
}
