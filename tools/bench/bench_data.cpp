// `[mpiexec -n N] gradsphere bench data [--quick] [--grid DxHxW] [--csv FILE]`: the time a training
// step spends reading its batch from NetCDF files (tile reads, normalisation) against the step
// itself, for an ACE-like data set: 4 variables over 13 pressure levels and 12 single-level fields,
// 64 channels, written by this benchmark through the netCDF C API (as a model's output would be) and
// read as training reads them (levels split into channels, hyperslabs of this rank's tile). The
// model is an SFNO of the data's width on the data's grid. Each rank reports its own split; rank 0
// prints the slowest rank's.
#include <netcdf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <random>

#include <fmt/format.h>

#include "distributed/world.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "models/data/dataset.h"
#include "tools/bench/bench_csv.h"
#include "tools/bench/benches.h"
#include "tools/train_run.h"

namespace gs::tools {
namespace {

namespace fs = std::filesystem;

void nc_ok(int status, const char* what) {
  GS_CHECK(status == NC_NOERR, "bench data: writing the data file failed at {}: {}", what, nc_strerror(status));
}

const char* kLevelVariables[] = {"T", "U", "V", "Q"};
constexpr int64_t kLevels = 13, kSurface = 12;

// states x (4 x 13 + 12) channels on a legendre-gauss nlat x 2 nlat grid, f32, smooth random fields.
void write_data(const fs::path& path, int64_t nlat, int64_t states) {
  const int64_t nlon = 2 * nlat;
  int id, time_dim, lev_dim, lat_dim, lon_dim, v;
  nc_ok(nc_create(path.c_str(), NC_CLOBBER | NC_NETCDF4, &id), "create");
  nc_ok(nc_def_dim(id, "time", NC_UNLIMITED, &time_dim), "time");
  nc_ok(nc_def_dim(id, "plev", static_cast<size_t>(kLevels), &lev_dim), "plev");
  nc_ok(nc_def_dim(id, "lat", static_cast<size_t>(nlat), &lat_dim), "lat");
  nc_ok(nc_def_dim(id, "lon", static_cast<size_t>(nlon), &lon_dim), "lon");
  auto text = [&](int var, const char* name, const std::string& value) {
    nc_ok(nc_put_att_text(id, var, name, value.size(), value.c_str()), name);
  };
  int time, plev, lat, lon;
  nc_ok(nc_def_var(id, "time", NC_DOUBLE, 1, &time_dim, &time), "time var");
  text(time, "units", "hours since 1979-01-01 00:00:00");
  text(time, "calendar", "proleptic_gregorian");
  nc_ok(nc_def_var(id, "plev", NC_DOUBLE, 1, &lev_dim, &plev), "plev var");
  text(plev, "units", "hPa");
  text(plev, "positive", "down");
  nc_ok(nc_def_var(id, "lat", NC_DOUBLE, 1, &lat_dim, &lat), "lat var");
  text(lat, "units", "degrees_north");
  nc_ok(nc_def_var(id, "lon", NC_DOUBLE, 1, &lon_dim, &lon), "lon var");
  text(lon, "units", "degrees_east");
  std::vector<int> level_vars, surface_vars;
  for (const char* name : kLevelVariables) {
    const int dims[4] = {time_dim, lev_dim, lat_dim, lon_dim};
    nc_ok(nc_def_var(id, name, NC_FLOAT, 4, dims, &v), name);
    level_vars.push_back(v);
  }
  for (int64_t k = 0; k < kSurface; ++k) {
    const int dims[3] = {time_dim, lat_dim, lon_dim};
    nc_ok(nc_def_var(id, fmt::format("S{}", k).c_str(), NC_FLOAT, 3, dims, &v), "surface");
    surface_vars.push_back(v);
  }
  nc_ok(nc_enddef(id), "enddef");
  const std::vector<double> levels = {1000, 925, 850, 700, 600, 500, 400, 300, 250, 200, 150, 100, 50};
  nc_ok(nc_put_var_double(id, plev, levels.data()), "plev values");
  nc_ok(nc_put_var_double(id, lat, models::latitudes_deg(sphere::GridKind::legendre_gauss, nlat).data()), "lat values");
  nc_ok(nc_put_var_double(id, lon, models::longitudes_deg(nlon).data()), "lon values");
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  std::vector<float> field(static_cast<size_t>(nlat * nlon));
  for (int64_t t = 0; t < states; ++t) {
    const size_t ts = static_cast<size_t>(t), one = 1;
    const double hours = 6.0 * static_cast<double>(t);
    nc_ok(nc_put_vara_double(id, time, &ts, &one, &hours), "time value");
    auto put = [&](int var, std::vector<size_t> start, std::vector<size_t> count) {
      for (auto& x : field) x = normal(gen);
      nc_ok(nc_put_vara_float(id, var, start.data(), count.data(), field.data()), "values");
    };
    for (int var : level_vars)
      for (int64_t l = 0; l < kLevels; ++l)
        put(var, {ts, static_cast<size_t>(l), 0, 0}, {1, 1, static_cast<size_t>(nlat), static_cast<size_t>(nlon)});
    for (int var : surface_vars) put(var, {ts, 0, 0}, {1, static_cast<size_t>(nlat), static_cast<size_t>(nlon)});
  }
  nc_ok(nc_close(id), "close");
}

}  // namespace

int bench_data(const BenchOptions& opt) {
  auto world = dist::world_communicator();
  const int64_t nlat = opt.quick ? 16 : 64, states = opt.quick ? 8 : 24, steps = opt.quick ? 2 : 8;
  // A file of its own per run (rank 0's pid, shared with the others), so runs at once do not clash.
  Tensor tag = from_vector(std::vector<int64_t>{static_cast<int64_t>(::getpid())});
  world->broadcast(tag, 0);
  const fs::path dir = fs::temp_directory_path() / fmt::format("gradsphere-bench-data-{}", tag.item<int64_t>());
  const fs::path file = dir / fmt::format("era_like_{}.nc", nlat);
  if (world->rank() == 0) {
    fs::create_directories(dir);
    write_data(file, nlat, states);
  }
  world->barrier();
  const std::string yaml = fmt::format(R"(seed: 0
data:
  source: netcdf
  netcdf:
    train_files: [{0}]
    validation_files: [{0}]
model:
  embed_dim: {1}
  num_layers: 4
  scale_factor: 1
training:
  steps: {2}
  batch_size: 4
  rollout_steps: 2
validation:
  samples: 1
  lead_steps: 1
)",
                                       file.string(), opt.quick ? 8 : 64, steps + 1);
  const TrainConfig cfg = train_config_from_string(yaml, "bench data");
  const dist::ProcessGrid grid = make_process_grid(opt.grid, cfg, "bench data");
  TrainingRun run(cfg, grid);
  run.train_step();  // warm-up: tables, plans, the file's first reads
  const TrainingRun::StepTiming before = run.step_timing();
  for (int64_t s = 0; s < steps; ++s) run.train_step();
  const TrainingRun::StepTiming& t = run.step_timing();
  const double data_ms = 1e3 * (t.data_seconds - before.data_seconds) / static_cast<double>(steps);
  const double step_ms = 1e3 * (t.compute_seconds - before.compute_seconds) / static_cast<double>(steps);
  // The slowest rank's figures (every rank waits for it).
  Tensor worst = from_vector(std::vector<double>{data_ms, step_ms});
  world->all_reduce(worst, dist::ReduceOp::max);
  const auto w = worst.to_vector<double>();
  if (world->rank() == 0) {
    const auto& info = run.data().info();
    fmt::print("gradsphere bench data  (grid {}, {} rank(s))\n", grid.spec().str(), world->size());
    fmt::print("data: {} channels ({} variables over {} levels + {} single-level) on legendre-gauss {}x{}, f32, "
               "batch 4 x (1 + 2 rollout steps) states read per step as this rank's tile\n",
               info.channels(), std::size(kLevelVariables), kLevels, kSurface, info.nlat, info.nlon);
    fmt::print("model: SFNO embed {} x 4 layers; {} timed steps after one warm-up\n\n", opt.quick ? 8 : 64, steps);
    fmt::print("| read + normalise ms/step | train ms/step | data share of the step |\n|---:|---:|---:|\n");
    fmt::print("| {:.1f} | {:.1f} | {:.1f}% |\n", w[0], w[1], 100.0 * w[0] / (w[0] + w[1]));
    if (!opt.csv.empty())
      write_bench_csv(opt.csv, "bench data", "nlat,nlon,channels,ranks,grid,data_ms,step_ms,data_share",
                      [&](std::FILE* f) {
                        fmt::print(f, "{},{},{},{},{},{:.3f},{:.3f},{:.4f}\n", info.nlat, info.nlon, info.channels(),
                                   world->size(), grid.spec().str(), w[0], w[1], w[0] / (w[0] + w[1]));
                      });
  }
  world->barrier();
  if (world->rank() == 0) fs::remove_all(dir);
  return 0;
}

}  // namespace gs::tools
