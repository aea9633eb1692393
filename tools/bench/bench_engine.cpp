// `gradsphere bench engine`: the three engine figures of merit, each next to a baseline measured
// in the same run on the same machine:
//   tape overhead   forward + backward of a chain of small ops, per op (aim: <= 0.5 us)
//   elementwise     add() throughput in GB/s against memcpy (aim: >= 50%)
//   matmul          GFLOP/s against Eigen called directly (aim: >= 90%)
//   channel mixing  an SFNO MLP's products on channels-first fields (a 1x1 convolution's forward and
//                   weight gradient at 128x256), GFLOP/s against Eigen on the same layouts
// and the tape chain in forward mode, one chain per JVP rule kind (bench_forward_mode.cpp).
#include <Eigen/Dense>
#include <cstring>
#include <fmt/core.h>
#include <omp.h>

#include "engine/autograd/engine.h"
#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/view.h"
#include "tools/bench/benches.h"
#include "tools/bench/timing.h"

namespace gs::tools {
namespace {

struct Row {
  std::string what, ours, baseline, ratio;
};

Row tape_overhead(int chain) {
  Tensor x = randn({16}, {1, 1}, DType::f32);
  x.set_requires_grad(true);
  Tensor c = full({16}, 1.0001, DType::f32);
  double secs = median_seconds([&] {
    Tensor y = x;
    for (int i = 0; i < chain; ++i) y = (i % 2) ? mul(y, c) : add(y, c);
    Tensor loss = sum(y);
    loss.backward();
    x.set_grad({});
  }, 15);  // the median of 15: a pass is 10-20 ms, and this VM's speed moves between processes and within one
  double us_per_op = secs / (chain + 1) * 1e6;
  return {fmt::format("tape: fwd+bwd of {} ops on 16 f32", chain), fmt::format("{:.3f} us/op", us_per_op),
          "aim <= 0.5 us/op", fmt::format("{:.2f}x of aim", us_per_op / 0.5)};
}

Row elementwise(int64_t n) {
  Tensor a = randn({n}, {2, 1}, DType::f32), b = randn({n}, {2, 2}, DType::f32);
  NoGradGuard ng;
  double ours = median_seconds([&] { Tensor c = add(a, b); });
  // add reads two arrays and writes one: 3 n floats.
  double ours_gbs = 3.0 * n * 4 / ours / 1e9;
  std::vector<float> src(n, 1.0f), dst(n);
  double memcpy_s = median_seconds([&] {
    // Two threads, as our kernel uses: the fair bandwidth ceiling.
#pragma omp parallel
    {
      int nt = omp_get_num_threads(), t = omp_get_thread_num();
      int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
      std::memcpy(dst.data() + lo, src.data() + lo, (hi - lo) * sizeof(float));
    }
  });
  // memcpy reads one array and writes one: 2 n floats.
  double memcpy_gbs = 2.0 * n * 4 / memcpy_s / 1e9;
  return {fmt::format("add f32, {} M elements", n / 1000000), fmt::format("{:.1f} GB/s", ours_gbs),
          fmt::format("memcpy {:.1f} GB/s", memcpy_gbs), fmt::format("{:.0f}%", 100 * ours_gbs / memcpy_gbs)};
}

Row matmul_row(int64_t n) {
  Tensor a = randn({n, n}, {3, 1}, DType::f32), b = randn({n, n}, {3, 2}, DType::f32);
  NoGradGuard ng;
  double flops = 2.0 * n * n * n;
  double ours = median_seconds([&] { Tensor c = matmul(a, b); });
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  Eigen::Map<const M> ea(a.data<float>(), n, n), eb(b.data<float>(), n, n);
  M ec(n, n);
  double eigen = median_seconds([&] { ec.noalias() = ea * eb; });
  return {fmt::format("matmul f32 {}x{}x{}", n, n, n), fmt::format("{:.1f} GFLOP/s", flops / ours / 1e9),
          fmt::format("Eigen {:.1f} GFLOP/s", flops / eigen / 1e9), fmt::format("{:.0f}%", 100 * eigen / ours)};
}

// A channels-first 1x1 convolution's products over `points` points: forward w (cout x cin) @ x
// (cin x points), and the weight gradient g (cout x points) @ x^T, x^T a transposed view (each
// channel's points contiguous, as the tape hands it over). Eigen maps the same memory the same way.
Row channel_mixing_row(int64_t cout, int64_t cin, int64_t points, bool weight_gradient) {
  using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  NoGradGuard ng;
  const Tensor x = randn({cin, points}, {4, 1}, DType::f32);
  const Tensor a = weight_gradient ? randn({cout, points}, {4, 2}, DType::f32) : randn({cout, cin}, {4, 3}, DType::f32);
  const Tensor b = weight_gradient ? transpose(x, 0, 1) : x;
  const double flops = 2.0 * cout * cin * points;
  const double ours = median_seconds([&] { Tensor c = matmul(a, b); });
  Eigen::Map<const RowMajor> ea(a.data<float>(), a.size(0), a.size(1));
  RowMajor ec(cout, weight_gradient ? cin : points);
  double eigen = 0;
  if (weight_gradient) {
    Eigen::Map<const ColMajor> eb(x.data<float>(), points, cin);  // x^T: column j is channel j's points
    eigen = median_seconds([&] { ec.noalias() = ea * eb; });
  } else {
    Eigen::Map<const RowMajor> eb(x.data<float>(), cin, points);
    eigen = median_seconds([&] { ec.noalias() = ea * eb; });
  }
  const std::string what = weight_gradient
                               ? fmt::format("weight grad f32 {}x{} @ ({}x{})^T", cout, points, cin, points)
                               : fmt::format("channel mix f32 {}x{} @ {}x{}", cout, cin, cin, points);
  return {what, fmt::format("{:.1f} GFLOP/s", flops / ours / 1e9),
          fmt::format("Eigen {:.1f} GFLOP/s", flops / eigen / 1e9), fmt::format("{:.2f}x", eigen / ours)};
}

}  // namespace

int bench_engine(const BenchOptions& opt) {
  fmt::print("gradsphere bench engine  ({} threads{})\n", omp_get_max_threads(), opt.quick ? ", quick" : "");
  std::vector<Row> rows;
  rows.push_back(tape_overhead(opt.quick ? 1000 : 10000));
  rows.push_back(elementwise(opt.quick ? 1 << 20 : 1 << 24));
  for (int64_t n : opt.quick ? std::vector<int64_t>{128} : std::vector<int64_t>{256, 512, 1024})
    rows.push_back(matmul_row(n));
  // The last SFNO block's MLP at 128x256 (embed 64, hidden 128), one sample.
  const int64_t points = opt.quick ? 2048 : 128 * 256;
  for (bool wg : {false, true}) {
    rows.push_back(channel_mixing_row(128, 64, points, wg));
    rows.push_back(channel_mixing_row(64, 128, points, wg));
  }
  fmt::print("| {:<42} | {:>16} | {:>22} | {:>14} |\n", "benchmark", "gradsphere", "baseline (same run)", "ratio");
  fmt::print("|{:-<44}|{:-<18}|{:-<24}|{:-<16}|\n", "", "", "", "");
  for (const auto& r : rows) fmt::print("| {:<42} | {:>16} | {:>22} | {:>14} |\n", r.what, r.ours, r.baseline, r.ratio);
  print_forward_mode_cost(opt.quick);
  const MemoryStats m = memory_stats(Device::cpu());
  fmt::print("allocator on cpu: {:.1f} MB in use, peak {:.1f} MB, {:.1f} MB reserved\n", m.in_use / 1e6, m.peak / 1e6,
             m.reserved / 1e6);
  return 0;
}

}  // namespace gs::tools
