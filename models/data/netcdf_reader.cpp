// Reading NetCDF files as CF and xarray read them (netcdf_io.h): coordinates by attributes
// (cf_coordinates.h), calendars (cf_time.h), levels as channels, missing values as NaN, files
// joined along time; every request a hyperslab of exactly the states and the tile it returns.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "models/data/cf_coordinates.h"
#include "models/data/cf_time.h"
#include "models/data/netcdf_file.h"
#include "models/data/netcdf_io.h"
#include "ops/shape_ops.h"
#include "ops/view.h"

namespace gs::models {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
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
      return std::numeric_limits<double>::infinity();  // the rule has no grid of this size
    }
  };
  if (opt.grid) {
    const double dev = deviation(*opt.grid);
    if (!(dev <= opt.lat_tolerance_deg))
      f.bad("its {} latitudes are not the {} grid: they differ from it by up to {:.3g} degrees (tolerance {:.3g})",
            nlat, sphere::grid_name(*opt.grid), dev, opt.lat_tolerance_deg);
    return *opt.grid;
  }
  std::vector<sphere::GridKind> order = {sphere::GridKind::equiangular, sphere::GridKind::legendre_gauss,
                                         sphere::GridKind::lobatto};
  if (auto hint = f.text_attr(NC_GLOBAL, "gradsphere_grid")) {
    try {
      order.insert(order.begin(), sphere::parse_grid_kind(*hint));
    } catch (const Error&) {
    }  // a foreign or stale attribute: the latitudes decide
  }
  std::vector<std::string> tried;
  for (sphere::GridKind g : order) {
    const double dev = deviation(g);
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
    const double expect = stored(lon[0] + static_cast<double>(j) * spacing);
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

// A file's time axis in absolute terms (seconds since 0001-01-01 of its calendar).
struct FileTimes {
  TimeUnits units;
  std::vector<double> values;  // as stored
  double first = 0, last = 0;  // absolute
};

// One channel: a variable, or one level of it.
struct Channel {
  int var = -1;
  std::string name;
  bool has_sample = false, has_time = true;
  int64_t level = -1;  // index along the level dimension, -1: none
  Decoding decode;
};

// One file opened for reading: its layout checked once, then any window of states on any tile read
// by hyperslabs.
class FileReader {
 public:
  FileReader(const fs::path& path, const NetcdfReadOptions& opt);
  const TrajectoryInfo& info() const { return info_; }
  const fs::path& path() const { return f_.path(); }
  bool has_sample_dim() const { return samples_dim_ >= 0; }
  const std::optional<FileTimes>& times() const { return times_; }
  // (n, C, rows.count, cols.count) f64 of `sample`, CF-decoded (missing: NaN), north first, column 0 at 0 E.
  Tensor read(size_t sample, int64_t first, int64_t n, Span rows, Span cols) const;

 private:
  void find_time(const CfCoordinate& time, const NetcdfReadOptions& opt);
  void add_channels(int var, const VariableRequest& request, bool asked);
  std::vector<double> level_values(int dim, std::string& coordinate, std::string& units) const;

  NcFile f_;
  int lat_dim_ = -1, lon_dim_ = -1, time_dim_ = -1, samples_dim_ = -1;
  std::set<int> vertical_dims_;  // dimensions with a CF vertical coordinate
  int64_t nlat_ = 0, nlon_ = 0, times_count_ = 0;
  bool flip_lat_ = false;
  int64_t shift_ = 0;  // grid column of file column 0
  std::optional<FileTimes> times_;
  std::vector<Channel> channels_;
  TrajectoryInfo info_;
};

FileReader::FileReader(const fs::path& path, const NetcdfReadOptions& opt) : f_(NcFile::open(path)) {
  GS_CHECK(opt.dtype == DType::f32 || opt.dtype == DType::f64, "read_netcdf('{}'): expected dtype f32 or f64, got {}",
           path.string(), dtype_name(opt.dtype));
  const NcFile& f = f_;
  std::vector<int> asked;
  for (const auto& r : opt.variables) {
    auto v = f.find_var(r.name);
    if (!v) f.bad("has no variable '{}' (its variables: {})", r.name, fmt::join(f.all_var_names(), ", "));
    asked.push_back(*v);
  }
  const CfCoordinates coords = find_coordinates(f, {opt.lat_name, opt.lon_name, opt.time_name}, asked);
  lat_dim_ = coords.lat.dim;
  lon_dim_ = coords.lon.dim;
  nlat_ = static_cast<int64_t>(f.dim_len(lat_dim_));
  const int64_t file_nlon = static_cast<int64_t>(f.dim_len(lon_dim_));
  if (nlat_ == 0 || file_nlon == 0) f.bad("expected non-empty latitude and longitude dimensions, found {}x{}", nlat_, file_nlon);
  if (coords.lat.var < 0 || coords.lon.var < 0)
    f.bad("expected coordinate variables for its latitude '{}' and longitude '{}' (degrees)", coords.lat.name,
          coords.lon.name);
  for (const CfCoordinate* c : {&coords.lat, &coords.lon}) {
    const std::string units = f.text_attr(c->var, "units").value_or("degrees");
    if (lower(units).rfind("degree", 0) != 0)
      f.bad("coordinate '{}' has units '{}'; expected degrees", c->name, units);
  }

  std::vector<double> lat = f.read_1d(coords.lat.var, static_cast<size_t>(nlat_));
  flip_lat_ = nlat_ > 1 && lat.front() < lat.back();  // row 0 is the north pole
  if (flip_lat_) std::reverse(lat.begin(), lat.end());
  for (int64_t i = 1; i < nlat_; ++i)
    if (!(lat[i] < lat[i - 1]))
      f.bad("latitude '{}' should be strictly monotonic, found {} then {}", coords.lat.name, lat[i - 1], lat[i]);
  // Coordinates stored as f32 are compared with the reference rounded to f32.
  const bool lat_f32 = f.var_type(coords.lat.var) == NC_FLOAT, lon_f32 = f.var_type(coords.lon.var) == NC_FLOAT;
  info_.grid = match_grid(f, lat, opt, [&](double x) { return lat_f32 ? double(float(x)) : x; });
  info_.nlat = nlat_;

  std::vector<double> lon = f.read_1d(coords.lon.var, static_cast<size_t>(file_nlon));
  nlon_ = file_nlon;
  if (nlon_ >= 2 && std::abs(lon.back() - (lon.front() + 360.0)) <= opt.lat_tolerance_deg) {
    // A closed seam (the first meridian again at +360, as some models write): the repeat goes.
    --nlon_;
    lon.pop_back();
    info_.notes.push_back(fmt::format("'{}': longitude '{}' repeats its first column ({} degrees) at {} degrees; the "
                                      "repeated column is not read ({} columns remain)",
                                      path.filename().string(), coords.lon.name, lon.front(), lon.front() + 360.0, nlon_));
  }
  const std::vector<int64_t> columns = longitude_columns(f, coords.lon.name, lon, opt.lat_tolerance_deg,
                                                         [&](double x) { return lon_f32 ? double(float(x)) : x; });
  shift_ = columns.front();  // file column j is grid column (j + shift) mod nlon
  info_.nlon = nlon_;
  find_time(coords.time, opt);
  for (const auto& [dim, c] : coords.vertical) vertical_dims_.insert(dim);

  if (opt.variables.empty()) {
    std::vector<int> coordinate_vars = {coords.lat.var, coords.lon.var, coords.time.var};
    for (const auto& [dim, c] : coords.vertical) coordinate_vars.push_back(c.var);
    for (int v = 0; v < f.var_count(); ++v) {
      const std::vector<int> d = f.var_dims(v);
      if (std::find(coordinate_vars.begin(), coordinate_vars.end(), v) != coordinate_vars.end()) continue;
      if (d.size() == 1 && f.find_dim(f.var_name(v)) == d[0]) continue;  // a coordinate variable
      add_channels(v, VariableRequest(f.var_name(v)), false);
    }
    if (channels_.empty())
      f.bad("has no data variable over ({}, [level,] {}, {}) to read; its variables: {}",
            time_dim_ >= 0 ? f.dim_name(time_dim_) : std::string("time"), f.dim_name(lat_dim_), f.dim_name(lon_dim_),
            fmt::join(f.all_var_names(), ", "));
  } else {
    for (size_t i = 0; i < asked.size(); ++i) add_channels(asked[i], opt.variables[i], true);
  }
  bool any_static_only = true;
  for (const Channel& c : channels_) any_static_only = any_static_only && !c.has_time;
  if (time_dim_ < 0 || any_static_only)
    f.bad("has no time dimension for its variables ({}): expected fields over ({}, {}) with a leading time dimension",
          fmt::join(info_.variables, ", "), f.dim_name(lat_dim_), f.dim_name(lon_dim_));
  info_.dtype = opt.dtype;
  const size_t samples = samples_dim_ >= 0 ? f.dim_len(samples_dim_) : 1;
  info_.states.assign(samples, times_count_);
  bool any_units = false;
  for (const auto& u : info_.units) any_units = any_units || !u.empty();
  if (!any_units) info_.units.clear();
  bool any_level = false;
  for (const auto& l : info_.levels) any_level = any_level || l.has_level();
  if (!any_level) info_.levels.clear();
}

void FileReader::find_time(const CfCoordinate& time, const NetcdfReadOptions& opt) {
  const NcFile& f = f_;
  time_dim_ = time.dim;
  if (time_dim_ < 0) return;
  times_count_ = static_cast<int64_t>(f.dim_len(time_dim_));
  if (times_count_ == 0) f.bad("its time dimension '{}' is empty", f.dim_name(time_dim_));
  std::optional<double> dt = opt.dt_hours;
  if (time.var >= 0) {
    auto units = f.text_attr(time.var, "units");
    if (!units) f.bad("time coordinate '{}' has no units attribute; expected e.g. 'hours since 2000-01-01'", time.name);
    FileTimes t;
    try {
      t.units = parse_time_units(*units, parse_calendar(f.text_attr(time.var, "calendar").value_or("")));
    } catch (const Error& e) {
      f.bad("time coordinate '{}': {}", time.name, e.what());
    }
    t.values = f.read_1d(time.var, static_cast<size_t>(times_count_));
    for (double v : t.values)
      if (!std::isfinite(v)) f.bad("time coordinate '{}' holds a non-finite value", time.name);
    t.first = absolute_seconds(t.units, t.values.front());
    t.last = absolute_seconds(t.units, t.values.back());
    if (times_count_ >= 2) {
      const double step = absolute_seconds(t.units, t.values[1]) - t.first;
      if (!(step > 0))
        f.bad("time coordinate '{}' should increase; it goes from {} to {}", time.name,
              format_time(t.units, t.values[0]), format_time(t.units, t.values[1]));
      for (int64_t i = 1; i < times_count_; ++i) {
        const double d = (t.values[i] - t.values[i - 1]) * t.units.seconds_per_unit;
        if (!(std::abs(d - step) <= 1e-6 * step))
          f.bad("time coordinate '{}' has irregular steps: the first gap is between {} and {} ({} hours; the first "
                "step is {} hours); expected equal steps ({} calendar)",
                time.name, format_time(t.units, t.values[i - 1]), format_time(t.units, t.values[i]), d / 3600.0,
                step / 3600.0, calendar_name(t.units.calendar));
      }
      const double file_dt = step / 3600.0;
      if (opt.dt_hours && !(std::abs(*opt.dt_hours - file_dt) <= 1e-9 * file_dt))
        f.bad("its time step is {} hours but dt_hours = {} was expected", file_dt, *opt.dt_hours);
      dt = file_dt;
    }
    info_.time_units = t.units.text;
    info_.calendar = calendar_name(t.units.calendar);
    times_ = std::move(t);
  }
  if (!dt) dt = f.number_attr(NC_GLOBAL, "gradsphere_dt_hours");
  if (!dt)
    f.bad("{}; set the time step (NetcdfReadOptions::dt_hours, data.netcdf.dt_hours)",
          time.var >= 0 ? "holds a single time, so the time step is unknown"
                        : "has no time coordinate variable to take the time step from");
  if (!(*dt > 0)) f.bad("expected a positive time step, got dt_hours = {}", *dt);
  info_.dt_hours = *dt;
}

std::vector<double> FileReader::level_values(int dim, std::string& coordinate, std::string& units) const {
  const NcFile& f = f_;
  const size_t n = f.dim_len(dim);
  coordinate = f.dim_name(dim);
  if (auto v = f.find_var(coordinate); v && f.var_dims(*v) == std::vector<int>{dim}) {
    units = f.text_attr(*v, "units").value_or("");
    return f.read_1d(*v, n);
  }
  for (int v = 0; v < f.var_count(); ++v)  // a coordinate whose name differs from its dimension's
    if (f.var_dims(v) == std::vector<int>{dim} && cf_axis_of(f, v) == CfAxis::vertical) {
      coordinate = f.var_name(v);
      units = f.text_attr(v, "units").value_or("");
      return f.read_1d(v, n);
    }
  std::vector<double> index(n);
  std::iota(index.begin(), index.end(), 0.0);
  return index;  // no coordinate variable: the levels are their indices
}

void FileReader::add_channels(int var, const VariableRequest& request, bool asked) {
  const NcFile& f = f_;
  const std::vector<int> d = f.var_dims(var);
  const std::string& name = request.name;
  auto unusable = [&](const std::string& why) {
    if (asked) f.bad("variable '{}' {}", name, why);
    info_.notes.push_back(fmt::format("'{}': variable '{}' {} skipped: it {}", f.path().filename().string(), name,
                                      f.dims_str(d), why));
  };
  if (d.size() < 2 || d[d.size() - 2] != lat_dim_ || d.back() != lon_dim_) {
    if (d.size() >= 2 && d[d.size() - 2] == lon_dim_ && d.back() == lat_dim_)
      return unusable(fmt::format("is (..., {}, {}): expected latitude before longitude (CF's T, Z, Y, X order); "
                                  "transpose it, e.g. ncpdq -a ...,{},{}",
                                  f.dim_name(lon_dim_), f.dim_name(lat_dim_), f.dim_name(lat_dim_), f.dim_name(lon_dim_)));
    return unusable(fmt::format("is not a field over ({}, {}) as its last two dimensions", f.dim_name(lat_dim_),
                                f.dim_name(lon_dim_)));
  }
  const std::vector<int> lead(d.begin(), d.end() - 2);
  int sample = -1, level = -1;
  bool has_time = false;
  if (lead.empty()) {
  } else if (lead.size() == 1) {
    if (lead[0] == time_dim_) has_time = true;
    else level = lead[0];
  } else if (lead.size() == 2 && lead[0] == time_dim_) {
    has_time = true, level = lead[1];
  } else if (lead.size() == 2 && lead[1] == time_dim_) {
    has_time = true, sample = lead[0];
  } else if (lead.size() == 3 && lead[1] == time_dim_) {
    has_time = true, sample = lead[0], level = lead[2];
  } else {
    return unusable(fmt::format("has dims {}: expected ([sample,] {}, [level,] {}, {}) or ([level,] {}, {})",
                                f.dims_str(d), time_dim_ >= 0 ? f.dim_name(time_dim_) : std::string("time"),
                                f.dim_name(lat_dim_), f.dim_name(lon_dim_), f.dim_name(lat_dim_), f.dim_name(lon_dim_)));
  }
  if (sample >= 0 && vertical_dims_.count(sample))
    return unusable(fmt::format("has dims {}: its vertical dimension '{}' comes before time; expected ([sample,] {}, "
                                "{}, {}, {}); reorder it, e.g. ncpdq -a {},{}",
                                f.dims_str(d), f.dim_name(sample), f.dim_name(time_dim_), f.dim_name(sample),
                                f.dim_name(lat_dim_), f.dim_name(lon_dim_), f.dim_name(time_dim_), f.dim_name(sample)));
  if (!has_time && !asked)
    return unusable("is time-invariant; list it in data.variables (e.g. as a forcing) to use it at every state");
  if (has_time) {
    const bool first = std::none_of(channels_.begin(), channels_.end(), [](const Channel& c) { return c.has_time; });
    if (first) samples_dim_ = sample;
    else if (sample != samples_dim_)
      f.bad("variable '{}' has dims {} but the variables before it {} a sample dimension; expected every variable over "
            "the same leading dims",
            name, f.dims_str(d), samples_dim_ >= 0 ? "have" : "do not have");
  }
  if (level < 0 && !request.levels.all())
    f.bad("variable '{}' has dims {}: it has no level dimension to select levels from", name, f.dims_str(d));
  Channel c;
  c.var = var;
  c.has_time = has_time;
  c.has_sample = sample >= 0;
  c.decode = Decoding::of(f, var);
  const std::string units = f.text_attr(var, "units").value_or("");
  if (level < 0) {
    c.name = name;
    channels_.push_back(c);
    info_.variables.push_back(name);
    info_.units.push_back(units);
    info_.roles.push_back(request.role);
    info_.levels.push_back({});
    return;
  }
  ChannelLevel lv;
  const std::vector<double> values = level_values(level, lv.coordinate, lv.units);
  if (!vertical_dims_.count(level)) {  // read as levels all the same, but said: it may be a mistake
    const std::string note = fmt::format(
        "'{}': dimension '{}' ({} entries) has no CF vertical coordinate (axis Z, positive, pressure units or a "
        "vertical standard_name); its entries are taken as levels, one channel each",
        f.path().filename().string(), f.dim_name(level), values.size());
    if (std::find(info_.notes.begin(), info_.notes.end(), note) == info_.notes.end()) info_.notes.push_back(note);
  }
  std::vector<int64_t> picked;
  if (request.levels.all()) {
    picked.resize(values.size());
    std::iota(picked.begin(), picked.end(), 0);
  }
  for (int64_t k : request.levels.indices) {
    if (k < 0 || k >= static_cast<int64_t>(values.size()))
      f.bad("variable '{}': level index {} is out of range (its level dimension '{}' has {} levels)", name, k,
            f.dim_name(level), values.size());
    picked.push_back(k);
  }
  for (double want : request.levels.values) {
    auto it = std::find_if(values.begin(), values.end(),
                           [&](double v) { return std::abs(v - want) <= 1e-6 * std::max(1.0, std::abs(want)); });
    if (it == values.end())
      f.bad("variable '{}' has no level {} {} (its levels along '{}': {})", name, want, lv.units, lv.coordinate,
            fmt::join(values, ", "));
    picked.push_back(it - values.begin());
  }
  for (int64_t k : picked) {
    Channel ck = c;
    ck.level = k;
    ck.name = level_channel_name(name, k);
    if (std::any_of(channels_.begin(), channels_.end(), [&](const Channel& o) { return o.name == ck.name; }))
      f.bad("variable '{}': level {} is selected twice", name, k);
    channels_.push_back(ck);
    info_.variables.push_back(ck.name);
    info_.units.push_back(units);
    info_.roles.push_back(request.role);
    ChannelLevel l = lv;
    l.index = k;
    l.value = values[static_cast<size_t>(k)];
    info_.levels.push_back(l);
  }
}

Tensor FileReader::read(size_t sample, int64_t first, int64_t n, Span rows, Span cols) const {
  const NcFile& f = f_;
  const int64_t C = static_cast<int64_t>(channels_.size());
  Tensor out = empty({n, C, rows.count, cols.count}, DType::f64);
  double* dst = out.data<double>();
  // The tile's rows are one contiguous run of file rows (reversed when the file runs south to north);
  // its columns are one run of file columns, or two when the tile wraps past the file's last column.
  const int64_t file_row0 = flip_lat_ ? nlat_ - rows.start - rows.count : rows.start;
  const int64_t file_col0 = ((cols.start - shift_) % nlon_ + nlon_) % nlon_;
  const int64_t first_run = std::min(cols.count, nlon_ - file_col0);
  struct Run {
    int64_t file_col, count, tile_col;
  };
  std::vector<Run> runs = {{file_col0, first_run, 0}};
  if (first_run < cols.count) runs.push_back({0, cols.count - first_run, first_run});
  std::vector<double> buf;
  constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();
  for (int64_t c = 0; c < C; ++c) {
    const Channel& ch = channels_[static_cast<size_t>(c)];
    const int64_t states = ch.has_time ? n : 1;  // a time-invariant field is read once
    for (const Run& run : runs) {
      std::vector<size_t> start, count;
      if (ch.has_sample) start.push_back(sample), count.push_back(1);
      if (ch.has_time) start.push_back(static_cast<size_t>(first)), count.push_back(static_cast<size_t>(n));
      if (ch.level >= 0) start.push_back(static_cast<size_t>(ch.level)), count.push_back(1);
      start.push_back(static_cast<size_t>(file_row0)), count.push_back(static_cast<size_t>(rows.count));
      start.push_back(static_cast<size_t>(run.file_col)), count.push_back(static_cast<size_t>(run.count));
      buf.resize(static_cast<size_t>(states * rows.count * run.count));
      f.check(nc_get_vara_double(f.id(), ch.var, start.data(), count.data(), buf.data()),
              fmt::format("reading variable '{}' at times {}..{}", f.var_name(ch.var), first, first + n - 1));
      for (int64_t t = 0; t < n; ++t)
        for (int64_t i = 0; i < rows.count; ++i)
          for (int64_t j = 0; j < run.count; ++j) {
            const double raw = buf[static_cast<size_t>(((ch.has_time ? t : 0) * rows.count + i) * run.count + j)];
            const double value = std::isnan(raw) || ch.decode.is_missing(raw) ? kMissing : ch.decode.value(raw);
            if (std::isinf(value))  // an infinity stored, or a value that scale_factor overflows
              f.bad("variable '{}' has {} ({}) at sample {}, time {}, lat row {}, lon column {}; expected finite "
                    "values (missing ones as a fill value or NaN)",
                    ch.name, std::isinf(raw) ? "an infinite value" : "a value that overflows when unpacked", raw,
                    sample, first + t, file_row0 + i, run.file_col + j);
            const int64_t row = flip_lat_ ? rows.count - 1 - i : i;
            dst[((t * C + c) * rows.count + row) * cols.count + run.tile_col + j] = value;
          }
    }
  }
  return out;
}

// Several files, each contributing its trajectories, or joined into one along time.
class NetcdfSource final : public TrajectorySource {
 public:
  NetcdfSource(const std::vector<fs::path>& paths, const NetcdfReadOptions& opt) : dtype_(opt.dtype) {
    GS_CHECK(!paths.empty(), "read_netcdf: expected at least one file, got none");
    for (const auto& p : paths) {
      files_.push_back(std::make_unique<FileReader>(p, opt));
      if (files_.size() == 1) info_ = files_.front()->info();
      else check_same(files_.back()->info(), p, paths.front());
    }
    info_.states.clear();
    info_.start_times.clear();
    info_.notes.clear();
    for (const auto& file : files_)
      for (const auto& note : file->info().notes)
        if (std::find(info_.notes.begin(), info_.notes.end(), note) == info_.notes.end()) info_.notes.push_back(note);
    check_one_calendar();
    if (join_along_time(opt.join)) build_time_join();
    else build_trajectories();
  }
  const TrajectoryInfo& info() const override { return info_; }
  Tensor read(int64_t trajectory, int64_t first, int64_t n, Span rows, Span cols) const override {
    check_request(trajectory, first, n, rows, cols);
    std::vector<Tensor> parts;
    for (const Piece& p : pieces_[static_cast<size_t>(trajectory)]) {  // the files the window spans
      const int64_t lo = std::max(first, p.first_state), hi = std::min(first + n, p.first_state + p.states);
      if (lo < hi) parts.push_back(files_[p.file]->read(p.sample, lo - p.first_state, hi - lo, rows, cols));
    }
    const Tensor out = parts.size() == 1 ? parts[0] : cat(parts, 0);
    return dtype_ == DType::f64 ? out : cast_copy(out, dtype_);
  }

 private:
  // Part of a trajectory: states [first_state, first_state + states) are one sample of one file.
  struct Piece {
    size_t file, sample;
    int64_t first_state, states;
  };

  bool join_along_time(NetcdfJoin join) const {
    const bool no_samples = std::none_of(files_.begin(), files_.end(), [](const auto& f) { return f->has_sample_dim(); });
    const bool timed = std::all_of(files_.begin(), files_.end(), [](const auto& f) { return f->times().has_value(); });
    if (join == NetcdfJoin::trajectories || files_.size() < 2) return false;
    if (join == NetcdfJoin::time) {
      for (const auto& f : files_)
        GS_CHECK(!f->has_sample_dim() && f->times(),
                 "NetCDF file '{}': data.netcdf.join is 'time', which needs files of one trajectory each (no sample "
                 "dimension) with a time coordinate",
                 f->path().string());
      return true;
    }
    if (!no_samples || !timed) return false;
    return files_[1]->times()->first > files_[0]->times()->last;
  }

  // Times of two calendars cannot be compared (nor written back as one time axis): the files of one
  // data set, joined along time or read as separate trajectories, need one calendar.
  void check_one_calendar() const {
    const FileReader* first = nullptr;
    for (const auto& f : files_) {
      if (!f->times()) continue;
      if (!first) first = f.get();
      GS_CHECK(f->times()->units.calendar == first->times()->units.calendar,
               "NetCDF files '{}' and '{}' use the calendars {} and {}; the files of one data set need one calendar",
               first->path().string(), f->path().string(), calendar_name(first->times()->units.calendar),
               calendar_name(f->times()->units.calendar));
    }
  }

  void build_time_join() {
    const double dt = info_.dt_hours * 3600.0;
    std::vector<Piece> pieces;
    int64_t total = 0;
    for (size_t i = 0; i < files_.size(); ++i) {
      const FileTimes& t = *files_[i]->times();
      if (i > 0) {
        const FileReader& prev = *files_[i - 1];
        const FileTimes& p = *prev.times();
        const double expected = p.last + dt;
        GS_CHECK(std::abs(t.first - expected) <= 1e-6 * dt,
                 "NetCDF files '{}' and '{}' do not continue in time: the first ends at {} and the second starts at "
                 "{}, expected {} (one step of {:g} h later; {} calendar). Give the files in time order without gaps, "
                 "or set data.netcdf.join: trajectories to read each file as its own trajectory",
                 prev.path().string(), files_[i]->path().string(), format_time(p.units, p.values.back()),
                 format_time(t.units, t.values.front()), format_datetime(from_seconds(p.units.calendar, expected)),
                 info_.dt_hours, calendar_name(p.units.calendar));
      }
      pieces.push_back({i, 0, total, files_[i]->info().states.front()});
      total += files_[i]->info().states.front();
    }
    pieces_.push_back(std::move(pieces));
    info_.states = {total};
    info_.start_times = {files_.front()->times()->values.front()};
    const FileTimes& a = *files_.front()->times();
    const FileTimes& b = *files_.back()->times();
    info_.notes.push_back(fmt::format("{} files joined along time into one trajectory of {} states, {} to {} ({} "
                                      "calendar)",
                                      files_.size(), total, format_time(a.units, a.values.front()),
                                      format_time(b.units, b.values.back()), calendar_name(a.units.calendar)));
  }

  void build_trajectories() {
    const std::optional<FileTimes>& t0 = files_.front()->times();
    for (size_t i = 0; i < files_.size(); ++i) {
      const TrajectoryInfo& fi = files_[i]->info();
      for (size_t s = 0; s < fi.states.size(); ++s) {
        pieces_.push_back({{i, s, 0, fi.states[s]}});
        info_.states.push_back(fi.states[s]);
        const auto& t = files_[i]->times();
        if (t0 && t) info_.start_times.push_back(value_of(t0->units, t->first));
      }
    }
    if (info_.start_times.size() != info_.states.size()) info_.start_times.clear();
    if (files_.size() > 1)
      info_.notes.push_back(fmt::format("{} files read as {} separate trajectories (data.netcdf.join: {})",
                                        files_.size(), info_.states.size(),
                                        std::any_of(files_.begin(), files_.end(), [](const auto& f) { return f->has_sample_dim(); })
                                            ? "files with a sample dimension hold several trajectories each"
                                            : "they do not follow each other in time"));
  }

  void check_same(const TrajectoryInfo& next, const fs::path& path, const fs::path& first) const {
    auto where = [&] { return fmt::format("NetCDF file '{}' does not match '{}'", path.string(), first.string()); };
    GS_CHECK(next.variables == info_.variables, "{}: variables {} vs {}", where(), next.variables, info_.variables);
    GS_CHECK(next.grid == info_.grid && next.nlat == info_.nlat && next.nlon == info_.nlon,
             "{}: grid {} {}x{} vs {} {}x{}", where(), sphere::grid_name(next.grid), next.nlat, next.nlon,
             sphere::grid_name(info_.grid), info_.nlat, info_.nlon);
    GS_CHECK(std::abs(next.dt_hours - info_.dt_hours) <= 1e-9 * info_.dt_hours, "{}: time step {} vs {} hours",
             where(), next.dt_hours, info_.dt_hours);
    GS_CHECK(next.units == info_.units, "{}: units {} vs {}", where(), next.units, info_.units);
    for (size_t c = 0; c < next.levels.size() && c < info_.levels.size(); ++c)
      GS_CHECK(next.levels[c].value == info_.levels[c].value, "{}: channel {} is at level {} vs {}", where(),
               next.variables[c], next.levels[c].value, info_.levels[c].value);
  }

  DType dtype_;
  std::vector<std::unique_ptr<FileReader>> files_;
  std::vector<std::vector<Piece>> pieces_;  // per trajectory
  TrajectoryInfo info_;
};

}  // namespace

const char* join_name(NetcdfJoin j) {
  switch (j) {
    case NetcdfJoin::automatic: return "automatic";
    case NetcdfJoin::time: return "time";
    case NetcdfJoin::trajectories: return "trajectories";
  }
  return "unknown";
}

std::shared_ptr<TrajectorySource> open_netcdf(const std::vector<fs::path>& paths, const NetcdfReadOptions& opt) {
  std::vector<VariableRequest> ordered = in_role_order(opt.variables);
  NetcdfReadOptions o = opt;
  o.variables = std::move(ordered);
  auto source = std::make_shared<NetcdfSource>(paths, o);
  try {
    (void)source->info().layout();  // at least one predicted channel
  } catch (const Error& e) {
    fail("NetCDF file '{}': {}", paths.front().string(), e.what());
  }
  return source;
}

TrajectoryData read_netcdf(const fs::path& path, const NetcdfReadOptions& opt) {
  return read_netcdf(std::vector<fs::path>{path}, opt);
}

TrajectoryData read_netcdf(const std::vector<fs::path>& paths, const NetcdfReadOptions& opt) {
  auto source = open_netcdf(paths, opt);
  const TrajectoryInfo& i = source->info();
  TrajectoryData d{.variables = i.variables, .units = i.units, .grid = i.grid, .nlat = i.nlat, .nlon = i.nlon,
                   .dt_hours = i.dt_hours, .trajectories = {}};
  d.roles = i.roles;
  d.levels = i.levels;
  for (int64_t t = 0; t < i.trajectories(); ++t)
    d.trajectories.push_back(source->read(t, 0, i.states[static_cast<size_t>(t)]));
  d.validate();
  return d;
}

}  // namespace gs::models
