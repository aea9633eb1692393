// Writing TrajectoryData as CF NetCDF (netcdf_io.h). Reading is netcdf_reader.cpp.
#include "models/data/netcdf_io.h"

#include <numeric>
#include <optional>

#include "models/atomic_file.h"
#include "models/data/cf_time.h"
#include "models/data/netcdf_file.h"
#include "ops/view.h"

namespace gs::models {

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

// The variables of a file (dimensions, coordinates, data variables with their CF attributes and
// global attributes), definitions ended. time_len: a length, or NC_UNLIMITED (a file written step
// by step); samples > 0: a sample dimension first.
struct Defined {
  int time_var = -1, lat_var = -1, lon_var = -1, sample_var = -1, member_var = -1;
  std::vector<int> vars;
};

Defined define_file(const NcFile& f, const TrajectoryInfo& data, const NetcdfWriteOptions& opt, size_t time_len,
                    size_t samples, nc_type type) {
  const int64_t C = data.channels();
  int sample_dim = -1, member_dim = -1, time_dim, lat_dim, lon_dim;
  Defined d;
  if (samples > 0) f.check(nc_def_dim(f.id(), "sample", samples, &sample_dim), "defining dim 'sample'");
  if (opt.members > 0)
    f.check(nc_def_dim(f.id(), "member", static_cast<size_t>(opt.members), &member_dim), "defining dim 'member'");
  f.check(nc_def_dim(f.id(), "time", time_len, &time_dim), "defining dim 'time'");
  f.check(nc_def_dim(f.id(), "lat", static_cast<size_t>(data.nlat), &lat_dim), "defining dim 'lat'");
  f.check(nc_def_dim(f.id(), "lon", static_cast<size_t>(data.nlon), &lon_dim), "defining dim 'lon'");
  if (samples > 0) d.sample_var = define_coordinate(f, "sample", NC_INT, sample_dim, {{"long_name", "trajectory index"}});
  if (opt.members > 0)
    d.member_var = define_coordinate(f, "member", NC_INT, member_dim,
                                     {{"long_name", "ensemble member"}, {"standard_name", "realization"}});
  d.time_var = define_coordinate(f, "time", NC_DOUBLE, time_dim,
                                 {{"standard_name", "time"},
                                  {"long_name", "time"},
                                  {"units", opt.time_units.empty() ? "hours since " + opt.reference_time : opt.time_units},
                                  {"calendar", calendar_name(parse_calendar(opt.calendar))},
                                  {"axis", "T"}});
  d.lat_var = define_coordinate(
      f, "lat", NC_DOUBLE, lat_dim,
      {{"standard_name", "latitude"}, {"long_name", "latitude"}, {"units", "degrees_north"}, {"axis", "Y"}});
  d.lon_var = define_coordinate(
      f, "lon", NC_DOUBLE, lon_dim,
      {{"standard_name", "longitude"}, {"long_name", "longitude"}, {"units", "degrees_east"}, {"axis", "X"}});
  std::vector<int> dims = {time_dim, lat_dim, lon_dim};
  std::vector<size_t> chunks = {1, static_cast<size_t>(data.nlat), static_cast<size_t>(data.nlon)};
  if (opt.members > 0) {
    dims.insert(dims.begin(), member_dim);
    chunks.insert(chunks.begin(), 1);
  }
  if (samples > 0) {
    dims.insert(dims.begin(), sample_dim);
    chunks.insert(chunks.begin(), 1);
  }
  for (int64_t c = 0; c < C; ++c) {
    const std::string& name = data.variables[c];
    int var;
    f.check(nc_def_var(f.id(), name.c_str(), type, static_cast<int>(dims.size()), dims.data(), &var),
            fmt::format("defining variable '{}'", name));
    if (opt.deflate_level > 0 || time_len == NC_UNLIMITED) {
      // One chunk per field: a reader of one time step decompresses only that step (and an
      // unlimited dimension needs chunks anyway).
      f.check(nc_def_var_chunking(f.id(), var, NC_CHUNKED, chunks.data()), "chunking '" + name + "'");
      if (time_len == NC_UNLIMITED) {
        // A chunk is written once, whole: a cache of a few chunks, fully written ones evicted first
        // (preemption 1), keeps a streamed file's memory flat however many states it gets.
        const size_t chunk_bytes = static_cast<size_t>(data.nlat * data.nlon) * (type == NC_FLOAT ? 4 : 8);
        f.check(nc_set_var_chunk_cache(f.id(), var, 4 * chunk_bytes, 7, 1.0f), "sizing the chunk cache of '" + name + "'");
      }
      if (opt.deflate_level > 0)
        f.check(nc_def_var_deflate(f.id(), var, 1, 1, opt.deflate_level), "compressing '" + name + "'");
    }
    put_text(f, var, "long_name", opt.long_names.empty() ? name : opt.long_names[c]);
    if (!data.units.empty() && !data.units[c].empty()) put_text(f, var, "units", data.units[c]);
    if (!data.roles.empty()) put_text(f, var, "gradsphere_role", role_name(data.roles[c]));
    if (!data.levels.empty() && data.levels[c].has_level()) {
      // The level this channel is of its variable over levels (the reader's T_0, T_1, ...).
      const ChannelLevel& l = data.levels[c];
      f.check(nc_put_att_double(f.id(), var, "level", NC_DOUBLE, 1, &l.value), "writing attribute 'level'");
      put_text(f, var, "level_coordinate", l.coordinate);
      if (!l.units.empty()) put_text(f, var, "level_units", l.units);
    }
    d.vars.push_back(var);
  }
  put_text(f, NC_GLOBAL, "Conventions", "CF-1.8");
  put_text(f, NC_GLOBAL, "title", opt.title);
  put_text(f, NC_GLOBAL, "history", "created by gradsphere" + (opt.history.empty() ? "" : "\n" + opt.history));
  put_text(f, NC_GLOBAL, "gradsphere_grid", std::string(sphere::grid_name(data.grid)));
  f.check(nc_put_att_double(f.id(), NC_GLOBAL, "gradsphere_dt_hours", NC_DOUBLE, 1, &data.dt_hours),
          "writing attribute 'gradsphere_dt_hours'");
  for (const auto& [key, value] : opt.attributes) put_text(f, NC_GLOBAL, key.c_str(), value);
  f.check(nc_enddef(f.id()), "finishing the definitions");
  f.check(nc_put_var_double(f.id(), d.lat_var, latitudes_deg(data.grid, data.nlat).data()), "writing 'lat'");
  f.check(nc_put_var_double(f.id(), d.lon_var, longitudes_deg(data.nlon).data()), "writing 'lon'");
  return d;
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
  GS_CHECK(opt.members >= 0 && (opt.members == 0 || data.trajectories.size() % static_cast<size_t>(opt.members) == 0),
           "{}: expected trajectories in whole ensembles of {} members, got {} trajectories", where, opt.members,
           data.trajectories.size());
  const size_t M = opt.members > 0 ? static_cast<size_t>(opt.members) : 1;
  const size_t samples = data.trajectories.size() / M;
  const bool multi = samples > 1;

  AtomicFile file(path);
  file.close_descriptor();  // NetCDF writes the temporary file by its path
  NcFile f = NcFile::create(file.temp_path(), path);
  const nc_type type = first.dtype() == DType::f32 ? NC_FLOAT : NC_DOUBLE;
  const Defined d = define_file(f, data.info(), opt, static_cast<size_t>(T), multi ? samples : 0, type);
  const int time_var = d.time_var, sample_var = d.sample_var;
  const std::vector<int>& vars = d.vars;

  std::vector<double> times(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) times[t] = opt.start_hours + static_cast<double>(t) * data.dt_hours;
  f.check(nc_put_var_double(f.id(), time_var, times.data()), "writing 'time'");
  if (multi) {
    std::vector<int> index(samples);
    std::iota(index.begin(), index.end(), 0);
    f.check(nc_put_var_int(f.id(), sample_var, index.data()), "writing 'sample'");
  }
  if (opt.members > 0) {
    std::vector<int> index(M);
    std::iota(index.begin(), index.end(), 0);
    f.check(nc_put_var_int(f.id(), d.member_var, index.data()), "writing 'member'");
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
        if (opt.members > 0) {
          start.insert(start.begin(), s % M);
          count.insert(count.begin(), 1);
        }
        if (multi) {
          start.insert(start.begin(), s / M);
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

namespace gs::models {

struct NetcdfStreamWriter::File {
  explicit File(const fs::path& path) : atomic(path) { atomic.close_descriptor(); }
  AtomicFile atomic;
  std::optional<NcFile> nc;
  Defined defined;
};

NetcdfStreamWriter::NetcdfStreamWriter(const fs::path& path, const TrajectoryInfo& like, const NetcdfWriteOptions& opt)
    : path_(path), like_(like) {
  GS_CHECK(like.channels() >= 1 && like.nlat >= 1 && like.nlon >= 1,
           "NetcdfStreamWriter('{}'): expected channels on a grid, got {} channels on {}x{}", path.string(),
           like.channels(), like.nlat, like.nlon);
  GS_CHECK(like.dtype == DType::f32 || like.dtype == DType::f64, "NetcdfStreamWriter('{}'): expected f32 or f64, got {}",
           path.string(), dtype_name(like.dtype));
  GS_CHECK(opt.members == 0, "NetcdfStreamWriter('{}'): streams one trajectory; an ensemble's members ({}) go through "
           "write_netcdf", path.string(), opt.members);
  file_ = std::make_unique<File>(path);
  file_->nc.emplace(NcFile::create(file_->atomic.temp_path(), path));
  file_->defined = define_file(*file_->nc, like, opt, NC_UNLIMITED, 0, like.dtype == DType::f32 ? NC_FLOAT : NC_DOUBLE);
}

NetcdfStreamWriter::~NetcdfStreamWriter() = default;  // an unclosed file is removed (AtomicFile)

void NetcdfStreamWriter::append(const Tensor& state, double time_value) {
  GS_CHECK(file_ != nullptr, "NetcdfStreamWriter('{}'): append after close", path_.string());
  GS_CHECK(state.defined() && state.dim() == 3 && state.size(0) == like_.channels() && state.size(1) == like_.nlat &&
               state.size(2) == like_.nlon,
           "NetcdfStreamWriter('{}'): expected a state (C, H, W) = ({}, {}, {}), got {}", path_.string(),
           like_.channels(), like_.nlat, like_.nlon, state.meta_str());
  const NcFile& f = *file_->nc;
  const size_t t = static_cast<size_t>(states_);
  const Tensor x = contiguous_copy(to(state.device().is_cpu() ? state : to_device_copy(state, Device::cpu()), like_.dtype));
  const size_t field = static_cast<size_t>(like_.nlat * like_.nlon);
  for (int64_t c = 0; c < like_.channels(); ++c) {
    const size_t start[3] = {t, 0, 0};
    const size_t count[3] = {1, static_cast<size_t>(like_.nlat), static_cast<size_t>(like_.nlon)};
    const int var = file_->defined.vars[static_cast<size_t>(c)];
    const int rc = like_.dtype == DType::f32 ? nc_put_vara_float(f.id(), var, start, count, x.data<float>() + c * field)
                                             : nc_put_vara_double(f.id(), var, start, count, x.data<double>() + c * field);
    f.check(rc, fmt::format("writing variable '{}' at step {}", like_.variables[static_cast<size_t>(c)], t));
  }
  const size_t one = 1;
  f.check(nc_put_vara_double(f.id(), file_->defined.time_var, &t, &one, &time_value), "writing 'time'");
  ++states_;
}

void NetcdfStreamWriter::close() {
  GS_CHECK(file_ != nullptr, "NetcdfStreamWriter('{}'): closed twice", path_.string());
  file_->nc->close();
  file_->atomic.commit();
  file_.reset();
}

}  // namespace gs::models
