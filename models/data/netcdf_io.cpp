// NetCDF reading and writing of TrajectoryData (layout and conventions in netcdf_io.h).
#include "models/data/netcdf_io.h"

#include <netcdf.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "models/atomic_file.h"

namespace gs::models {

namespace fs = std::filesystem;

namespace {

// "12.3 MB free on its file system" for the directory of `path`, or why that is unknown.
std::string space_left(const fs::path& path) {
  struct statvfs st {};
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (::statvfs(dir.c_str(), &st) != 0) return fmt::format("its directory: {}", errno_text(errno));
  const double free_bytes = static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize);
  return fmt::format("{:.3g} MB free on its file system{}", free_bytes / 1e6,
                     ::access(dir.c_str(), W_OK) != 0 ? fmt::format("; its directory is not writable: {}", errno_text(errno)) : "");
}

// An open NetCDF dataset; every library call goes through check() so a failure names the file.
class NcFile {
 public:
  static NcFile open(const fs::path& path) {
    std::error_code ec;
    GS_CHECK(fs::is_regular_file(path, ec), "NetCDF file '{}': expected a regular file, {}", path.string(),
             fs::exists(path, ec) ? "found something else" : "but it does not exist");
    NcFile f(path);
    f.check(nc_open(path.c_str(), NC_NOWRITE, &f.id_), "cannot open it");
    f.open_ = true;
    return f;
  }
  // `label` is the path errors name (the target, not the temporary file).
  static NcFile create(const fs::path& path, const fs::path& label) {
    NcFile f(label);
    f.writing_ = true;
    f.check(nc_create(path.c_str(), NC_CLOBBER | NC_NETCDF4, &f.id_), "cannot create it");
    f.open_ = true;
    return f;
  }
  NcFile(NcFile&& o) noexcept : path_(std::move(o.path_)), id_(o.id_), open_(o.open_), writing_(o.writing_) {
    o.open_ = false;
  }
  NcFile(const NcFile&) = delete;
  ~NcFile() {
    if (open_) nc_close(id_);
  }
  void close() {
    open_ = false;
    check(nc_close(id_), "closing it failed");
  }

  int id() const { return id_; }
  const fs::path& path() const { return path_; }

  template <typename... Args>
  [[noreturn]] void bad(fmt::format_string<Args...> f, Args&&... args) const {
    fail("NetCDF file '{}': {}", path_.string(), fmt::format(f, std::forward<Args>(args)...));
  }
  void check(int status, const std::string& what) const {
    if (status == NC_NOERR) return;
    // HDF5 reports a full disk or a lost permission as "HDF error": say what the file system has left.
    if (writing_) bad("{}: {} ({})", what, nc_strerror(status), space_left(path_));
    bad("{}: {}", what, nc_strerror(status));
  }

  std::optional<int> find_dim(const std::string& name) const {
    int d;
    return nc_inq_dimid(id_, name.c_str(), &d) == NC_NOERR ? std::optional<int>(d) : std::nullopt;
  }
  std::optional<int> find_var(const std::string& name) const {
    int v;
    return nc_inq_varid(id_, name.c_str(), &v) == NC_NOERR ? std::optional<int>(v) : std::nullopt;
  }
  std::string dim_name(int dim) const {
    char buf[NC_MAX_NAME + 1] = {};
    check(nc_inq_dimname(id_, dim, buf), "reading a dimension name");
    return buf;
  }
  size_t dim_len(int dim) const {
    size_t n = 0;
    check(nc_inq_dimlen(id_, dim, &n), "reading the length of dimension '" + dim_name(dim) + "'");
    return n;
  }
  std::string var_name(int var) const {
    char buf[NC_MAX_NAME + 1] = {};
    check(nc_inq_varname(id_, var, buf), "reading a variable name");
    return buf;
  }
  std::vector<int> var_dims(int var) const {
    int nd = 0;
    check(nc_inq_varndims(id_, var, &nd), "reading the dimensions of '" + var_name(var) + "'");
    std::vector<int> dims(static_cast<size_t>(nd));
    check(nc_inq_vardimid(id_, var, dims.data()), "reading the dimensions of '" + var_name(var) + "'");
    return dims;
  }
  std::string dims_str(const std::vector<int>& dims) const {
    std::vector<std::string> names;
    for (int d : dims) names.push_back(dim_name(d));
    return fmt::format("({})", fmt::join(names, ", "));
  }
  std::vector<std::string> all_var_names() const {
    int n = 0;
    check(nc_inq_nvars(id_, &n), "listing variables");
    std::vector<std::string> names;
    for (int v = 0; v < n; ++v) names.push_back(var_name(v));
    return names;
  }

  // A text attribute (NC_CHAR or NC_STRING) of a variable (NC_GLOBAL for the file), if present.
  std::optional<std::string> text_attr(int var, const char* name) const {
    nc_type type;
    size_t len;
    if (nc_inq_att(id_, var, name, &type, &len) != NC_NOERR) return std::nullopt;
    if (type == NC_CHAR) {
      std::string s(len, '\0');
      check(nc_get_att_text(id_, var, name, s.data()), fmt::format("reading attribute '{}'", name));
      while (!s.empty() && s.back() == '\0') s.pop_back();
      return s;
    }
    if (type == NC_STRING && len >= 1) {
      std::vector<char*> strs(len, nullptr);
      check(nc_get_att_string(id_, var, name, strs.data()), fmt::format("reading attribute '{}'", name));
      std::string s = strs[0] ? strs[0] : "";
      nc_free_string(len, strs.data());
      return s;
    }
    return std::nullopt;
  }
  // The first value of a numeric attribute, if present.
  std::optional<double> number_attr(int var, const char* name) const {
    const std::vector<double> v = number_attrs(var, name);
    return v.empty() ? std::nullopt : std::optional<double>(v[0]);
  }
  // Every value of a numeric attribute (empty when absent).
  std::vector<double> number_attrs(int var, const char* name) const {
    nc_type type;
    size_t len;
    if (nc_inq_att(id_, var, name, &type, &len) != NC_NOERR || type == NC_CHAR || type == NC_STRING || len < 1)
      return {};
    std::vector<double> v(len);
    check(nc_get_att_double(id_, var, name, v.data()), fmt::format("reading attribute '{}'", name));
    return v;
  }
  // A whole 1-D coordinate variable as doubles.
  std::vector<double> read_1d(int var, size_t n) const {
    std::vector<double> v(n);
    if (n) check(nc_get_var_double(id_, var, v.data()), "reading variable '" + var_name(var) + "'");
    return v;
  }

 private:
  explicit NcFile(fs::path path) : path_(std::move(path)) {}
  fs::path path_;
  int id_ = -1;
  bool open_ = false;
  bool writing_ = false;
};

// ---- reading

std::string find_dim_name(const NcFile& f, const std::string& given, std::initializer_list<const char*> defaults,
                          const char* role) {
  if (!given.empty()) {
    if (!f.find_dim(given)) f.bad("expected a {} dimension named '{}', found none", role, given);
    return given;
  }
  for (const char* name : defaults)
    if (f.find_dim(name)) return name;
  f.bad("expected a {} dimension named {}, found none", role, fmt::join(defaults, " or "));
}

// Hours per unit of a CF time units string "<unit> since <reference>".
double hours_per_unit(const NcFile& f, const std::string& var, const std::string& units) {
  auto pos = units.find(" since ");
  std::string unit = units.substr(0, pos);
  std::transform(unit.begin(), unit.end(), unit.begin(), [](unsigned char c) { return std::tolower(c); });
  if (pos != std::string::npos) {
    if (unit == "days" || unit == "day" || unit == "d") return 24.0;
    if (unit == "hours" || unit == "hour" || unit == "hr" || unit == "h") return 1.0;
    if (unit == "minutes" || unit == "minute" || unit == "min") return 1.0 / 60.0;
    if (unit == "seconds" || unit == "second" || unit == "sec" || unit == "s") return 1.0 / 3600.0;
  }
  f.bad("time coordinate '{}' has units '{}'; expected CF units '<days|hours|minutes|seconds> since <date>'", var,
        units);
}

// Which grid rule the (north-first) latitudes follow, and a check that they do.
template <typename Round>
sphere::GridKind match_grid(const NcFile& f, const std::vector<double>& lat, const NetcdfReadOptions& opt,
                            Round stored) {
  const int64_t nlat = static_cast<int64_t>(lat.size());
  auto deviation = [&](sphere::GridKind g) {
    try {
      std::vector<double> ref = latitudes_deg(g, nlat);
      double dev = 0;
      for (size_t i = 0; i < lat.size(); ++i) dev = std::max(dev, std::abs(lat[i] - stored(ref[i])));
      return dev;
    } catch (const Error&) {
      return std::numeric_limits<double>::infinity();  // the rule has no grid of this size (e.g. one latitude with both
                                                       // poles)
    }
  };
  if (opt.grid) {
    double dev = deviation(*opt.grid);
    if (!(dev <= opt.lat_tolerance_deg))
      f.bad("its {} latitudes are not the {} grid: they differ from it by up to {:.3g} degrees (tolerance {:.3g})",
            nlat, sphere::grid_name(*opt.grid), dev, opt.lat_tolerance_deg);
    return *opt.grid;
  }
  std::vector<sphere::GridKind> order = {sphere::GridKind::equiangular, sphere::GridKind::legendre_gauss,
                                         sphere::GridKind::lobatto};
  if (auto hint = f.text_attr(NC_GLOBAL, "gradsphere_grid")) {
    try {
      sphere::GridKind g = sphere::parse_grid_kind(*hint);
      order.insert(order.begin(), g);
    } catch (const Error&) {
    }  // a foreign or stale attribute: the latitudes decide
  }
  std::vector<std::string> tried;
  for (sphere::GridKind g : order) {
    double dev = deviation(g);
    if (dev <= opt.lat_tolerance_deg) return g;
    tried.push_back(fmt::format("{} by {:.3g}", sphere::grid_name(g), dev));
  }
  f.bad("its {} latitudes match no supported grid within {:.3g} degrees (they differ from {})", nlat,
        opt.lat_tolerance_deg, fmt::join(tried, ", "));
}

// Where each file column goes: longitudes must be 360/nlon apart, increasing, one of them at 0 (mod 360).
// `stored` rounds a reference value as the file stores it (f32 coordinates are common).
template <typename Round>
std::vector<int64_t> longitude_columns(const NcFile& f, const std::string& name, const std::vector<double>& lon,
                                       double tol, Round stored) {
  const int64_t nlon = static_cast<int64_t>(lon.size());
  const double spacing = 360.0 / static_cast<double>(nlon);
  for (int64_t j = 1; j < nlon; ++j) {
    double expect = stored(lon[0] + static_cast<double>(j) * spacing);
    if (!(std::abs(lon[j] - expect) <= tol))
      f.bad("longitude '{}' should increase in equal steps of 360/{} = {} degrees; value {} is {} (expected {})", name,
            nlon, spacing, j, lon[j], expect);
  }
  const double k = std::round(lon[0] / spacing);
  if (!(std::abs(lon[0] - stored(k * spacing)) <= tol))
    f.bad("longitude '{}' starts at {} degrees; expected a grid with a column at 0 degrees east (a multiple of {})",
          name, lon[0], spacing);
  const int64_t shift = ((static_cast<int64_t>(k) % nlon) + nlon) % nlon;
  const std::vector<double> ref = longitudes_deg(nlon);
  std::vector<int64_t> to(static_cast<size_t>(nlon));
  for (int64_t j = 0; j < nlon; ++j) {
    to[j] = (j + shift) % nlon;
    // The same meridian, up to whole turns (a file may run from -180 to 180).
    if (!(std::abs(std::remainder(lon[j] - stored(ref[to[j]]), 360.0)) <= tol))
      f.bad("longitude {} = {} degrees maps to grid column {} at {} degrees: expected the same meridian", j, lon[j],
            to[j], ref[to[j]]);
  }
  return to;
}

struct FileLayout {
  std::optional<int> sample_dim;
  int time_dim, lat_dim, lon_dim;
  size_t samples = 1, times, nlat, nlon;
};

std::vector<int> select_variables(const NcFile& f, const NetcdfReadOptions& opt, FileLayout& lay) {
  auto is_coordinate = [&](const std::string& name) { return f.find_dim(name).has_value(); };
  auto layout_ok = [&](const std::vector<int>& d) {
    if (d.size() == 3) return d[0] == lay.time_dim && d[1] == lay.lat_dim && d[2] == lay.lon_dim;
    if (d.size() == 4)
      return d[1] == lay.time_dim && d[2] == lay.lat_dim && d[3] == lay.lon_dim && d[0] != lay.time_dim &&
             d[0] != lay.lat_dim && d[0] != lay.lon_dim;
    return false;
  };
  std::vector<int> vars;
  if (opt.variables.empty()) {
    int n = 0;
    f.check(nc_inq_nvars(f.id(), &n), "listing variables");
    for (int v = 0; v < n; ++v)
      if (!is_coordinate(f.var_name(v)) && layout_ok(f.var_dims(v))) vars.push_back(v);
    if (vars.empty())
      f.bad("expected data variables over ({0}, {1}, {2}) or (sample, {0}, {1}, {2}), found none among {3}",
            f.dim_name(lay.time_dim), f.dim_name(lay.lat_dim), f.dim_name(lay.lon_dim), f.all_var_names());
  } else {
    for (const auto& name : opt.variables) {
      auto v = f.find_var(name);
      if (!v) f.bad("has no variable '{}' (its variables: {})", name, fmt::join(f.all_var_names(), ", "));
      vars.push_back(*v);
    }
  }
  for (int v : vars) {
    std::vector<int> d = f.var_dims(v);
    if (!layout_ok(d))
      f.bad("variable '{}' has dims {}; expected ({}, {}, {}) or (sample, ...) with those three last", f.var_name(v),
            f.dims_str(d), f.dim_name(lay.time_dim), f.dim_name(lay.lat_dim), f.dim_name(lay.lon_dim));
    std::optional<int> sample = d.size() == 4 ? std::optional<int>(d[0]) : std::nullopt;
    if (v == vars.front()) lay.sample_dim = sample;
    if (sample != lay.sample_dim)
      f.bad("variable '{}' has dims {} but '{}' has {}; expected every variable over the same dims", f.var_name(v),
            f.dims_str(d), f.var_name(vars.front()), f.dims_str(f.var_dims(vars.front())));
  }
  if (lay.sample_dim) lay.samples = f.dim_len(*lay.sample_dim);
  return vars;
}

double read_dt_hours(const NcFile& f, const std::string& time_name, size_t times, const NetcdfReadOptions& opt) {
  auto var = f.find_var(time_name);
  if (!var || times < 2) {
    std::optional<double> dt = opt.dt_hours ? opt.dt_hours : f.number_attr(NC_GLOBAL, "gradsphere_dt_hours");
    if (dt) {
      if (!(*dt > 0)) f.bad("expected a positive time step, got dt_hours = {}", *dt);
      return *dt;
    }
    f.bad("{}; set NetcdfReadOptions::dt_hours", var ? "holds a single time, so the time step is unknown"
                                                     : "has no time coordinate variable to take the time step from");
  }
  auto units = f.text_attr(*var, "units");
  if (!units) f.bad("time coordinate '{}' has no units attribute; expected e.g. 'hours since 2000-01-01'", time_name);
  double factor = hours_per_unit(f, time_name, *units);
  std::vector<double> t = f.read_1d(*var, times);
  double step = t[1] - t[0];
  for (size_t i = 1; i < times; ++i) {
    double d = t[i] - t[i - 1];
    if (!(std::abs(d - step) <= 1e-9 * std::abs(step)) || !(step > 0))
      f.bad("time coordinate '{}' should increase in equal steps; step {} is {} {} but step 1 is {}", time_name, i, d,
            *units, step);
  }
  double dt = step * factor;
  if (opt.dt_hours && !(std::abs(*opt.dt_hours - dt) <= 1e-9 * dt))
    f.bad("its time step is {} hours but dt_hours = {} was expected", dt, *opt.dt_hours);
  return dt;
}

// How a variable's stored numbers become values (CF conventions, as xarray decodes them): values
// equal to the fill value (the _FillValue attribute, else netCDF's default fill for the type unless
// the variable was written with no fill: a value never written reads as that default) or to a
// missing_value, or outside valid_min/valid_max/valid_range, are missing; _Unsigned = "true" makes a
// signed integer type unsigned; then scale_factor and add_offset apply.
struct Decoding {
  std::optional<double> fill;
  std::vector<double> missing;
  double valid_min = -std::numeric_limits<double>::infinity(), valid_max = std::numeric_limits<double>::infinity();
  int unsigned_bits = 0;  // 8, 16, 32 or 64 for an _Unsigned signed integer type
  std::optional<double> scale, add;

  static Decoding of(const NcFile& f, int var) {
    const std::string name = f.var_name(var);
    nc_type type;
    f.check(nc_inq_vartype(f.id(), var, &type), "reading the type of '" + name + "'");
    if (type == NC_CHAR || type == NC_STRING)
      f.bad("variable '{}' holds text ({}); expected numbers", name, type == NC_CHAR ? "char" : "string");
    if (type > NC_MAX_ATOMIC_TYPE)
      f.bad("variable '{}' has a user-defined type (compound, vlen, opaque or enum, type id {}); expected numbers",
            name, type);
    Decoding d;
    int no_fill = 0;
    // The fill in the variable's own type, converted: exact for every numeric type but int64 beyond 2^53.
    alignas(8) unsigned char raw[8] = {};
    f.check(nc_inq_var_fill(f.id(), var, &no_fill, raw), "reading the fill value of '" + name + "'");
    const bool has_attr = f.number_attr(var, "_FillValue").has_value();
    // netCDF4-python and xarray do not mask the default fill of byte types (they are often flags).
    const bool default_masked = type != NC_BYTE && type != NC_UBYTE;
    if (has_attr || (!no_fill && default_masked)) d.fill = stored_as_double(type, raw);
    if (auto text = f.text_attr(var, "_Unsigned")) {
      const int bits = type == NC_BYTE ? 8 : type == NC_SHORT ? 16 : type == NC_INT ? 32 : type == NC_INT64 ? 64 : 0;
      if (*text == "true") {
        if (bits == 0) f.bad("variable '{}' has _Unsigned = \"true\" but is not of a signed integer type", name);
        d.unsigned_bits = bits;
      } else if (*text != "false") {
        f.bad("variable '{}' has _Unsigned = \"{}\"; expected \"true\" or \"false\"", name, *text);
      }
    }
    d.missing = f.number_attrs(var, "missing_value");
    const std::vector<double> range = f.number_attrs(var, "valid_range");
    if (!range.empty()) {
      if (range.size() != 2) f.bad("variable '{}' has a valid_range of {} values; expected 2", name, range.size());
      d.valid_min = range[0];
      d.valid_max = range[1];
    }
    if (auto v = f.number_attr(var, "valid_min")) d.valid_min = *v;
    if (auto v = f.number_attr(var, "valid_max")) d.valid_max = *v;
    d.scale = f.number_attr(var, "scale_factor");
    d.add = f.number_attr(var, "add_offset");
    return d;
  }

  static double stored_as_double(nc_type type, const unsigned char* raw) {
    auto get = [&]<typename T>() {
      T v;
      std::memcpy(&v, raw, sizeof v);
      return static_cast<double>(v);
    };
    switch (type) {
      case NC_BYTE: return get.template operator()<signed char>();
      case NC_UBYTE: return get.template operator()<unsigned char>();
      case NC_SHORT: return get.template operator()<int16_t>();
      case NC_USHORT: return get.template operator()<uint16_t>();
      case NC_INT: return get.template operator()<int32_t>();
      case NC_UINT: return get.template operator()<uint32_t>();
      case NC_INT64: return get.template operator()<int64_t>();
      case NC_UINT64: return get.template operator()<uint64_t>();
      case NC_FLOAT: return get.template operator()<float>();
      default: return get.template operator()<double>();
    }
  }

  // A stored integer as the unsigned number it stands for under _Unsigned = "true" (attributes of
  // such a variable are stored signed too, so they go through the same conversion).
  double as_unsigned(double raw) const { return unsigned_bits > 0 && raw < 0 ? raw + std::ldexp(1.0, unsigned_bits) : raw; }
  // Whether a stored number is missing: the fill value as stored, or a missing_value.
  bool is_missing(double raw) const {
    if (!std::isfinite(raw) || (fill && raw == *fill)) return true;
    for (double m : missing)
      if (as_unsigned(raw) == as_unsigned(m)) return true;
    return false;
  }
  // The value of a stored number that is not missing; NaN when it is outside the valid range.
  double value(double raw) const {
    raw = as_unsigned(raw);
    if (raw < as_unsigned(valid_min) || raw > as_unsigned(valid_max)) return std::numeric_limits<double>::quiet_NaN();
    if (scale) raw *= *scale;
    if (add) raw += *add;
    return raw;
  }
};

// One file opened for reading: its layout checked once, then any window of states on any tile read
// by hyperslabs (each request reads only the rows, columns and states it returns).
class FileReader {
 public:
  FileReader(const fs::path& path, const NetcdfReadOptions& opt);
  const TrajectoryInfo& info() const { return info_; }
  const fs::path& path() const { return f_.path(); }
  // (n, C, rows.count, cols.count) of `sample`, CF-unpacked, north first, column 0 at 0 E.
  Tensor read(size_t sample, int64_t first, int64_t n, Span rows, Span cols) const;

 private:
  NcFile f_;
  FileLayout lay_{};
  std::vector<int> vars_;
  std::vector<Decoding> decoding_;  // per variable
  bool flip_lat_ = false;
  int64_t shift_ = 0;  // grid column of file column 0
  DType dtype_ = DType::f32;
  TrajectoryInfo info_;
};

FileReader::FileReader(const fs::path& path, const NetcdfReadOptions& opt) : f_(NcFile::open(path)), dtype_(opt.dtype) {
  GS_CHECK(opt.dtype == DType::f32 || opt.dtype == DType::f64, "read_netcdf('{}'): expected dtype f32 or f64, got {}",
           path.string(), dtype_name(opt.dtype));
  NcFile& f = f_;
  FileLayout& lay = lay_;
  const std::string time_name = find_dim_name(f, opt.time_name, {"time"}, "time");
  const std::string lat_name = find_dim_name(f, opt.lat_name, {"lat", "latitude"}, "latitude");
  const std::string lon_name = find_dim_name(f, opt.lon_name, {"lon", "longitude"}, "longitude");
  lay.time_dim = *f.find_dim(time_name);
  lay.lat_dim = *f.find_dim(lat_name);
  lay.lon_dim = *f.find_dim(lon_name);
  lay.times = f.dim_len(lay.time_dim);
  lay.nlat = f.dim_len(lay.lat_dim);
  lay.nlon = f.dim_len(lay.lon_dim);
  if (lay.times == 0 || lay.nlat == 0 || lay.nlon == 0)
    f.bad("expected non-empty dims, found {} = {}, {} = {}, {} = {}", time_name, lay.times, lat_name, lay.nlat,
          lon_name, lay.nlon);

  auto lat_var = f.find_var(lat_name);
  auto lon_var = f.find_var(lon_name);
  if (!lat_var || !lon_var)
    f.bad("expected coordinate variables '{}' and '{}' (latitudes and longitudes in degrees)", lat_name, lon_name);
  std::vector<double> lat = f.read_1d(*lat_var, lay.nlat);
  // DESIGN.md: row 0 is the north pole. Files from south to north are flipped on the way in.
  flip_lat_ = lay.nlat > 1 && lat.front() < lat.back();
  if (flip_lat_) std::reverse(lat.begin(), lat.end());
  for (size_t i = 1; i < lay.nlat; ++i)
    if (!(lat[i] < lat[i - 1]))
      f.bad("latitude '{}' should be strictly monotonic, found {} then {}", lat_name, lat[i - 1], lat[i]);

  // Coordinates stored as f32 are compared with the reference rounded to f32, so the tolerance can
  // stay at the f64 level either way.
  auto rounding = [&](int var) {
    nc_type type;
    f.check(nc_inq_vartype(f.id(), var, &type), "reading the type of '" + f.var_name(var) + "'");
    return type == NC_FLOAT;
  };
  const bool lat_f32 = rounding(*lat_var), lon_f32 = rounding(*lon_var);
  info_.grid = match_grid(f, lat, opt, [&](double x) { return lat_f32 ? double(float(x)) : x; });
  info_.nlat = static_cast<int64_t>(lay.nlat);
  info_.nlon = static_cast<int64_t>(lay.nlon);
  const std::vector<int64_t> columns = longitude_columns(
      f, lon_name, f.read_1d(*lon_var, lay.nlon), opt.lat_tolerance_deg,
      [&](double x) { return lon_f32 ? double(float(x)) : x; });
  shift_ = columns.front();  // the columns are a rotation: file column j is grid column (j + shift) mod nlon
  vars_ = select_variables(f, opt, lay);
  for (int v : vars_) decoding_.push_back(Decoding::of(f, v));
  info_.dt_hours = read_dt_hours(f, time_name, lay.times, opt);
  info_.dtype = opt.dtype;
  bool any_units = false;
  for (int v : vars_) {
    info_.variables.push_back(f.var_name(v));
    auto u = f.text_attr(v, "units");
    any_units = any_units || u.has_value();
    info_.units.push_back(u.value_or(""));
  }
  if (!any_units) info_.units.clear();
  info_.states.assign(lay.samples, static_cast<int64_t>(lay.times));
}

Tensor FileReader::read(size_t sample, int64_t first, int64_t n, Span rows, Span cols) const {
  const NcFile& f = f_;
  const int64_t C = info_.channels(), nlat = info_.nlat, nlon = info_.nlon;
  Tensor out = empty({n, C, rows.count, cols.count}, DType::f64);
  double* dst = out.data<double>();
  // The tile's rows are one contiguous run of file rows (reversed when the file runs south to north);
  // its columns are one run of file columns, or two when the tile wraps past the file's last column.
  const int64_t file_row0 = flip_lat_ ? nlat - rows.start - rows.count : rows.start;
  const int64_t file_col0 = ((cols.start - shift_) % nlon + nlon) % nlon;
  const int64_t first_run = std::min(cols.count, nlon - file_col0);
  struct Run {
    int64_t file_col, count, tile_col;
  };
  std::vector<Run> runs = {{file_col0, first_run, 0}};
  if (first_run < cols.count) runs.push_back({0, cols.count - first_run, first_run});
  std::vector<double> buf;
  for (int64_t c = 0; c < C; ++c) {
    const int var = vars_[static_cast<size_t>(c)];
    const std::string name = f.var_name(var);
    const Decoding& decode = decoding_[static_cast<size_t>(c)];
    for (const Run& run : runs) {
      std::vector<size_t> start = {static_cast<size_t>(first), static_cast<size_t>(file_row0),
                                   static_cast<size_t>(run.file_col)};
      std::vector<size_t> count = {static_cast<size_t>(n), static_cast<size_t>(rows.count),
                                   static_cast<size_t>(run.count)};
      if (lay_.sample_dim) {
        start.insert(start.begin(), sample);
        count.insert(count.begin(), 1);
      }
      buf.resize(static_cast<size_t>(n * rows.count * run.count));
      f.check(nc_get_vara_double(f.id(), var, start.data(), count.data(), buf.data()),
              fmt::format("reading variable '{}' at times {}..{}", name, first, first + n - 1));
      for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < rows.count; ++i)
          for (int64_t j = 0; j < run.count; ++j) {
            const double raw = buf[static_cast<size_t>((t * rows.count + i) * run.count + j)];
            const double value = decode.is_missing(raw) ? std::numeric_limits<double>::quiet_NaN() : decode.value(raw);
            if (!std::isfinite(value))  // missing, out of range, or overflowed by scale_factor
              f.bad("variable '{}' has {} value ({}) at sample {}, time {}, lat row {}, lon column {}; expected "
                    "complete fields{}",
                    name, decode.is_missing(raw) ? "a missing or non-finite"
                    : std::isnan(value)    ? "an out-of-range"
                                           : "an overflowing (scaled to infinity)",
                    raw, sample, first + t,
                    file_row0 + i, run.file_col + j,
                    decode.fill && raw == *decode.fill && !f.number_attr(var, "_FillValue")
                        ? " (it equals netCDF's default fill value: the variable was never written there)"
                        : "");
            const int64_t row = flip_lat_ ? rows.count - 1 - i : i;
            dst[((t * C + c) * rows.count + row) * cols.count + run.tile_col + j] = value;
          }
    }
  }
  return dtype_ == DType::f64 ? out : cast_copy(out, dtype_);
}

// Several files, each contributing its trajectories; all must agree on variables, grid and dt.
class NetcdfSource final : public TrajectorySource {
 public:
  NetcdfSource(const std::vector<fs::path>& paths, const NetcdfReadOptions& opt) {
    GS_CHECK(!paths.empty(), "read_netcdf: expected at least one file, got none");
    for (const auto& p : paths) {
      files_.push_back(std::make_unique<FileReader>(p, opt));
      const TrajectoryInfo& next = files_.back()->info();
      if (files_.size() == 1) {
        info_ = next;
        info_.states.clear();
      } else {
        check_same(next, p, paths.front());
      }
      for (size_t s = 0; s < next.states.size(); ++s) {
        info_.states.push_back(next.states[s]);
        index_.emplace_back(files_.size() - 1, s);
      }
    }
  }
  const TrajectoryInfo& info() const override { return info_; }
  Tensor read(int64_t trajectory, int64_t first, int64_t n, Span rows, Span cols) const override {
    check_request(trajectory, first, n, rows, cols);
    const auto [file, sample] = index_[static_cast<size_t>(trajectory)];
    return files_[file]->read(sample, first, n, rows, cols);
  }

 private:
  void check_same(const TrajectoryInfo& next, const fs::path& path, const fs::path& first) const {
    auto where = [&] { return fmt::format("NetCDF file '{}' does not match '{}'", path.string(), first.string()); };
    GS_CHECK(next.variables == info_.variables, "{}: variables {} vs {}", where(), next.variables, info_.variables);
    GS_CHECK(next.grid == info_.grid && next.nlat == info_.nlat && next.nlon == info_.nlon,
             "{}: grid {} {}x{} vs {} {}x{}", where(), sphere::grid_name(next.grid), next.nlat, next.nlon,
             sphere::grid_name(info_.grid), info_.nlat, info_.nlon);
    GS_CHECK(std::abs(next.dt_hours - info_.dt_hours) <= 1e-9 * info_.dt_hours, "{}: time step {} vs {} hours",
             where(), next.dt_hours, info_.dt_hours);
    GS_CHECK(next.units == info_.units, "{}: units {} vs {}", where(), next.units, info_.units);
  }
  std::vector<std::unique_ptr<FileReader>> files_;
  std::vector<std::pair<size_t, size_t>> index_;  // trajectory -> (file, sample)
  TrajectoryInfo info_;
};

}  // namespace

std::shared_ptr<TrajectorySource> open_netcdf(const std::vector<fs::path>& paths, const NetcdfReadOptions& opt) {
  return std::make_shared<NetcdfSource>(paths, opt);
}

TrajectoryData read_netcdf(const fs::path& path, const NetcdfReadOptions& opt) {
  return read_netcdf(std::vector<fs::path>{path}, opt);
}

TrajectoryData read_netcdf(const std::vector<fs::path>& paths, const NetcdfReadOptions& opt) {
  auto source = open_netcdf(paths, opt);
  const TrajectoryInfo& i = source->info();
  TrajectoryData d{.variables = i.variables, .units = i.units, .grid = i.grid, .nlat = i.nlat, .nlon = i.nlon,
                   .dt_hours = i.dt_hours, .trajectories = {}};
  for (int64_t t = 0; t < i.trajectories(); ++t)
    d.trajectories.push_back(source->read(t, 0, i.states[static_cast<size_t>(t)]));
  d.validate();
  return d;
}

// ---- writing

namespace {

void put_text(const NcFile& f, int var, const char* name, const std::string& value) {
  f.check(nc_put_att_text(f.id(), var, name, value.size(), value.data()), fmt::format("writing attribute '{}'", name));
}

int define_coordinate(const NcFile& f, const char* name, nc_type type, int dim,
                      std::initializer_list<std::pair<const char*, std::string>> attrs) {
  int var;
  f.check(nc_def_var(f.id(), name, type, 1, &dim, &var), fmt::format("defining coordinate '{}'", name));
  for (const auto& [key, value] : attrs) put_text(f, var, key, value);
  return var;
}

}  // namespace

void write_netcdf(const fs::path& path, const TrajectoryData& data, const NetcdfWriteOptions& opt) {
  data.validate();
  const std::string where = fmt::format("write_netcdf('{}')", path.string());
  GS_CHECK(!data.trajectories.empty(), "{}: expected at least one trajectory, got none", where);
  const Tensor& first = data.trajectories.front();
  const int64_t T = first.size(0), C = data.channels();
  for (const auto& t : data.trajectories)
    GS_CHECK(t.size(0) == T,
             "{}: trajectories share the 'sample' dim, so they need the same number of states; "
             "found {} and {} (write them to separate files)",
             where, T, t.size(0));
  GS_CHECK(first.dtype() == DType::f32 || first.dtype() == DType::f64, "{}: expected f32 or f64 data, got {}", where,
           dtype_name(first.dtype()));
  GS_CHECK(opt.long_names.empty() || opt.long_names.size() == data.variables.size(),
           "{}: expected {} long names (one per variable) or none, got {}", where, data.variables.size(),
           opt.long_names.size());
  GS_CHECK(opt.deflate_level >= 0 && opt.deflate_level <= 9, "{}: deflate_level must be 0 to 9, got {}", where,
           opt.deflate_level);
  const bool multi = data.trajectories.size() > 1;

  AtomicFile file(path);
  file.close_descriptor();  // NetCDF writes the temporary file by its path
  NcFile f = NcFile::create(file.temp_path(), path);

  int sample_dim = -1, time_dim, lat_dim, lon_dim;
  if (multi) f.check(nc_def_dim(f.id(), "sample", data.trajectories.size(), &sample_dim), "defining dim 'sample'");
  f.check(nc_def_dim(f.id(), "time", static_cast<size_t>(T), &time_dim), "defining dim 'time'");
  f.check(nc_def_dim(f.id(), "lat", static_cast<size_t>(data.nlat), &lat_dim), "defining dim 'lat'");
  f.check(nc_def_dim(f.id(), "lon", static_cast<size_t>(data.nlon), &lon_dim), "defining dim 'lon'");

  int sample_var = -1;
  if (multi) sample_var = define_coordinate(f, "sample", NC_INT, sample_dim, {{"long_name", "trajectory index"}});
  int time_var = define_coordinate(f, "time", NC_DOUBLE, time_dim,
                                   {{"standard_name", "time"},
                                    {"long_name", "time"},
                                    {"units", "hours since " + opt.reference_time},
                                    {"calendar", "standard"},
                                    {"axis", "T"}});
  int lat_var = define_coordinate(
      f, "lat", NC_DOUBLE, lat_dim,
      {{"standard_name", "latitude"}, {"long_name", "latitude"}, {"units", "degrees_north"}, {"axis", "Y"}});
  int lon_var = define_coordinate(
      f, "lon", NC_DOUBLE, lon_dim,
      {{"standard_name", "longitude"}, {"long_name", "longitude"}, {"units", "degrees_east"}, {"axis", "X"}});

  const nc_type type = first.dtype() == DType::f32 ? NC_FLOAT : NC_DOUBLE;
  std::vector<int> dims = {time_dim, lat_dim, lon_dim};
  std::vector<size_t> chunks = {1, static_cast<size_t>(data.nlat), static_cast<size_t>(data.nlon)};
  if (multi) {
    dims.insert(dims.begin(), sample_dim);
    chunks.insert(chunks.begin(), 1);
  }
  std::vector<int> vars;
  for (int64_t c = 0; c < C; ++c) {
    const std::string& name = data.variables[c];
    int var;
    f.check(nc_def_var(f.id(), name.c_str(), type, static_cast<int>(dims.size()), dims.data(), &var),
            fmt::format("defining variable '{}'", name));
    if (opt.deflate_level > 0) {
      // One chunk per field: a reader of one time step decompresses only that step.
      f.check(nc_def_var_chunking(f.id(), var, NC_CHUNKED, chunks.data()), "chunking '" + name + "'");
      f.check(nc_def_var_deflate(f.id(), var, 1, 1, opt.deflate_level), "compressing '" + name + "'");
    }
    put_text(f, var, "long_name", opt.long_names.empty() ? name : opt.long_names[c]);
    if (!data.units.empty() && !data.units[c].empty()) put_text(f, var, "units", data.units[c]);
    vars.push_back(var);
  }
  put_text(f, NC_GLOBAL, "Conventions", "CF-1.8");
  put_text(f, NC_GLOBAL, "title", opt.title);
  put_text(f, NC_GLOBAL, "history", "created by gradsphere" + (opt.history.empty() ? "" : "\n" + opt.history));
  put_text(f, NC_GLOBAL, "gradsphere_grid", std::string(sphere::grid_name(data.grid)));
  f.check(nc_put_att_double(f.id(), NC_GLOBAL, "gradsphere_dt_hours", NC_DOUBLE, 1, &data.dt_hours),
          "writing attribute 'gradsphere_dt_hours'");
  for (const auto& [key, value] : opt.attributes) put_text(f, NC_GLOBAL, key.c_str(), value);
  f.check(nc_enddef(f.id()), "finishing the definitions");

  std::vector<double> times(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) times[t] = opt.start_hours + static_cast<double>(t) * data.dt_hours;
  f.check(nc_put_var_double(f.id(), time_var, times.data()), "writing 'time'");
  f.check(nc_put_var_double(f.id(), lat_var, latitudes_deg(data.grid, data.nlat).data()), "writing 'lat'");
  f.check(nc_put_var_double(f.id(), lon_var, longitudes_deg(data.nlon).data()), "writing 'lon'");
  if (multi) {
    std::vector<int> index(data.trajectories.size());
    std::iota(index.begin(), index.end(), 0);
    f.check(nc_put_var_int(f.id(), sample_var, index.data()), "writing 'sample'");
  }

  const size_t field = static_cast<size_t>(data.nlat * data.nlon);
  for (size_t s = 0; s < data.trajectories.size(); ++s) {
    Tensor traj = contiguous_copy(data.trajectories[s].device().is_cpu()
                                      ? data.trajectories[s]
                                      : to_device_copy(data.trajectories[s], Device::cpu()));  // (T, C, H, W)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c) {
        std::vector<size_t> start = {static_cast<size_t>(t), 0, 0};
        std::vector<size_t> count = {1, static_cast<size_t>(data.nlat), static_cast<size_t>(data.nlon)};
        if (multi) {
          start.insert(start.begin(), s);
          count.insert(count.begin(), 1);
        }
        size_t at = (static_cast<size_t>(t) * static_cast<size_t>(C) + static_cast<size_t>(c)) * field;
        int rc = type == NC_FLOAT
                     ? nc_put_vara_float(f.id(), vars[c], start.data(), count.data(), traj.data<float>() + at)
                     : nc_put_vara_double(f.id(), vars[c], start.data(), count.data(), traj.data<double>() + at);
        f.check(rc, fmt::format("writing variable '{}'", data.variables[c]));
      }
  }
  f.close();
  file.commit();
}

}  // namespace gs::models
