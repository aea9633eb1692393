// `gradsphere bench sht [--quick] [--csv FILE]`: forward (sht) and inverse (isht) spherical
// harmonic transforms, f32 and f64, on equiangular and legendre-gauss grids, each with
// torch-harmonics' default truncation (make_sht_spec). Per case:
//   build      the two Legendre tables (analysis + synthesis), built once, excluded from timings
//   ms/call    median wall time of one call on the whole batch (tools/bench/timing.h)
//   ms/field   ms/call / batch
//   GFLOP/s    effective rate of the Legendre contraction, counted as the dense, non-symmetric
//              complex-by-real contraction: flops = 2 * 2 * batch * sum_{m<mmax} (lmax - m) * nlat
//              (the kernel does about half of that through the equatorial symmetry, and the
//              longitude FFT is in the time but not in the count)
//   % sgemm    that rate against a 1024^3 Eigen sgemm measured in the same run (same threads)
//   peak MB    allocator high-water mark during the timed calls (reset after warm-up; it includes
//              the cached tables, the input and the outputs)
//   table MB   bytes of the Legendre table the direction uses (sht_table_bytes)
//   path       the Legendre path the automatic rule picks for this case (table or fly, see
//              ops/sphere/legendre/path.h), for one block of fields where the batch runs in blocks
//              (ops/sphere/sht_blocks.h); ms/call and the rest are the automatic choice's
//   table ms, fly ms   ms/call with each path forced, for the selection rule
// On the fly path the tables are dropped before the timed calls, so its peak MB excludes them.
// The side-by-side comparison with SHTns/ducc0 and torch-harmonics is tools/compare_sht.py.
#include <Eigen/Dense>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fmt/core.h>
#include <omp.h>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "engine/storage.h"
#include "ops/sphere/legendre/table.h"
#include "ops/sphere/legendre/contraction.h"
#include "ops/sphere/legendre/path.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/sht_blocks.h"
#include "tools/bench/bench_csv.h"
#include "tools/bench/benches.h"
#include "tools/bench/sht_cases.h"
#include "tools/bench/timing.h"

namespace gs::tools {
namespace {

using sphere::GridKind;
using Case = ShtCase;

struct Result {
  std::string grid, dir, dtype;
  int64_t nlat = 0, nlon = 0, lmax = 0, mmax = 0, batch = 0;
  double build_ms = 0, ms_call = 0, ms_field = 0, gflops = 0, pct_sgemm = 0;
  double peak_mb = 0, table_mb = 0;
  std::string path;
  double table_ms = 0, fly_ms = 0;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A 1024^3 sgemm through Eigen directly: the machine's GEMM rate with the same threads.
double eigen_sgemm_gflops(int64_t n) {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  M a = M::Random(n, n), b = M::Random(n, n), c(n, n);
  double s = median_seconds([&] { c.noalias() = a * b; }, 7);
  return 2.0 * n * n * n / s / 1e9;
}

// Repeats so that the timed runs take about `budget` seconds, within [lo, hi].
int repeats_for(double one_call, double budget, int lo, int hi) {
  int r = one_call > 0 ? static_cast<int>(budget / one_call) : hi;
  r = std::clamp(r, lo, hi);
  return r | 1;  // odd: the median is one run
}

std::vector<Result> run_case(const Case& c, DType dtype, double sgemm, bool quick) {
  NoGradGuard ng;
  sphere::clear_legendre_cache();
  const sphere::ShtSpec spec = sphere::make_sht_spec(c.grid, c.nlat, c.nlon);
  Allocator& alloc = allocator_for(DeviceType::cpu);

  // Table builds, timed on their own (sht_table_bytes builds a table that is not cached yet).
  auto t0 = std::chrono::steady_clock::now();
  const size_t ana_bytes = sphere::sht_table_bytes(spec, dtype, true);
  const double ana_build = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  const size_t syn_bytes = sphere::sht_table_bytes(spec, dtype, false);
  const double syn_build = seconds_since(t0);

  Tensor x = randn({c.batch, c.nlat, c.nlon}, {42, 7}, dtype);
  // Warm-up (FFTW plans, workspaces), also the estimate of one call.
  t0 = std::chrono::steady_clock::now();
  Tensor a = sphere::sht(x, spec);
  const double fwd_once = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  Tensor y = sphere::isht(a, spec);
  const double inv_once = seconds_since(t0);

  const double flops = legendre_contraction_flops(spec, c.batch);

  // Each direction with each path forced; the automatic choice (per direction: sht uses the
  // analysis table, isht the synthesis table) is timed last, after the
  // tables are dropped when it runs on the fly (so that its peak bytes are its own).
  auto key_of = [&](sphere::LegendreTableKind kind) {
    return sphere::LegendreTableKey{spec.grid, spec.nlat, spec.lmax, spec.mmax, spec.norm, spec.csphase, kind, dtype};
  };
  // The automatic rule decides per contraction, and a large batch without a tape runs in blocks of
  // fields (ops/sphere/sht_blocks.h): the path is the one for a block.
  const int64_t block = std::min(c.batch, sphere::detail::sht_fields_per_block(spec, dtype));
  const bool fly[2] = {sphere::use_recurrence(key_of(sphere::LegendreTableKind::analysis), block),
                       sphere::use_recurrence(key_of(sphere::LegendreTableKind::synthesis), block)};
  auto time_dir = [&](bool fwd, sphere::LegendrePath path, double once) {
    const sphere::LegendrePath previous = sphere::set_legendre_path(path);
    if (fwd) Tensor r = sphere::sht(x, spec);  // warm-up (builds the plan or table if needed)
    else Tensor r = sphere::isht(a, spec);
    const int reps = quick ? 3 : repeats_for(once, 1.5, 5, 41);
    alloc.reset_peak();
    const double s = fwd ? median_seconds([&] { Tensor r = sphere::sht(x, spec); }, reps)
                         : median_seconds([&] { Tensor r = sphere::isht(a, spec); }, reps);
    sphere::set_legendre_path(previous);
    return s;
  };
  double forced[2][2];  // [dir][fly]
  for (int dir = 0; dir < 2; ++dir)
    forced[dir][0] = time_dir(dir == 0, sphere::LegendrePath::table, dir == 0 ? fwd_once : inv_once);
  if (fly[0] || fly[1]) sphere::clear_legendre_cache();
  double auto_s[2], peak[2];
  for (int dir = 0; dir < 2; ++dir) {
    forced[dir][1] = time_dir(dir == 0, sphere::LegendrePath::recurrence, dir == 0 ? fwd_once : inv_once);
    if (fly[dir]) {
      auto_s[dir] = time_dir(dir == 0, sphere::LegendrePath::automatic, dir == 0 ? fwd_once : inv_once);
      peak[dir] = static_cast<double>(alloc.peak_bytes()) / 1e6;
    }
  }
  for (int dir = 0; dir < 2; ++dir) {
    if (fly[dir]) continue;
    auto_s[dir] = time_dir(dir == 0, sphere::LegendrePath::automatic, dir == 0 ? fwd_once : inv_once);
    peak[dir] = static_cast<double>(alloc.peak_bytes()) / 1e6;
  }

  std::vector<Result> out;
  for (int dir = 0; dir < 2; ++dir) {
    const bool fwd = dir == 0;
    const double s = auto_s[dir];
    Result r;
    r.grid = std::string(sphere::grid_name(c.grid));
    r.dir = fwd ? "sht" : "isht";
    r.dtype = std::string(dtype_name(dtype));
    r.nlat = c.nlat, r.nlon = c.nlon, r.lmax = spec.lmax, r.mmax = spec.mmax, r.batch = c.batch;
    r.build_ms = 1e3 * (fwd ? ana_build : syn_build);
    r.ms_call = 1e3 * s;
    r.ms_field = r.ms_call / static_cast<double>(c.batch);
    r.gflops = flops / s / 1e9;
    r.pct_sgemm = 100.0 * r.gflops / sgemm;
    r.peak_mb = peak[dir];
    r.table_mb = static_cast<double>(fwd ? ana_bytes : syn_bytes) / 1e6;
    r.path = fly[dir] ? "fly" : "table";
    r.table_ms = 1e3 * forced[dir][0];
    r.fly_ms = 1e3 * forced[dir][1];
    out.push_back(r);
  }
  sphere::clear_legendre_cache();
  return out;
}

}  // namespace

int bench_sht(const BenchOptions& opt) {
  const std::vector<Case> cases = selected_sht_cases(opt.quick, opt.sht_case);  // a wrong --case fails first
  const int threads = omp_get_max_threads();
  fmt::print("gradsphere bench sht  ({} threads{})\n", threads, opt.quick ? ", quick" : "");
  fmt::print("GFLOP/s = 2*2*batch*sum_{{m<mmax}}(lmax-m)*nlat / time (dense, non-symmetric Legendre "
             "contraction; FFT time included, not counted)\n");
  const double sgemm = eigen_sgemm_gflops(opt.quick ? 256 : 1024);
  fmt::print("Eigen sgemm {}^3, same run, {} threads: {:.1f} GFLOP/s\n", opt.quick ? 256 : 1024, threads, sgemm);
  fmt::print("peak MB: allocator high-water mark during the timed calls (tables + input + outputs); "
             "table MB: the table of that direction; build: that table's build, untimed elsewhere\n\n");

  const std::vector<DType> dtypes = {DType::f32, DType::f64};

  fmt::print("| {:<14} | {:>11} | {:>9} | {:>5} | {:<4} | {:<3} | {:>9} | {:>9} | {:>9} | {:>8} | {:>7} | "
             "{:>8} | {:>8} | {:<5} | {:>9} | {:>9} |\n",
             "grid", "nlat x nlon", "lmax,mmax", "batch", "dir", "dt", "build ms", "ms/call", "ms/field",
             "GFLOP/s", "% sgemm", "peak MB", "table MB", "path", "table ms", "fly ms");
  fmt::print("|{:-<16}|{:->13}|{:->11}|{:->7}|{:-<6}|{:-<5}|{:->11}|{:->11}|{:->11}|{:->10}|{:->9}|{:->10}|{:->10}|{:-<7}|{:->11}|{:->11}|\n",
             "", ":", ":", ":", "", "", ":", ":", ":", ":", ":", ":", ":", "", ":", ":");
  std::vector<Result> all;
  for (const auto& c : cases) {
    for (DType dt : dtypes) {
      for (const Result& r : run_case(c, dt, sgemm, opt.quick)) {
        fmt::print("| {:<14} | {:>11} | {:>9} | {:>5} | {:<4} | {:<3} | {:>9.1f} | {:>9.3f} | {:>9.4f} | {:>8.1f} | "
                   "{:>7.0f} | {:>8.2f} | {:>8.2f} | {:<5} | {:>9.3f} | {:>9.3f} |\n",
                   r.grid, fmt::format("{}x{}", r.nlat, r.nlon), fmt::format("{},{}", r.lmax, r.mmax), r.batch,
                   r.dir, r.dtype, r.build_ms, r.ms_call, r.ms_field, r.gflops, r.pct_sgemm, r.peak_mb, r.table_mb, r.path, r.table_ms, r.fly_ms);
        std::fflush(stdout);
        all.push_back(r);
      }
    }
  }

  if (!opt.csv.empty())
    write_bench_csv(opt.csv, "bench sht",
                    "grid,nlat,nlon,lmax,mmax,batch,dir,dtype,threads,build_ms,ms_call,ms_field,gflops,sgemm_gflops,"
                    "peak_mb,table_mb,path,table_ms,fly_ms",
                    [&](std::FILE* f) {
                      for (const auto& r : all)
                        fmt::print(f, "{},{},{},{},{},{},{},{},{},{:.3f},{:.6f},{:.6f},{:.3f},{:.3f},{:.3f},{:.3f},{},{:.6f},{:.6f}\n",
                                   r.grid, r.nlat, r.nlon, r.lmax, r.mmax, r.batch, r.dir, r.dtype, threads, r.build_ms,
                                   r.ms_call, r.ms_field, r.gflops, sgemm, r.peak_mb, r.table_mb, r.path, r.table_ms,
                                   r.fly_ms);
                    });
  return 0;
}

}  // namespace gs::tools
