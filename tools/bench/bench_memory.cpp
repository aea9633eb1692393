// `gradsphere bench memory [--quick]`: what activation checkpointing and bf16 saved activations save
// in memory and cost in time, on one training step (forward, MSE loss, backward, Adam step,
// zero_grad) of torch-harmonics' example SFNO (its defaults, as `bench train`; f32, CPU). Four
// settings per case:
//   plain        every op keeps what its backward needs
//   checkpoint   each block under gs::checkpoint (ForwardContext::checkpoint_blocks): a block's
//                activations are dropped in forward and replayed in backward
//   bf16         the forward and the loss under gs::SaveInBf16: every saved f32 tensor stored as bf16
//   both         the two together (inside a checkpointed block the checkpoint's hooks are the
//                innermost and win; the encoder, decoder and loss save bf16)
// Columns:
//   ms/step, fwd, bwd   medians of the whole step and of its forward (with the loss) and backward
//   base MB   bytes of live tensor storage when a step starts: parameters, Adam state, the input and
//             target, the cached Legendre tables
//   held MB   what forward added when it returns (the saved activations and the loss graph's outputs)
//   peak MB   the CPU allocator's high-water mark of live tensor storage over the timed steps (it is
//             raised on every allocation, so no moment is missed); it counts requested bytes of
//             tensors only, not the allocator's cached free blocks, the tape's node objects or the
//             kernels' own scratch vectors
//   max |dg|  the largest difference of any parameter's gradient from the plain step's, over the
//             largest plain gradient; checkpointing must give the same gradients (checked), bf16 an
//             error of bf16's precision (checked below 5%, so a broken step cannot pass)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fmt/core.h>
#include <omp.h>
#include <optional>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/saved_hooks.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "engine/storage.h"
#include "models/optim.h"
#include "models/sfno.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/reduce_more.h"
#include "ops/sphere/legendre/contraction.h"
#include "tools/bench/benches.h"
#include "tools/bench/timing.h"

namespace gs::tools {
namespace {

struct Case {
  int64_t nlat, nlon, embed, layers, batch;
};

struct Setting {
  const char* name;
  bool checkpoint, bf16;
};
constexpr Setting kSettings[] = {{"plain", false, false}, {"checkpoint", true, false}, {"bf16", false, true},
                                 {"both", true, true}};

struct Measured {
  double ms_step = 0, ms_fwd = 0, ms_bwd = 0, base_mb = 0, held_mb = 0, peak_mb = 0;
};

double mb(size_t bytes) { return static_cast<double>(bytes) / 1e6; }

// One model, optimizer and batch; every setting's model is built from the same seed, so all start
// from the same weights.
struct Run {
  models::SFNO model;
  models::Adam adam;
  Tensor x, target;
  explicit Run(const models::SfnoOptions& o, int64_t batch)
      : model(o),
        adam(model.named_parameters(), models::AdamOptions{.lr = 1e-3}),
        x(randn({batch, o.in_chans, o.img_size[0], o.img_size[1]}, {2024, 1})),
        target(randn({batch, o.out_chans, o.img_size[0], o.img_size[1]}, {2024, 2})) {}

  Tensor forward_loss(const Setting& s) {
    std::optional<SaveInBf16> narrow;
    if (s.bf16) narrow.emplace();
    models::ForwardContext ctx;
    ctx.checkpoint_blocks = s.checkpoint;
    return mean(square(sub(model.forward(x, ctx), target)));
  }
};

models::SfnoOptions options_of(const Case& c) {
  models::SfnoOptions o;  // torch-harmonics' defaults except the sizes
  o.img_size = {c.nlat, c.nlon};
  o.embed_dim = c.embed;
  o.num_layers = c.layers;
  o.seed = 1;
  return o;
}

// The first step's gradients of a fresh model (the same weights for every setting).
std::vector<Tensor> first_gradients(const Case& c, const Setting& s) {
  Run run(options_of(c), c.batch);
  run.forward_loss(s).backward();
  std::vector<Tensor> g;
  for (const auto& p : run.model.named_parameters()) g.push_back(p.tensor.grad());
  return g;
}

// max |g - ref| over every parameter, over max |ref|.
double relative_gradient_difference(const std::vector<Tensor>& g, const std::vector<Tensor>& ref) {
  NoGradGuard ng;
  double diff = 0, scale = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    GS_CHECK(g[i].defined() && ref[i].defined(), "bench memory: parameter {} got no gradient", i);
    diff = std::max(diff, static_cast<double>(amax(abs(sub(g[i], ref[i]))).item<float>()));
    scale = std::max(scale, static_cast<double>(amax(abs(ref[i])).item<float>()));
  }
  GS_CHECK(scale > 0, "bench memory: the plain step's gradients are all zero");
  return diff / scale;
}

Measured measure(const Case& c, const Setting& s, bool quick) {
  Run run(options_of(c), c.batch);
  std::vector<double> fwd, bwd, held;
  auto step = [&] {
    const size_t before = memory_stats(Device::cpu()).in_use;
    auto t0 = std::chrono::steady_clock::now();
    Tensor loss = run.forward_loss(s);
    fwd.push_back(ms_since(t0));
    held.push_back(mb(memory_stats(Device::cpu()).in_use - before));
    t0 = std::chrono::steady_clock::now();
    loss.backward();
    bwd.push_back(ms_since(t0));
    run.adam.step();
    run.adam.zero_grad();
  };
  step();  // warm-up: Legendre tables, FFT plans, Adam state, allocator caches
  step();
  fwd.clear(), bwd.clear(), held.clear();
  Measured m;
  m.base_mb = mb(memory_stats(Device::cpu()).in_use);
  reset_peak_memory(Device::cpu());
  m.ms_step = 1e3 * median_seconds(step, quick ? 1 : 5);
  m.peak_mb = mb(memory_stats(Device::cpu()).peak);
  m.ms_fwd = median(fwd), m.ms_bwd = median(bwd), m.held_mb = median(held);
  return m;
}

}  // namespace

int bench_memory(const BenchOptions& opt) {
  fmt::print("gradsphere bench memory  ({} threads{})\n", omp_get_max_threads(), opt.quick ? ", quick" : "");
  fmt::print("torch-harmonics' example SFNO (defaults: equiangular -> legendre-gauss, scale_factor 3, 3 -> 3 "
             "channels, gelu, mlp_ratio 2, no norm), f32, CPU, MSE loss, Adam lr 1e-3.\n");
  fmt::print("ms/step: forward + loss + backward + Adam + zero_grad (median); base / held / peak MB: live tensor "
             "storage at the step's start / added by forward / high-water mark; max |dg|: gradient difference "
             "from plain, relative.\n\n");
  std::vector<Case> cases;
  if (opt.quick)
    cases = {{16, 32, 8, 2, 1}};
  else
    cases = {{128, 256, 64, 4, 2}, {361, 720, 16, 4, 1}};

  fmt::print("| {:>11} | {:>5} | {:>6} | {:>5} | {:<10} | {:>9} | {:>8} | {:>8} | {:>8} | {:>8} | {:>8} | {:>9} |\n",
             "nlat x nlon", "embed", "layers", "batch", "setting", "ms/step", "fwd", "bwd", "base MB", "held MB",
             "peak MB", "max |dg|");
  fmt::print("|{:->13}|{:->7}|{:->8}|{:->7}|{:-<12}|{:->11}|{:->10}|{:->10}|{:->10}|{:->10}|{:->10}|{:->11}|\n", ":",
             ":", ":", ":", ":", ":", ":", ":", ":", ":", ":", ":");
  for (const Case& c : cases) {
    // Gradients first, each from a fresh model, so none of them is alive while memory is measured.
    std::vector<double> dg;
    {
      const std::vector<Tensor> ref = first_gradients(c, kSettings[0]);
      for (const Setting& s : kSettings) dg.push_back(relative_gradient_difference(first_gradients(c, s), ref));
    }
    for (size_t i = 0; i < std::size(kSettings); ++i) {
      const Setting& s = kSettings[i];
      // Checkpointing replays the same ops on the same values: the gradients must be the plain ones
      // (up to summation order); bf16 storage changes them by bf16's relative precision (2^-8).
      const double tolerance = s.bf16 ? 5e-2 : 1e-5;
      GS_CHECK(dg[i] <= tolerance,
               "bench memory: the {} step's gradients differ from the plain step's by {:.3g} (relative), expected at "
               "most {:.0e}: the step is broken, its figures would mean nothing", s.name, dg[i], tolerance);
      const Measured m = measure(c, s, opt.quick);
      fmt::print("| {:>11} | {:>5} | {:>6} | {:>5} | {:<10} | {:>9.2f} | {:>8.2f} | {:>8.2f} | {:>8.2f} | {:>8.2f} | "
                 "{:>8.2f} | {:>9.2e} |\n",
                 fmt::format("{}x{}", c.nlat, c.nlon), c.embed, c.layers, c.batch, s.name, m.ms_step, m.ms_fwd,
                 m.ms_bwd, m.base_mb, m.held_mb, m.peak_mb, dg[i]);
      std::fflush(stdout);
    }
    sphere::clear_legendre_cache();
  }
  return 0;
}

}  // namespace gs::tools
