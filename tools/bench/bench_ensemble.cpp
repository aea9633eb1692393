// `[mpiexec -n N] gradsphere bench ensemble [--quick] [--grid ExDxHxW] [--csv FILE]`: the cost of
// ensemble training. One training step (Stepper::train_on_batch: rollout, loss, backward, the
// reducer, Adam) of ACE's NoiseConditionedSFNO on a 32x64 legendre-gauss grid, batch 2, a 2-step
// rollout, f32, with K = 1, 2, 4, 8 members per sample (K = 1: the MSE; K > 1: the fair CRPS). Per K:
//   ms/step   median wall time (tools/bench/timing.h)
//   peak MB   this rank's allocator high-water mark over the timed steps (reset after warm-up)
// Under mpiexec with --grid 2x1x1x1 the members are split over 2 ensemble ranks (K >= E; the K = 1
// row is skipped): time and peak are rank 0's, whose share is the larger one when K is odd.
#include <chrono>
#include <fmt/core.h>
#include <memory>
#include <omp.h>
#include <string>
#include <vector>

#include "distributed/process_grid.h"
#include "distributed/world.h"
#include "engine/factory.h"
#include "engine/storage.h"
#include "models/noise_sfno.h"
#include "models/optim.h"
#include "models/stepper.h"
#include "ops/sphere/grids.h"
#include "tools/bench/bench_csv.h"
#include "tools/bench/benches.h"
#include "tools/bench/timing.h"

namespace gs::tools {
namespace {

struct Row {
  int64_t members = 0;
  double ms_step = 0, peak_mb = 0;
};

Row run_members(int64_t K, bool quick, const dist::ProcessGrid& grid) {
  const int64_t nlat = quick ? 8 : 32, nlon = quick ? 16 : 64, B = 2, n = 2;
  models::NoiseSfnoOptions o;
  o.img_shape = {nlat, nlon};
  o.data_grid = "legendre-gauss";
  o.in_chans = o.out_chans = 3;
  o.embed_dim = quick ? 8 : 16;
  o.noise_embed_dim = 8;
  o.num_layers = quick ? 2 : 4;
  o.seed = 1;
  auto model = std::make_shared<models::NoiseConditionedSFNO>(o, grid);
  models::StepperOptions so;
  so.ensemble_members = K;
  if (K > 1) so.loss = models::LossTerms{.mse = 0, .crps = 1};
  models::Stepper stepper(model, std::make_shared<models::Adam>(model->named_parameters(), models::AdamOptions{}),
                          sphere::area_weights_coslat(sphere::GridKind::legendre_gauss, nlat), so);
  if (!grid.is_single_process()) stepper.set_distributed(grid);
  const models::Batch batch{randn({B, 3, nlat, nlon}, {7, 1}, DType::f32), randn({B, n, 3, nlat, nlon}, {7, 2}, DType::f32)};
  stepper.train_on_batch(batch);  // warm-up: tables, plans, Adam state
  stepper.train_on_batch(batch);
  const Device cpu = Device::cpu();
  reset_peak_memory(cpu);
  const double s = median_seconds([&] { stepper.train_on_batch(batch); }, quick ? 3 : 7);
  return {K, 1e3 * s, static_cast<double>(memory_stats(cpu).peak) / 1e6};
}

}  // namespace

int bench_ensemble(const BenchOptions& opt) {
  auto world = dist::world_communicator();
  const dist::GridSpec spec = opt.grid.empty() ? dist::GridSpec{1, 1, 1, world->size()} : dist::parse_grid(opt.grid);
  const dist::ProcessGrid grid = dist::ProcessGrid::create(world, spec);
  if (grid.is_root()) {
    fmt::print("gradsphere bench ensemble  (grid {}, {} rank(s), {} threads{})\n", spec.str(), world->size(),
               omp_get_max_threads(), opt.quick ? ", quick" : "");
    fmt::print("NoiseConditionedSFNO (embed 16, 4 layers) on legendre-gauss 32x64, batch 2, 2-step rollout, f32; "
               "K = 1: MSE, K > 1: fair CRPS.\nms/step: train_on_batch (median); peak MB: rank 0's allocator "
               "high-water mark over the timed steps.\n\n");
    fmt::print("{:>8} {:>10} {:>9} {:>12}\n", "members", "ms/step", "peak MB", "ms/member");
  }
  std::vector<Row> rows;
  for (int64_t K : {1, 2, 4, 8}) {
    if (K < grid.ensemble_size()) continue;  // every ensemble rank needs a member
    const Row r = run_members(K, opt.quick, grid);
    rows.push_back(r);
    if (grid.is_root())
      fmt::print("{:>8} {:>10.1f} {:>9.1f} {:>12.1f}\n", K, r.ms_step, r.peak_mb,
                 r.ms_step / static_cast<double>(K) * static_cast<double>(grid.ensemble_size()));
  }
  if (!opt.csv.empty() && grid.is_root())
    write_bench_csv(opt.csv, "bench ensemble", "grid,members,ms_step,peak_mb", [&](std::FILE* f) {
      for (const Row& r : rows) fmt::print(f, "{},{},{:.3f},{:.3f}\n", spec.str(), r.members, r.ms_step, r.peak_mb);
    });
  return 0;
}

}  // namespace gs::tools
