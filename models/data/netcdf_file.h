// The NetCDF C library behind a small class (internal to models/data): an open file whose every
// call is checked, so a failure names the file (and, when writing, what its file system has left),
// and the CF decoding of stored numbers into values (fill values, missing_value, valid ranges,
// _Unsigned, scale_factor and add_offset), as xarray decodes them.
#pragma once
#include <netcdf.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/error.h"

namespace gs::models {

namespace fs = std::filesystem;

// "12.3 MB free on its file system" for the directory of `path`, or why that is unknown.
std::string space_left(const fs::path& path);

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
  nc_type var_type(int var) const {
    nc_type t;
    check(nc_inq_vartype(id_, var, &t), "reading the type of '" + var_name(var) + "'");
    return t;
  }
  int var_count() const {
    int n = 0;
    check(nc_inq_nvars(id_, &n), "listing variables");
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

  static Decoding of(const NcFile& f, int var);

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
    if (std::isnan(raw) || (fill && raw == *fill)) return true;  // an infinity is a bad value, not a missing one
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

}  // namespace gs::models
