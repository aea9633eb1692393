// `gradsphere bench sht --device cuda [--quick] [--csv FILE]`: the forward (sht) and inverse (isht)
// transforms on a GPU, f32 and f64, on the CPU benchmark's cases (bench_sht.cpp), timed with CUDA
// events. Each figure stands next to a baseline measured in the same run on the same GPU:
//   ms/call    median of one call on the whole batch
//   GFLOP/s    bench_sht's count: 2*2*batch*sum_{m<mmax}(lmax-m)*nlat (the dense complex-by-real
//              Legendre contraction; the FFT is in the time, not in the count). An effective rate
//              in either form: the GEMMs also multiply the l < m zeros, the kernels about half
//              of the count (the equatorial symmetry)
//   % gemm     that rate against a square cuBLAS GEMM of the same dtype, 4096^3 (2048^3 quick)
//   GB/s       bytes the call must move at least: its input, its output and the Legendre table
//              of the form it runs (table MB below), per second
//   % copy     that rate against a device-to-device copy of 1 GiB (64 MiB quick)
//   peak MB    the device allocator's high-water mark over the timed calls: the cached table, the
//              input, the output and the intermediates (FFT output, permuted copies)
//   table MB   that direction's table on the device: dense (mmax, lmax, nlat) for gemm, the CPU's
//              blocked table (northern rows, l >= m) for kernels
// The path: cuFFT along longitude, then the Legendre contraction in the process's device form
// (ops/sphere/legendre/path.h): batched GEMMs on dense tables (gemm, the default) or the
// blocked-table kernels (GS_DEVICE_SPHERE=kernels); table MB is that form's table. torch-harmonics
// on the same GPU, side by side: tools/compare_cuda.py.
#include <fmt/core.h>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/cuda_runtime.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "engine/storage.h"
#include "ops/linalg_cuda.h"
#include "ops/sphere/legendre/path.h"
#include "ops/sphere/legendre/contraction.h"
#include "ops/sphere/legendre/table.h"
#include "ops/sphere/sht.h"
#include "tools/bench/bench_csv.h"
#include "tools/bench/benches.h"
#include "tools/bench/cuda_timing.h"
#include "tools/bench/sht_cases.h"

namespace gs::tools {
namespace {

using sphere::GridKind;
using Case = ShtCase;

struct Result {
  std::string grid, dir, dtype;
  int64_t nlat = 0, nlon = 0, lmax = 0, mmax = 0, batch = 0;
  double ms_call = 0, gflops = 0, pct_gemm = 0, gbs = 0, pct_copy = 0, peak_mb = 0, table_mb = 0;
};

struct Baselines {
  double copy_gbs = 0;
  double gemm_gflops[2] = {0, 0};  // f32, f64
};

Tensor device_randn(const Shape& sizes, uint64_t stream, DType dtype, Device d) {
  return to_device_copy(randn(sizes, {42, stream}, dtype), d);
}

Baselines measure_baselines(Device d, bool quick) {
  Baselines b;
  const int64_t n = quick ? int64_t{1} << 24 : int64_t{1} << 28;  // f32 elements
  Tensor src = empty({n}, DType::f32, d), dst = empty({n}, DType::f32, d);
  const double copy_ms = median_ms(d, [&] {
    cuda::copy_device_to_device(dst.raw_data(), src.raw_data(), static_cast<size_t>(n) * 4, cuda::current_stream(d.index));
  });
  b.copy_gbs = 2.0 * static_cast<double>(n) * 4 / (copy_ms * 1e-3) / 1e9;  // read + write
  const int64_t g = quick ? 2048 : 4096;
  for (int i = 0; i < 2; ++i) {
    const DType dt = i == 0 ? DType::f32 : DType::f64;
    Tensor a = device_randn({g, g}, 5, dt, d), bb = device_randn({g, g}, 6, dt, d), c = empty({g, g}, dt, d);
    const double ms = median_ms(d, [&] { cuda_blas::raw_square_gemm(c, a, bb); });
    b.gemm_gflops[i] = 2.0 * static_cast<double>(g) * g * g / (ms * 1e-3) / 1e9;
  }
  return b;
}

std::vector<Result> run_case(const Case& c, DType dtype, const Baselines& base, Device d) {
  NoGradGuard ng;
  sphere::clear_legendre_cache();
  const sphere::ShtSpec spec = sphere::make_sht_spec(c.grid, c.nlat, c.nlon);
  const double esize = static_cast<double>(dtype_size(dtype));
  const bool blocked = sphere::device_sphere_form() == sphere::DeviceSphereForm::kernels;
  const double dense_bytes = static_cast<double>(spec.mmax) * spec.lmax * spec.nlat * esize;
  const double flops = legendre_contraction_flops(spec, c.batch);

  Tensor x = device_randn({c.batch, c.nlat, c.nlon}, 7, dtype, d);
  Tensor a = sphere::sht(x, spec);  // also builds and uploads the analysis table
  Tensor y = sphere::isht(a, spec);
  const double grid_bytes = static_cast<double>(x.numel()) * esize;
  const double coeff_bytes = static_cast<double>(a.numel()) * 2 * esize;  // complex

  std::vector<Result> out;
  for (int dir = 0; dir < 2; ++dir) {
    const bool fwd = dir == 0;
    reset_peak_memory(d);
    const double ms = fwd ? median_ms(d, [&] { Tensor r = sphere::sht(x, spec); })
                          : median_ms(d, [&] { Tensor r = sphere::isht(a, spec); });
    Result r;
    r.grid = std::string(sphere::grid_name(c.grid));
    r.dir = fwd ? "sht" : "isht";
    r.dtype = std::string(dtype_name(dtype));
    r.nlat = c.nlat, r.nlon = c.nlon, r.lmax = spec.lmax, r.mmax = spec.mmax, r.batch = c.batch;
    r.ms_call = ms;
    r.gflops = flops / (ms * 1e-3) / 1e9;
    r.pct_gemm = 100.0 * r.gflops / base.gemm_gflops[dtype == DType::f32 ? 0 : 1];
    const double table_bytes =
        blocked ? static_cast<double>(sphere::sht_table_bytes(spec, dtype, fwd)) : dense_bytes;
    r.gbs = (grid_bytes + coeff_bytes + table_bytes) / (ms * 1e-3) / 1e9;
    r.pct_copy = 100.0 * r.gbs / base.copy_gbs;
    r.peak_mb = static_cast<double>(memory_stats(d).peak) / 1e6;
    r.table_mb = table_bytes / 1e6;
    out.push_back(r);
  }
  sphere::clear_legendre_cache();
  return out;
}

}  // namespace

int bench_sht_cuda(const BenchOptions& opt, Device d) {
  cuda::require_device(d, "bench sht --device");
  fmt::print("gradsphere bench sht --device {}{}\n", d, opt.quick ? "  (quick)" : "");
  const bool blocked = sphere::device_sphere_form() == sphere::DeviceSphereForm::kernels;
  const char* form = sphere::device_sphere_form_name(sphere::device_sphere_form());
  fmt::print("path: cuFFT + the Legendre contraction in the {} form ({}); TF32 {}\n", form,
             blocked ? "blocked-table kernels, GS_DEVICE_SPHERE=kernels" : "batched cuBLAS GEMMs on dense tables",
             allow_tf32() ? "on" : "off");
  const Baselines base = measure_baselines(d, opt.quick);
  fmt::print("same run: D2D copy {:.0f} GB/s; cuBLAS GEMM {:.0f} GFLOP/s (f32), {:.0f} GFLOP/s (f64)\n\n",
             base.copy_gbs, base.gemm_gflops[0], base.gemm_gflops[1]);

  std::vector<Case> cases = selected_sht_cases(opt.quick, opt.sht_case);
  // Also one field at 180x360, the size of torch-harmonics' published GPU figures.
  if (!opt.quick) {
    cases.insert(cases.begin() + 2, {GridKind::equiangular, 181, 360, 1});
    cases.insert(cases.begin() + 7, {GridKind::legendre_gauss, 180, 360, 1});
  }
  fmt::print("| {:<14} | {:>11} | {:>9} | {:>5} | {:<4} | {:<3} | {:>9} | {:>9} | {:>6} | {:>8} | {:>6} | {:>9} | {:>9} |\n",
             "grid", "nlat x nlon", "lmax,mmax", "batch", "dir", "dt", "ms/call", "GFLOP/s", "% gemm", "GB/s",
             "% copy", "peak MB", "table MB");
  fmt::print("|{:-<16}|{:->13}|{:->11}|{:->7}|{:-<6}|{:-<5}|{:->11}|{:->11}|{:->8}|{:->10}|{:->8}|{:->11}|{:->11}|\n", "",
             ":", ":", ":", "", "", ":", ":", ":", ":", ":", ":", ":");
  std::vector<Result> all;
  for (const Case& c : cases) {
    for (DType dt : {DType::f32, DType::f64}) {
      for (const Result& r : run_case(c, dt, base, d)) {
        fmt::print("| {:<14} | {:>11} | {:>9} | {:>5} | {:<4} | {:<3} | {:>9.4f} | {:>9.1f} | {:>6.1f} | {:>8.0f} | "
                   "{:>6.1f} | {:>9.1f} | {:>9.1f} |\n",
                   r.grid, fmt::format("{}x{}", r.nlat, r.nlon), fmt::format("{},{}", r.lmax, r.mmax), r.batch, r.dir,
                   r.dtype, r.ms_call, r.gflops, r.pct_gemm, r.gbs, r.pct_copy, r.peak_mb, r.table_mb);
        std::fflush(stdout);
        all.push_back(r);
      }
    }
  }
  if (!opt.csv.empty())
    write_bench_csv(opt.csv, "bench sht --device",
                    "grid,nlat,nlon,lmax,mmax,batch,dir,dtype,device,form,ms_call,gflops,gemm_gflops,gbs,copy_gbs,"
                    "peak_mb,table_mb",
                    [&](std::FILE* f) {
                      for (const Result& r : all)
                        fmt::print(f, "{},{},{},{},{},{},{},{},{},{},{:.6f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f},{:.3f}\n",
                                   r.grid, r.nlat, r.nlon, r.lmax, r.mmax, r.batch, r.dir, r.dtype, d, form, r.ms_call,
                                   r.gflops, base.gemm_gflops[r.dtype == "f32" ? 0 : 1], r.gbs, base.copy_gbs,
                                   r.peak_mb, r.table_mb);
                    });
  return 0;
}

}  // namespace gs::tools
