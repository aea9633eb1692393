// The checked NetCDF file and the CF decoding (netcdf_file.h).
#include "models/data/netcdf_file.h"

#include <sys/statvfs.h>
#include <unistd.h>

#include "models/atomic_file.h"

namespace gs::models {

std::string space_left(const fs::path& path) {
  struct statvfs st {};
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (::statvfs(dir.c_str(), &st) != 0) return fmt::format("its directory: {}", errno_text(errno));
  const double free_bytes = static_cast<double>(st.f_bavail) * static_cast<double>(st.f_frsize);
  return fmt::format("{:.3g} MB free on its file system{}", free_bytes / 1e6,
                     ::access(dir.c_str(), W_OK) != 0 ? fmt::format("; its directory is not writable: {}", errno_text(errno)) : "");
}

Decoding Decoding::of(const NcFile& f, int var) {
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

}  // namespace gs::models
