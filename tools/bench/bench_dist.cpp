// `mpiexec -n N gradsphere bench dist [--train | --pipeline]`: the distributed SHT and one SFNO
// training step (with and without local 3x3 skips) on every spatial grid 1 x h x w of the N ranks;
// --train: the training steps only; --pipeline: only the pipelined transposes against the
// unpipelined path (bench_pipeline_rows, which a full run also prints after the SHT rows). Per
// row: the slowest rank's median time, the bytes the busiest rank sent to other ranks per call
// (counted by the transposes), the least a transpose-based transform must send (every block as even as the split allows: sphere_transforms.h), and the
// Legendre table bytes each rank holds against one process. Strong scaling: a fixed problem at
// every N; weak scaling: the fields grow with N (the work per rank stays the same). Run at N = 1, 2
// and 4 and compare the rows.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "distributed/collectives.h"
#include "distributed/pipelined_sht.h"
#include "distributed/sphere_transforms.h"
#include "distributed/world.h"
#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "models/optim.h"
#include "models/sfno.h"
#include "models/stepper.h"
#include "ops/ops.h"
#include "ops/sphere/grids.h"
#include "tools/bench/benches.h"
#include "tools/bench/timing.h"

namespace gs::tools {
namespace {

// The slowest rank's median time, and the most bytes one rank moved per call, by collective:
// sent by the transposes and halo exchanges, all-reduced by reduce_replicated (norm statistics,
// losses) and by the gradient reducer (`reducer_bytes`: its cumulative payload, if any).
struct Measured {
  double seconds = 0;
  double bytes_sent = 0;  // transposes
  double halo = 0, all_reduce = 0, gradients = 0;
};

template <typename F>
Measured measure(dist::Communicator& world, F&& body, int repeats, const std::function<int64_t()>& reducer_bytes = {}) {
  const dist::CollectiveTraffic before = dist::collective_traffic();
  const int64_t grads_before = reducer_bytes ? reducer_bytes() : 0;
  const double t = median_seconds(
      [&] {
        world.barrier();
        body();
      },
      repeats);
  const dist::CollectiveTraffic after = dist::collective_traffic();
  const double calls = repeats + 1;  // median_seconds runs one warm-up call
  Tensor v = from_vector(std::vector<double>{
      t, static_cast<double>(after.transpose - before.transpose) / calls,
      static_cast<double>(after.halo - before.halo) / calls,
      static_cast<double>(after.all_reduce - before.all_reduce) / calls,
      static_cast<double>((reducer_bytes ? reducer_bytes() : 0) - grads_before) / calls});
  world.all_reduce(v, dist::ReduceOp::max);
  const auto r = v.to_vector<double>();
  return {r[0], r[1], r[2], r[3], r[4]};
}

double max_over_ranks(dist::Communicator& world, double x) {
  Tensor v = from_vector(std::vector<double>{x});
  world.all_reduce(v, dist::ReduceOp::max);
  return v.item<double>();
}

std::vector<dist::GridSpec> spatial_grids(int64_t n) {
  std::vector<dist::GridSpec> out;
  for (const auto& g : dist::all_grids(n))
    if (g.data == 1) out.push_back(g);
  return out;
}

void bench_sht_rows(dist::Communicator& world, const dist::CommPtr& world_ptr, bool quick) {
  const bool root = world.rank() == 0;
  const int64_t n = world.size();
  const sphere::ShtSpec spec = quick ? sphere::make_sht_spec(sphere::GridKind::legendre_gauss, 32, 64)
                                     : sphere::make_sht_spec(sphere::GridKind::legendre_gauss, 181, 360);
  const int64_t strong_fields = quick ? 4 : 32, weak_fields_per_rank = quick ? 2 : 8;
  const int repeats = quick ? 2 : 7;
  if (root) {
    fmt::print("distributed SHT: {}, f32 fields, sht then isht (forward only) and with backward\n\n", spec.str());
    fmt::print("| {:<7} | {:<7} | {:>6} | {:>11} | {:>11} | {:>14} | {:>14} | {:>15} |\n", "scaling", "grid", "fields",
               "fwd ms", "fwd+bwd ms", "sent MB/rank", "min MB/rank", "table MB/rank");
    fmt::print("|---------|---------|--------|-------------|-------------|----------------|----------------|-----------------|\n");
  }
  for (bool weak : {false, true}) {
    const int64_t fields = weak ? weak_fields_per_rank * n : strong_fields;
    for (const auto& gs : spatial_grids(n)) {
      const auto grid = dist::ProcessGrid::create(world_ptr, gs);
      const Tensor x = randn({fields, grid.local_lat(spec.nlat).count, grid.local_lon(spec.nlon).count}, {3, 1},
                             DType::f32);
      Measured fwd, both;
      {
        NoGradGuard ng;
        fwd = measure(world, [&] { dist::isht(dist::sht(x, spec, grid), spec, grid); }, repeats);
      }
      Tensor xg = clone(x);
      xg.set_requires_grad();
      both = measure(world, [&] {
        xg.set_grad(Tensor());
        Tensor y = dist::isht(dist::sht(xg, spec, grid), spec, grid);
        sum(mul(y, y)).backward();
      }, repeats);
      // One transform's minimum, times two (sht and isht move the same amounts).
      const double min_bytes = 2.0 * static_cast<double>(dist::sht_min_bytes_sent(spec, fields, DType::f32, grid));
      const double tables = max_over_ranks(world, static_cast<double>(dist::sht_table_bytes(spec, DType::f32, true, false, grid) +
                                                                      dist::sht_table_bytes(spec, DType::f32, false, false, grid)));
      if (root)
        fmt::print("| {:<7} | {:<7} | {:>6} | {:>11.2f} | {:>11.2f} | {:>14.2f} | {:>14.2f} | {:>15.2f} |\n",
                   weak ? "weak" : "strong", gs.str(), fields, fwd.seconds * 1e3, both.seconds * 1e3,
                   fwd.bytes_sent / 1e6, min_bytes / 1e6, tables / 1e6);
    }
  }
}

// The transposes of one unpipelined transform, alone: each on a tensor of the shape it moves there
// (sphere_transforms.h's steps), for the share of transpose time a pipelined transform hides.
std::vector<std::function<void()>> transposes_of(const sphere::ShtSpec& spec, int64_t fields,
                                                 const dist::ProcessGrid& grid, bool analysis) {
  const int64_t rows = grid.local_lat(spec.nlat).count, ord = dist::local_orders(grid, spec.mmax).count;
  const int64_t bw = dist::split_block(fields, grid.w_size(), grid.w_rank()).count;
  const int64_t bh = dist::split_block(fields, grid.h_size(), grid.h_rank()).count;
  std::vector<std::function<void()>> out;
  auto add = [&](Shape shape, DType dt, int64_t from, int64_t to, int64_t global, dist::Group g) {
    const Tensor t = randn(shape, {9, out.size()}, dt);
    out.push_back([t, from, to, global, comm = grid.comm(g)] { dist::transpose(t, from, to, global, comm); });
  };
  const bool w = grid.w_size() > 1, h = grid.h_size() > 1;
  if (analysis) {
    if (w) add({fields, rows, grid.local_lon(spec.nlon).count}, DType::f32, 2, 0, spec.nlon, dist::Group::w);
    if (w) add({bw, rows, spec.mmax}, DType::c64, 0, 2, fields, dist::Group::w);
    if (h) add({fields, rows, ord}, DType::c64, 1, 0, spec.nlat, dist::Group::h);
    if (h) add({bh, spec.lmax, ord}, DType::c64, 0, 1, fields, dist::Group::h);
  } else {
    if (h) add({fields, dist::local_degrees(grid, spec.lmax).count, ord}, DType::c64, 1, 0, spec.lmax, dist::Group::h);
    if (h) add({bh, spec.nlat, ord}, DType::c64, 0, 1, fields, dist::Group::h);
    if (w) add({fields, rows, ord}, DType::c64, 2, 0, spec.mmax, dist::Group::w);
    if (w) add({bw, rows, spec.nlon}, DType::f32, 0, 2, fields, dist::Group::w);
  }
  return out;
}

// Pipelined transposes (distributed/pipelined_sht.h) against the unpipelined path, measured in the
// same run: the arms alternate round by round (so drift falls on all alike); each round's time is
// the slowest rank's, and the median over rounds is reported. Hidden: (unpipelined - pipelined) /
// the transposes alone.
void bench_pipeline_rows(dist::Communicator& world, const dist::CommPtr& world_ptr, bool quick) {
  const bool root = world.rank() == 0;
  const int64_t n = world.size();
  if (n == 1) return;
  const sphere::ShtSpec spec = quick ? sphere::make_sht_spec(sphere::GridKind::legendre_gauss, 32, 64)
                                     : sphere::make_sht_spec(sphere::GridKind::legendre_gauss, 181, 360);
  const int64_t fields = quick ? 4 : 32;
  const int rounds = quick ? 2 : 31;
  const std::vector<int> chunk_counts{1, 2, 4, 8};  // 1: the unpipelined path
  if (root) {
    fmt::print("\npipelined transposes: {}, {} f32 fields, forward only; median of {} alternating rounds\n\n",
               spec.str(), fields, rounds);
    fmt::print("| {:<7} | {:<9} | {:>6} | {:>8} | {:>13} | {:>9} | {:>12} | {:>7} |\n", "grid", "transform", "chunks",
               "ms", "vs unpipel.", "sent MB", "transposes", "hidden");
    fmt::print("|---------|-----------|--------|----------|---------------|-----------|--------------|---------|\n");
  }
  NoGradGuard ng;
  const int previous = dist::set_sht_pipeline_chunks(1);
  for (const auto& gs : spatial_grids(n)) {
    if (gs.h * gs.w == 1) continue;
    const auto grid = dist::ProcessGrid::create(world_ptr, gs);
    const Tensor x = randn({fields, grid.local_lat(spec.nlat).count, grid.local_lon(spec.nlon).count}, {3, 1},
                           DType::f32);
    const Tensor c = dist::sht(x, spec, grid);
    for (bool analysis : {true, false}) {
      // Arms: 1 chunk (unpipelined), each chunk count, then the transposes alone.
      std::vector<std::function<void()>> arms;
      for (int k : chunk_counts) {
        arms.push_back([&, k] {
          dist::set_sht_pipeline_chunks(k);
          if (analysis) dist::sht(x, spec, grid);
          else dist::isht(c, spec, grid);
        });
      }
      const auto transposes = transposes_of(spec, fields, grid, analysis);
      arms.push_back([&] {
        for (const auto& t : transposes) t();
      });
      std::vector<std::vector<double>> times(arms.size());
      std::vector<int64_t> bytes(arms.size(), 0);
      for (int r = 0; r <= rounds; ++r)  // round 0 warms up
        for (size_t a = 0; a < arms.size(); ++a) {
          world.barrier();
          const int64_t b0 = dist::collective_traffic().transpose;
          const auto t0 = std::chrono::steady_clock::now();
          arms[a]();
          const double ms = max_over_ranks(world, ms_since(t0));
          bytes[a] = dist::collective_traffic().transpose - b0;
          if (r > 0) times[a].push_back(ms);
        }
      std::vector<double> med;
      for (const auto& t : times) med.push_back(median(t));
      for (size_t a = 0; a + 1 < arms.size(); ++a) {
        const double sent_a = max_over_ranks(world, static_cast<double>(bytes[a])) / 1e6;
        if (!root) continue;
        fmt::print("| {:<7} | {:<9} | {:>6} | {:>8.2f} | {:>12.3f}x | {:>9.3f} | {:>9.2f} ms | {:>6.0f}% |\n", gs.str(),
                   analysis ? "sht" : "isht", chunk_counts[a], med[a], med[a] / med[0], sent_a, med.back(),
                   100.0 * (med[0] - med[a]) / med.back());
      }
    }
  }
  dist::set_sht_pipeline_chunks(previous);
}

// The SFNO both training tables step: 91x180 equiangular (17x32 with --quick), f32.
models::SfnoOptions bench_sfno_options(bool quick) {
  models::SfnoOptions o;
  o.img_size = quick ? std::array<int64_t, 2>{17, 32} : std::array<int64_t, 2>{91, 180};
  o.grid = "equiangular";
  o.scale_factor = 2;
  o.in_chans = o.out_chans = 3;
  o.embed_dim = quick ? 8 : 32;
  o.num_layers = quick ? 2 : 4;
  o.normalization_layer = "instance_norm";
  o.dtype = DType::f32;
  return o;
}

void bench_train_rows(dist::Communicator& world, const dist::CommPtr& world_ptr, bool quick, bool local) {
  const bool root = world.rank() == 0;
  const int64_t n = world.size();
  models::SfnoOptions o = bench_sfno_options(quick);
  if (local) o.inner_skip = "local3x3";  // a pole-aware 3x3 convolution in every block: halo exchanges
  const int repeats = quick ? 2 : 5;
  const std::vector<double> aw =
      sphere::make_quadrature(sphere::GridKind::equiangular, o.img_size[0]).weights;
  if (root) {
    fmt::print("\nSFNO{} training step (Adam, 2-step rollout): {}x{} equiangular, embed {}, {} layers, f32; MB per rank "
               "per step by collective\n\n",
               local ? " with local3x3 skips" : "", o.img_size[0], o.img_size[1], o.embed_dim, o.num_layers);
    fmt::print("| {:<7} | {:<7} | {:>6} | {:>11} | {:>10} | {:>8} | {:>10} | {:>10} |\n", "scaling", "grid", "batch",
               "ms / step", "transpose", "halo", "statistics", "gradients");
    fmt::print("|---------|---------|--------|-------------|------------|----------|------------|------------|\n");
  }
  for (bool weak : {false, true}) {
    const int64_t batch = weak ? 2 * n : 2;
    for (const auto& gs : spatial_grids(n)) {
      const auto grid = dist::ProcessGrid::create(world_ptr, gs);
      auto model = std::make_shared<models::SFNO>(o, grid);
      auto opt = std::make_shared<models::Adam>(model->named_parameters(), models::AdamOptions{.lr = 1e-4});
      models::Stepper stepper(model, opt, aw);
      stepper.set_distributed(grid);
      const int64_t rows = grid.local_lat(o.img_size[0]).count, cols = grid.local_lon(o.img_size[1]).count;
      const models::Batch b{randn({batch, 3, rows, cols}, {8, 1}, DType::f32),
                            randn({batch, 2, 3, rows, cols}, {8, 2}, DType::f32)};
      const Measured m = measure(world, [&] { stepper.train_on_batch(b); }, repeats,
                                 [&] { return stepper.reducer()->stats().bytes_reduced; });
      if (root)
        fmt::print("| {:<7} | {:<7} | {:>6} | {:>11.1f} | {:>10.2f} | {:>8.3f} | {:>10.4f} | {:>10.3f} |\n",
                   weak ? "weak" : "strong", gs.str(), batch, m.seconds * 1e3, m.bytes_sent / 1e6, m.halo / 1e6,
                   m.all_reduce / 1e6, m.gradients / 1e6);
    }
  }
}

// The tape reducer against the hook reducer on the same SFNO training step, on the all-data grid
// and the two split grids of the ranks: the steps alternate between the two reducers (A B A B ...)
// so that the machine's drift falls on both alike; the fastest step of each is reported, with the
// buckets each reducer launched while backward was still running.
void bench_reducer_rows(dist::Communicator& world, const dist::CommPtr& world_ptr, bool quick) {
  const bool root = world.rank() == 0;
  const int64_t n = world.size();
  if (n == 1) return;
  const models::SfnoOptions o = bench_sfno_options(quick);
  const int rounds = quick ? 2 : 6;
  const std::vector<double> aw = sphere::make_quadrature(sphere::GridKind::equiangular, o.img_size[0]).weights;
  if (root) {
    fmt::print("\nSFNO training step (Adam, 2-step rollout, batch 2 per data replica), {}x{}, embed {}, {} layers, f32: "
               "the tape reducer against the hook reducer, alternating, fastest of {} steps each\n\n",
               o.img_size[0], o.img_size[1], o.embed_dim, o.num_layers, rounds);
    fmt::print("| {:<7} | {:>13} | {:>13} | {:>11} | {:>21} | {:>21} |\n", "grid", "hooks ms/step", "tape ms/step",
               "tape/hooks", "hooks: in backward", "tape: in backward");
    fmt::print("|---------|---------------|---------------|-------------|-----------------------|-----------------------|\n");
  }
  std::vector<dist::GridSpec> grids{{n, 1, 1}};
  for (const auto& gs : spatial_grids(n))
    if (gs.h * gs.w > 1) grids.push_back(gs);
  for (const auto& gs : grids) {
    const auto grid = dist::ProcessGrid::create(world_ptr, gs);
    struct Arm {
      std::unique_ptr<models::Stepper> stepper;
      double best = 1e300;
    };
    Arm arms[2];
    const dist::ReducerMode modes[2] = {dist::ReducerMode::hooks, dist::ReducerMode::tape};
    for (int a = 0; a < 2; ++a) {
      auto model = std::make_shared<models::SFNO>(o, grid);
      auto opt = std::make_shared<models::Adam>(model->named_parameters(), models::AdamOptions{.lr = 1e-4});
      arms[a].stepper = std::make_unique<models::Stepper>(model, opt, aw);
      arms[a].stepper->set_distributed(grid, {.mode = modes[a]});
    }
    const int64_t rows = grid.local_lat(o.img_size[0]).count, cols = grid.local_lon(o.img_size[1]).count;
    const models::Batch b{randn({2, 3, rows, cols}, {8, 1}, DType::f32), randn({2, 2, 3, rows, cols}, {8, 2}, DType::f32)};
    for (auto& arm : arms) arm.stepper->train_on_batch(b);  // warm-up (and the reducers' first-pass order)
    for (int r = 0; r < rounds; ++r)
      for (auto& arm : arms) arm.best = std::min(arm.best, measure(world, [&] { arm.stepper->train_on_batch(b); }, 1).seconds);
    if (root) {
      auto share = [](const models::Stepper& s) {
        const auto& st = s.reducer()->stats();
        return fmt::format("{} of {}", st.launched_in_backward, st.buckets_launched);
      };
      fmt::print("| {:<7} | {:>13.1f} | {:>13.1f} | {:>10.3f}x | {:>21} | {:>21} |\n", gs.str(), arms[0].best * 1e3,
                 arms[1].best * 1e3, arms[1].best / arms[0].best, share(*arms[0].stepper), share(*arms[1].stepper));
    }
  }
}

}  // namespace

int bench_dist(const BenchOptions& opt) {
  auto world = dist::world_communicator();
  if (world->rank() == 0) fmt::print("gradsphere bench dist  ({} ranks)\n\n", world->size());
  if (opt.pipeline_only) {
    bench_pipeline_rows(*world, world, opt.quick);
    return 0;
  }
  if (!opt.train_only) bench_sht_rows(*world, world, opt.quick);
  if (!opt.train_only) bench_pipeline_rows(*world, world, opt.quick);
  bench_train_rows(*world, world, opt.quick, false);
  bench_train_rows(*world, world, opt.quick, true);
  bench_reducer_rows(*world, world, opt.quick);
  return 0;
}

}  // namespace gs::tools
