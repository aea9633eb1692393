// `gradsphere bench train [--device cuda] [--quick] [--bf16-mlp] [--csv FILE]`: one training step of torch-harmonics' example
// SFNO (its defaults: equiangular input, legendre-gauss internal grid, scale_factor 3, 3 -> 3
// channels, gelu, MLP ratio 2, no norm, no position embedding) with an MSE loss and Adam
// (gs::models::Adam, lr 1e-3), f32. Per case:
//   ms/step    median wall time of forward + backward + Adam step + zero_grad (tools/bench/timing.h)
//   fwd / bwd / adam   the median of each phase timed on its own, in the same steps
//   peak MB    allocator high-water mark over the timed steps (reset after warm-up): parameters,
//              Adam state, activations saved for backward, gradients and the cached Legendre tables
//   MLP        f32, or bf16 (--bf16-mlp adds that row after each case: the MLP keeps its saved
//              activations in bf16, MlpSpec::bf16_storage; the transforms and weights stay f32)
//   torch ms   a generic-BLAS PyTorch + torch-harmonics step on this kind of 2-core machine (the
//              brief's figures, for orientation; tools/compare_train.py measures it side by side)
// With --device cuda the model is built on the CPU and moved (Module::to), the data lives on the
// GPU, and every phase ends with a device synchronize, so the times are the GPU's work plus the
// host's launch overhead; peak MB is the device allocator's. torch-harmonics on the same GPU:
// tools/compare_cuda.py (the torch ms column is empty there).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fmt/core.h>
#include <omp.h>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/cuda_runtime.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "engine/storage.h"
#include "models/optim.h"
#include "models/sfno.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/sphere/legendre/contraction.h"
#include "tools/bench/bench_csv.h"
#include "tools/bench/benches.h"
#include "tools/bench/timing.h"

namespace gs::tools {
namespace {

struct Case {
  int64_t nlat, nlon, embed, layers, batch;
  double torch_ms;  // 0: no reference figure
};

struct Result {
  Case c;
  bool bf16_mlp = false;
  int64_t params = 0;
  double ms_step = 0, ms_fwd = 0, ms_bwd = 0, ms_adam = 0, peak_mb = 0;
};

Result run_case(const Case& c, bool quick, Device d, bool bf16_mlp) {
  models::SfnoOptions o;  // torch-harmonics' defaults except the sizes
  o.mlp_bf16_storage = bf16_mlp;
  o.img_size = {c.nlat, c.nlon};
  o.embed_dim = c.embed;
  o.num_layers = c.layers;
  o.seed = 1;
  models::SFNO model(o);
  model.to(d);  // before the optimizer: its state is allocated on the parameters' device
  models::Adam adam(model.named_parameters(), models::AdamOptions{.lr = 1e-3});
  Tensor x = to_device_copy(randn({c.batch, o.in_chans, c.nlat, c.nlon}, {2024, 1}), d);
  Tensor target = to_device_copy(randn({c.batch, o.out_chans, c.nlat, c.nlon}, {2024, 2}), d);
  // A phase's time includes its device work: wait for it before reading the clock.
  auto finish = [&] {
    if (!d.is_cpu()) cuda::synchronize(d);
  };

  std::vector<double> fwd, bwd, opt;
  auto step = [&](bool record) {
    auto t0 = std::chrono::steady_clock::now();
    Tensor loss = mean(square(sub(model.forward(x), target)));
    finish();
    const double f = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    loss.backward();
    finish();
    const double b = ms_since(t0);
    t0 = std::chrono::steady_clock::now();
    adam.step();
    adam.zero_grad();
    finish();
    const double a = ms_since(t0);
    if (record) fwd.push_back(f), bwd.push_back(b), opt.push_back(a);
  };
  // Warm-up: Legendre tables, FFTW plans, Adam state, allocator caches.
  step(false);
  step(false);
  reset_peak_memory(d);
  auto t0 = std::chrono::steady_clock::now();
  step(true);
  const double once = ms_since(t0);
  const int reps = quick ? 3 : std::clamp(static_cast<int>(3000.0 / std::max(once, 1e-3)), 5, 41) | 1;
  const double s = median_seconds([&] { step(true); }, reps);

  Result r;
  r.c = c;
  r.bf16_mlp = bf16_mlp;
  r.params = model.num_parameters();
  r.ms_step = 1e3 * s;
  r.ms_fwd = median(fwd), r.ms_bwd = median(bwd), r.ms_adam = median(opt);
  r.peak_mb = static_cast<double>(memory_stats(d).peak) / 1e6;
  return r;
}

}  // namespace

int bench_train(const BenchOptions& opt) {
  const Device d = parse_device(opt.device);
  if (!d.is_cpu()) cuda::require_device(d, "bench train --device");
  const int threads = omp_get_max_threads();
  fmt::print("gradsphere bench train --device {}  ({} threads{})\n", d, threads, opt.quick ? ", quick" : "");
  fmt::print("torch-harmonics' example SFNO (defaults: equiangular -> legendre-gauss, scale_factor 3, 3 -> 3 "
             "channels, gelu, mlp_ratio 2), f32, MSE loss, Adam lr 1e-3.\n");
  fmt::print("ms/step: forward + backward + Adam step + zero_grad (median); fwd / bwd / adam: the phases; "
             "peak MB: allocator high-water mark over the timed steps.\n");
  if (d.is_cpu())
    fmt::print("torch ms: generic-BLAS PyTorch + torch-harmonics on a comparable 2-core machine (reference "
               "figures, not measured here).\n\n");
  else
    fmt::print("each phase ends with a device synchronize; peak MB is {}'s allocator; torch-harmonics on the same "
               "GPU: tools/compare_cuda.py\n\n", d);

  std::vector<Case> cases;
  if (opt.quick)
    cases = {{16, 32, 8, 2, 1, 0.0}};
  else
    cases = {{32, 64, 16, 4, 2, 6.6}, {64, 128, 32, 4, 4, 74.0}, {128, 256, 64, 4, 2, 542.0}};
  // On a GPU also the sizes it is for: ERA5's 0.25 degree grid with an SFNO of makani's width.
  if (!d.is_cpu() && !opt.quick) cases.push_back({721, 1440, 256, 8, 1, 0.0});

  fmt::print("| {:>11} | {:>5} | {:>6} | {:>5} | {:>4} | {:>8} | {:>9} | {:>8} | {:>8} | {:>8} | {:>8} | {:>8} | "
             "{:>7} |\n",
             "nlat x nlon", "embed", "layers", "batch", "MLP", "params", "ms/step", "fwd", "bwd", "adam", "peak MB",
             "torch ms", "speedup");
  fmt::print("|{:->13}|{:->7}|{:->8}|{:->7}|{:->6}|{:->10}|{:->11}|{:->10}|{:->10}|{:->10}|{:->10}|{:->10}|{:->9}|\n",
             ":", ":", ":", ":", ":", ":", ":", ":", ":", ":", ":", ":", ":");
  std::vector<Result> all;
  for (Case c : cases) {
    if (!d.is_cpu()) c.torch_ms = 0;  // the reference figures are the CPU's
    for (bool bf16 : {false, true}) {
      if (bf16 && !opt.bf16_mlp) continue;
      Result r = run_case(c, opt.quick, d, bf16);
      fmt::print("| {:>11} | {:>5} | {:>6} | {:>5} | {:>4} | {:>8} | {:>9.2f} | {:>8.2f} | {:>8.2f} | {:>8.2f} | "
                 "{:>8.2f} | {:>8} | {:>7} |\n",
                 fmt::format("{}x{}", c.nlat, c.nlon), c.embed, c.layers, c.batch, bf16 ? "bf16" : "f32", r.params,
                 r.ms_step, r.ms_fwd, r.ms_bwd, r.ms_adam, r.peak_mb,
                 c.torch_ms > 0 ? fmt::format("{:.1f}", c.torch_ms) : "-",
                 c.torch_ms > 0 ? fmt::format("{:.2f}x", c.torch_ms / r.ms_step) : "-");
      std::fflush(stdout);
      all.push_back(r);
      sphere::clear_legendre_cache();
    }
  }

  if (!opt.csv.empty())
    write_bench_csv(opt.csv, "bench train",
                    "nlat,nlon,embed_dim,num_layers,batch,params,threads,ms_step,ms_forward,ms_backward,ms_adam,peak_mb,"
                    "torch_ms_reference,mlp_storage",
                    [&](std::FILE* f) {
                      for (const auto& r : all)
                        fmt::print(f, "{},{},{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.3f},{:.1f},{}\n", r.c.nlat,
                                   r.c.nlon, r.c.embed, r.c.layers, r.c.batch, r.params, threads, r.ms_step, r.ms_fwd,
                                   r.ms_bwd, r.ms_adam, r.peak_mb, r.c.torch_ms, r.bf16_mlp ? "bf16" : "f32");
                    });
  return 0;
}

}  // namespace gs::tools
