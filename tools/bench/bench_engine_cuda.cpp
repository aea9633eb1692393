// `gradsphere bench engine --device cuda`: the engine's figures on a GPU, each next to a baseline
// measured in the same run on the same GPU, timed with CUDA events:
//   elementwise   add() and gelu() in GB/s against a device-to-device cudaMemcpy (aim: >= 80%)
//   reduction     sum() in GB/s against the same copy's read bandwidth
//   matmul        GFLOP/s against cublasGemmEx called directly (aim: >= 95%); TF32 off
//   allocator     current, peak and reserved bytes after the runs
#include <fmt/core.h>

#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/cuda_runtime.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/linalg_cuda.h"
#include "ops/reduce.h"
#include "tools/bench/benches.h"
#include "tools/bench/cuda_timing.h"

namespace gs::tools {
namespace {

struct Row {
  std::string what, ours, baseline, ratio;
};

Tensor device_randn(const Shape& sizes, uint64_t stream, DType dtype, Device d) {
  return to_device_copy(randn(sizes, {7, stream}, dtype), d);
}

double copy_gbs(Device d, int64_t n) {
  Tensor a = empty({n}, DType::f32, d), b = empty({n}, DType::f32, d);
  const double ms = median_ms(d, [&] {
    cuda::copy_device_to_device(b.raw_data(), a.raw_data(), n * 4, cuda::current_stream(d.index));
  });
  return 2.0 * n * 4 / (ms * 1e-3) / 1e9;  // read n floats, write n floats
}

// A row for an op over n f32 elements that moves `bytes_per_element` bytes per element.
template <typename F>
Row bandwidth_row(Device d, const std::string& what, int64_t n, double bytes_per_element, double copy, F&& body) {
  const double ms = median_ms(d, body);
  const double gbs = bytes_per_element * n / (ms * 1e-3) / 1e9;
  return {fmt::format("{}, {} M elements", what, n >> 20), fmt::format("{:.0f} GB/s", gbs),
          fmt::format("D2D copy {:.0f} GB/s", copy), fmt::format("{:.0f}%", 100 * gbs / copy)};
}

std::vector<Row> bandwidth_rows(Device d, int64_t n, double copy) {
  Tensor a = device_randn({n}, 1, DType::f32, d), b = device_randn({n}, 2, DType::f32, d);
  return {bandwidth_row(d, "add f32", n, 12, copy, [&] { Tensor c = add(a, b); }),   // reads 2, writes 1
          bandwidth_row(d, "gelu f32", n, 8, copy, [&] { Tensor c = gelu(a); }),     // reads 1, writes 1
          bandwidth_row(d, "sum f32", n, 4, copy, [&] { Tensor c = sum(a); })};      // reads 1
}

Row matmul_row(Device d, int64_t n, DType dtype) {
  Tensor a = device_randn({n, n}, 5, dtype, d), b = device_randn({n, n}, 6, dtype, d);
  Tensor c = empty({n, n}, dtype, d);
  const double flops = 2.0 * n * n * n;
  const double ours = median_ms(d, [&] { Tensor r = matmul(a, b); });
  const double raw = median_ms(d, [&] { cuda_blas::raw_square_gemm(c, a, b); });
  return {fmt::format("matmul {} {}^3", dtype_name(dtype), n), fmt::format("{:.1f} TFLOP/s", flops / (ours * 1e-3) / 1e12),
          fmt::format("cuBLAS {:.1f} TFLOP/s", flops / (raw * 1e-3) / 1e12), fmt::format("{:.0f}%", 100 * raw / ours)};
}

}  // namespace

int bench_engine_cuda(const BenchOptions& opt, Device d) {
  cuda::require_device(d, "bench engine --device");
  NoGradGuard ng;
  fmt::print("gradsphere bench engine --device {}{}\n", d, opt.quick ? "  (quick)" : "");
  const int64_t n = opt.quick ? int64_t{1} << 20 : int64_t{1} << 28;  // 1 GiB per f32 array
  const double copy = copy_gbs(d, n);
  std::vector<Row> rows = bandwidth_rows(d, n, copy);
  for (int64_t m : opt.quick ? std::vector<int64_t>{256} : std::vector<int64_t>{1024, 4096, 8192})
    rows.push_back(matmul_row(d, m, DType::f32));
  rows.push_back(matmul_row(d, opt.quick ? 256 : 4096, DType::f64));
  fmt::print("| {:<38} | {:>16} | {:>22} | {:>14} |\n", "benchmark", "gradsphere", "baseline (same run)", "ratio");
  fmt::print("|{:-<40}|{:-<18}|{:-<24}|{:-<16}|\n", "", "", "", "");
  for (const auto& r : rows) fmt::print("| {:<38} | {:>16} | {:>22} | {:>14} |\n", r.what, r.ours, r.baseline, r.ratio);
  const MemoryStats m = memory_stats(d);
  fmt::print("allocator on {}: {:.1f} MB in use, peak {:.1f} MB, {:.1f} MB reserved (peak {:.1f} MB)\n", d, m.in_use / 1e6,
             m.peak / 1e6, m.reserved / 1e6, m.reserved_peak / 1e6);
  return 0;
}

}  // namespace gs::tools
