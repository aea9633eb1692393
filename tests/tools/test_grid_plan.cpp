// `--grid auto`: the cost model of distributed/grid_planner.h on stated inputs, its inputs from a
// configured model (tools/grid_plan.h), and the `distributed.grid: auto` / `cost_model` keys.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "distributed/grid_planner.h"
#include "engine/device.h"
#include "models/sfno.h"
#include "tests/test_util.h"
#include "tools/grid_plan.h"
#include "tools/train_config.h"

using namespace gs;
using gs_test::contains;
using gs_test::error_of;

namespace {

// A stated workload: one 32x64 transform kind, 64 fields, 10 per forward; a GFLOP per sample.
dist::PlannerWorkload stated_workload() {
  dist::PlannerWorkload w;
  w.flops_per_sample = 1e9;
  w.legendre_share = 0;
  w.compute_spec = sphere::ShtSpec{sphere::GridKind::legendre_gauss, 32, 64, 32, 32};
  w.nlat = 32, w.nlon = 64;
  w.transforms = {{w.compute_spec, 64, 10}};
  w.batch = 4;
  return w;
}

dist::CostInputs fast_machine() {
  dist::CostInputs in;
  in.flops_per_second = 1e10, in.bandwidth_bytes_per_second = 1e10, in.latency_seconds = 1e-6;
  return in;
}

std::vector<std::string> order_of(const dist::GridPlan& plan) {
  std::vector<std::string> out;
  for (const auto& c : plan.ranked) out.push_back(c.grid.str());
  return out;
}

// The bench dist SFNO (tools/bench/bench_dist.cpp): 91x180 equiangular, embed 32, 4 layers, scale
// factor 2, 3 channels, Adam, batch 2, 2-step rollout.
const std::string kBenchDistSfno = R"(
data:
  source: swe
  swe: {grid: equiangular, nlat: 91, nlon: 180}
model: {type: sfno, embed_dim: 32, num_layers: 4, scale_factor: 2, normalization_layer: instance_norm}
training: {batch_size: 2, rollout_steps: 2}
)";

}  // namespace

TEST_CASE("grid planner: the step time of stated inputs, term by term") {
  dist::PlannerWorkload w = stated_workload();
  w.transforms.clear();
  w.replicated_bytes = 1e8;  // 4 buckets of 25 MiB
  dist::CostInputs in;
  in.flops_per_second = 1e9, in.bandwidth_bytes_per_second = 1e8, in.latency_seconds = 1e-3;
  const dist::GridCost c = dist::predict_step({2, 1, 1}, w, in);
  CHECK(c.compute == doctest::Approx(2.0));           // 2 samples x 1 GFLOP at 1 GFLOP/s
  CHECK(c.transposes == 0);
  CHECK(c.allreduce == doctest::Approx(1.0 + 8e-3));  // 2 (n-1)/n x 100 MB at 100 MB/s + 4 x 2 (n-1) latencies
  CHECK(c.step == doctest::Approx(3.008));
  in.allreduce_hidden_share = 0.5;  // the reducer's overlap: half of it hidden behind backward
  CHECK(dist::predict_step({2, 1, 1}, w, in).allreduce == doctest::Approx(0.504));
  in.allreduce_hidden_share = 1;    // all of it: the last bucket stays exposed
  const double last = 1.008 * (25 << 20) / 1e8;
  CHECK(dist::predict_step({2, 1, 1}, w, in).allreduce == doctest::Approx(last));
  w.flops_per_sample = 1e8;         // at most the backward (2/3 of compute) hides it
  CHECK(dist::predict_step({2, 1, 1}, w, in).allreduce == doctest::Approx(1.008 - 0.2 * 2 / 3.0));
  w.batch = 3;                      // 2 replicas: the busiest reads 2 samples of 3
  CHECK(dist::predict_step({2, 1, 1}, w, in).compute == doctest::Approx(0.2));
}

TEST_CASE("grid planner: over a slow network every rank is a data replica") {
  dist::PlannerWorkload w = stated_workload();
  w.replicated_bytes = 1e5, w.h_split_bytes = 1e6;
  dist::CostInputs in = fast_machine();
  in.bandwidth_bytes_per_second = 1e6, in.latency_seconds = 1e-3;
  const dist::GridPlan plan = dist::plan_grids(4, w, in, {});
  CHECK(plan.best().grid.str() == "4x1x1");
  CHECK(plan.best().transposes == 0);
  // On a fast network with a small batch the sphere is split instead (one sample per replica
  // leaves no data parallelism beyond the batch, and compute shrinks with h x w).
  w.batch = 1;
  const dist::GridPlan fast = dist::plan_grids(4, w, fast_machine(), {});
  CHECK(fast.best().grid.h * fast.best().grid.w == 4);
}

TEST_CASE("grid planner: a large model under a tight memory limit must split the sphere") {
  dist::PlannerWorkload w = stated_workload();
  w.h_split_bytes = 4e9;  // the spectral weights, split over h
  w.replicated_bytes = 1e6;
  dist::CostInputs in = fast_machine();
  in.memory_limit_bytes = 8e9;  // x (weight, gradient, Adam's two moments, the reducer's bucket) = 5
  const dist::GridPlan plan = dist::plan_grids(4, w, in, {});
  CHECK(plan.best().grid.str() == "1x4x1");
  CHECK(plan.ranked.size() == 1);
  bool noted = false;
  for (const auto& [g, why] : plan.excluded)
    if (g.str() == "4x1x1") noted = contains(why, "over the limit of 8 GB");
  CHECK(noted);
  in.memory_limit_bytes = 1e9;
  CHECK(contains(error_of([&] { dist::plan_grids(4, w, in, {}); }), "expected at least one grid of 4 ranks"));
}

TEST_CASE("grid planner: ties are broken deterministically (data, then h, then fewer ensemble ranks)") {
  dist::PlannerWorkload w = stated_workload();
  w.transforms.clear();  // nothing but even compute: every grid of 4 ranks costs the same
  const dist::GridPlan plan = dist::plan_grids(4, w, fast_machine(), {});
  CHECK(order_of(plan) == std::vector<std::string>{"4x1x1", "2x2x1", "2x1x2", "1x4x1", "1x2x2", "1x1x4"});
  for (size_t i = 0; i + 1 < plan.ranked.size(); ++i) {
    CHECK(dist::rank_before(plan.ranked[i], plan.ranked[i + 1]));
    CHECK_FALSE(dist::rank_before(plan.ranked[i + 1], plan.ranked[i]));
  }
}

TEST_CASE("grid planner: the chosen grid is legal for the batch, the members and the sphere") {
  tools::TrainConfig c = tools::train_config_from_string(
      "data:\n  swe: {nlat: 8, nlon: 16}\nmodel: {embed_dim: 8, num_layers: 2}\ntraining: {batch_size: 4}\n", "t.yaml");
  const dist::PlannerWorkload w = tools::planner_workload(c, tools::planned_data_info(c));
  const dist::GridPlan plan = dist::plan_grids(12, w, fast_machine(), tools::training_grid_check(c, Device::cpu()));
  for (const auto& g : plan.ranked) {
    CHECK(c.training.batch_size % g.grid.data == 0);
    CHECK(g.grid.h <= 8);
    CHECK(g.grid.w <= 16);
  }
  std::map<std::string, std::string> why;
  for (auto& [k, v] : plan.excluded) why[k.str()] = v;
  CHECK(contains(why["3x2x2"], "does not split evenly over 3 data-parallel replicas"));
  CHECK(contains(why["1x12x1"], "every rank needs a row and a column"));
  CHECK(contains(why["12x1x1"], "training.batch_size 4"));
  // On a GPU the training code refuses spatial splits: only data parallelism is left.
  const dist::GridPlan gpu = dist::plan_grids(4, w, fast_machine(), tools::training_grid_check(c, Device::cuda(0)));
  CHECK(order_of(gpu) == std::vector<std::string>{"4x1x1"});
  // An ensemble of 2 members: the ensemble axis is planned too, and more ensemble ranks than members
  // are refused by the training code's own check.
  tools::TrainConfig e = tools::train_config_from_string(
      "data:\n  swe: {grid: legendre-gauss, nlat: 8, nlon: 16}\nmodel: {type: noise_sfno, embed_dim: 8, num_layers: 2}\n"
      "training: {batch_size: 1, ensemble_members: 2}\nloss: {type: crps}\n", "e.yaml");
  const dist::PlannerWorkload we = tools::planner_workload(e, tools::planned_data_info(e));
  CHECK(we.members == 2);
  const dist::GridPlan ens = dist::plan_grids(4, we, fast_machine(), tools::training_grid_check(e, Device::cpu()));
  const std::vector<std::string> order = order_of(ens);
  CHECK(std::find(order.begin(), order.end(), "2x1x1x2") != order.end());
  std::map<std::string, std::string> why_e;
  for (auto& [k, v] : ens.excluded) why_e[k.str()] = v;
  CHECK(contains(why_e["4x1x1x1"], "ensemble axis has 4 ranks but there are 2 members"));
}

TEST_CASE("grid planner: the configured model's inputs (parameters by reduction group, transposes as bench dist sent)") {
  tools::TrainConfig c = tools::train_config_from_string(kBenchDistSfno, "bench_dist.yaml");
  const models::TrajectoryInfo info = tools::planned_data_info(c);
  CHECK(info.channels() == 3);
  const dist::PlannerWorkload w = tools::planner_workload(c, info);
  CHECK(w.flops_per_sample > 0);
  CHECK(w.legendre_share > 0);
  CHECK(w.legendre_share < 1);
  CHECK(w.w_split_bytes == 0);  // bench dist: the gradients are whole at w = 2 (1.543 MB on every grid of w)
  // What bench dist measured per rank per step (distributed/BENCHMARKS.md, 2026-12-01): 1.543 MB of
  // gradients in all, 0.822 MB at h = 2; the transposes (2026-12-05, with the encoder folded into
  // the first block's coefficients: 3 channels transformed there, not 32) 21.16 MB at 1x2x1 and
  // 27.86 MB at 1x1x2.
  const dist::CostInputs in = fast_machine();
  // (bench dist counts the reducer's payload, groups of one rank included: the whole at w = 2, the
  // replicated part and half the h-split part at h = 2; only the replicated part leaves a rank there.)
  CHECK((w.replicated_bytes + w.h_split_bytes) / 1e6 == doctest::Approx(1.543).epsilon(0.01));
  CHECK((w.replicated_bytes + w.h_split_bytes / 2) / 1e6 == doctest::Approx(0.822).epsilon(0.01));
  CHECK(dist::predict_step({1, 1, 2}, w, in).allreduce_bytes == doctest::Approx(w.replicated_bytes + w.h_split_bytes));
  CHECK(dist::predict_step({1, 2, 1}, w, in).allreduce_bytes == doctest::Approx(w.replicated_bytes));
  CHECK(dist::predict_step({1, 2, 1}, w, in).transpose_bytes / 1e6 == doctest::Approx(21.16).epsilon(0.01));
  CHECK(dist::predict_step({1, 1, 2}, w, in).transpose_bytes / 1e6 == doctest::Approx(27.86).epsilon(0.01));
}

TEST_CASE("train config: distributed.grid auto and distributed.cost_model") {
  tools::TrainConfig c = tools::train_config_from_string(
      "distributed:\n  grid: auto\n  cost_model:\n    flops_per_second: 2.0e10\n    latency_seconds: 0\n"
      "    transpose_hidden_share: 0.25\n",
      "auto.yaml");
  CHECK(c.distributed.grid == "auto");
  CHECK(*c.distributed.cost_model.flops_per_second == 2e10);
  CHECK(*c.distributed.cost_model.latency_seconds == 0);
  CHECK_FALSE(c.distributed.cost_model.bandwidth_bytes_per_second.has_value());  // measured at start-up
  CHECK(c.distributed.cost_model.transpose_hidden_share == 0.25);
  CHECK(c.distributed.cost_model.allreduce_hidden_share == 0);
  CHECK(c.distributed.tape_reducer);  // the default
  CHECK_FALSE(tools::train_config_from_string("distributed:\n  reducer: hooks\n", "h.yaml").distributed.tape_reducer);
  auto err = [](const std::string& text) { return error_of([&] { tools::train_config_from_string(text, "bad.yaml"); }); };
  std::string e = err("distributed:\n  grid: automatic\n");
  CHECK(contains(e, "'automatic'"));
  CHECK(contains(e, "or auto"));
  e = err("distributed:\n  cost_model:\n    flops_per_second: 0\n");
  CHECK(contains(e, "flops_per_second"));
  e = err("distributed:\n  cost_model:\n    bandwidth: 1.0e9\n");
  CHECK(contains(e, "bandwidth"));
  e = err("distributed:\n  reducer: ddp\n");
  CHECK(contains(e, "reducer"));
  CHECK(contains(e, "hooks"));
  e = err("distributed:\n  cost_model:\n    allreduce_hidden_share: 1.5\n");
  CHECK(contains(e, "allreduce_hidden_share"));
}

TEST_CASE("grid planner: the SFNO's folded forms are counted as the model runs them") {
  // Equiangular 17x32, scale factor 2: internal 9x16, lmax = mmax = 8; embed 8, hidden 16, 3
  // channels in and out, no bias: the encoder and the decoder fold (models::sfno_folds_*).
  const std::string text =
      "data:\n  swe: {grid: equiangular, nlat: 17, nlon: 32}\n"
      "model: {type: sfno, embed_dim: 8, num_layers: 2, scale_factor: 2, fold_encoder_decoder: ";
  tools::TrainConfig folded = tools::train_config_from_string(text + "true}\n", "folded.yaml");
  tools::TrainConfig plain = tools::train_config_from_string(text + "false}\n", "plain.yaml");
  REQUIRE(models::sfno_folds_encoder(folded.model.sfno));
  REQUIRE(models::sfno_folds_decoder(folded.model.sfno));
  const models::TrajectoryInfo info = tools::planned_data_info(folded);
  REQUIRE(info.channels() == 3);
  const double diff = tools::planner_workload(plain, info).flops_per_sample -
                      tools::planner_workload(folded, info).flops_per_sample;
  // The planner's transform of one field on the 17x32 grid: 2.5 n log2 n a row and 4 a row per
  // (l, m) pair, 36 pairs below lmax = mmax = 8.
  const double C = 8, hidden = 16, ch = 3, points = 17 * 32, coeffs = 8 * 8, transform = 17 * (2.5 * 32 * 5 + 4 * 36);
  const double forward_saved = (2 * ch * C * points - 4 * ch * C * coeffs)  // the encoder on coefficients
                               + (C - ch) * transform                       // block 0 transforms 3 channels, not 8
                               + 2 * C * ch * points                        // the decoder joins fc2
                               + 4 * C * hidden * points                    // fc1 and fc2 on the grid, plain
                               - (4 * C * hidden * coeffs + 2 * hidden * ch * points + 4 * C * ch * coeffs)
                               - ch * transform;  // hidden + 3 channels synthesised, not 2 x 8
  CHECK(diff == doctest::Approx(3 * forward_saved));  // forward and backward (twice the forward)
  CHECK(forward_saved > 0);
}
