#include "distributed/grid_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "distributed/sphere_transforms.h"
#include "engine/error.h"

namespace gs::dist {
namespace {

constexpr double kBucketBytes = 25u << 20;  // ReducerOptions::bucket_bytes

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The largest block of n split into parts, over the even share (1 when it divides).
double block_imbalance(int64_t n, int64_t parts) {
  if (parts <= 1 || n <= 0) return 1.0;
  return static_cast<double>(split_block(n, parts, 0).count) * static_cast<double>(parts) / static_cast<double>(n);
}

// The busiest w rank's share of the Legendre work over the even share: order m contracts lmax - m
// degrees, and the orders are split in contiguous blocks (split_block), so the low orders weigh most.
double order_imbalance(int64_t lmax, int64_t mmax, int64_t w) {
  if (w <= 1 || mmax <= 0) return 1.0;
  double total = 0, busiest = 0;
  for (int64_t j = 0; j < w; ++j) {
    const Block b = split_block(mmax, w, j);
    double work = 0;
    for (int64_t m = b.start; m < b.start + b.count; ++m) work += static_cast<double>(std::max<int64_t>(lmax - m, 0));
    total += work, busiest = std::max(busiest, work);
  }
  return total > 0 ? busiest * static_cast<double>(w) / total : 1.0;
}

// One ring all-reduce of `bytes` per rank over n ranks, in buckets of the reducer's size.
double ring_seconds(double bytes, int64_t n, const CostInputs& in) {
  if (n <= 1 || bytes <= 0) return 0.0;
  const double buckets = std::ceil(bytes / kBucketBytes);
  const double k = static_cast<double>(n);
  return 2 * (k - 1) / k * bytes / in.bandwidth_bytes_per_second + buckets * 2 * (k - 1) * in.latency_seconds;
}

void check_inputs(const PlannerWorkload& w, const CostInputs& in) {
  GS_CHECK(in.flops_per_second > 0 && in.bandwidth_bytes_per_second > 0 && in.latency_seconds >= 0 &&
               in.memory_limit_bytes >= 0,
           "grid planner: expected flops_per_second > 0, bandwidth_bytes_per_second > 0, latency_seconds >= 0 and "
           "memory_limit_bytes >= 0, got {:g}, {:g}, {:g}, {:g}",
           in.flops_per_second, in.bandwidth_bytes_per_second, in.latency_seconds, in.memory_limit_bytes);
  for (double share : {in.transpose_hidden_share, in.allreduce_hidden_share, w.legendre_share})
    GS_CHECK(share >= 0 && share <= 1, "grid planner: expected shares (hidden transposes, hidden all-reduce, Legendre "
             "share of compute) in [0, 1], got {:g}", share);
  GS_CHECK(w.batch >= 1 && w.members >= 1 && w.rollout_steps >= 1 && w.micro_batches >= 1 && w.nlat >= 1 &&
               w.nlon >= 1,
           "grid planner: expected batch, members, rollout steps, micro-batches and the sphere >= 1, got {}, {}, {}, "
           "{}, {}x{}", w.batch, w.members, w.rollout_steps, w.micro_batches, w.nlat, w.nlon);
}

}  // namespace

const GridCost& GridPlan::best() const {
  GS_CHECK(!ranked.empty(), "grid planner: no grid is left to choose from");
  return ranked.front();
}

GridCost predict_step(const GridSpec& g, const PlannerWorkload& w, const CostInputs& in) {
  check_inputs(w, in);
  GridCost c;
  c.grid = g;
  const double tiles = static_cast<double>(g.h * g.w);
  const int64_t members_here = split_block(w.members, std::min(g.ensemble, w.members), 0).count;
  const double samples = static_cast<double>(ceil_div(w.batch, g.data) * members_here * w.rollout_steps);
  const double forwards = static_cast<double>(w.micro_batches * members_here * w.rollout_steps);

  const sphere::ShtSpec& s = w.compute_spec;
  const double tile_imbalance = block_imbalance(s.nlat, g.h) * block_imbalance(s.nlon, g.w);
  c.imbalance = (1 - w.legendre_share) * tile_imbalance + w.legendre_share * order_imbalance(s.lmax, s.mmax, g.w);
  c.compute = w.flops_per_sample * samples * w.compute_recompute / (in.flops_per_second * tiles) * c.imbalance;

  // Forward and backward move the same bytes (the backward of a transpose is its inverse).
  const ProcessGrid layout(1, g.h, g.w, 0);
  const DType dtype = w.element_bytes == 8 ? DType::f64 : DType::f32;
  double per_sample = 0, collectives = 0;
  for (const PlannedTransform& t : w.transforms) {
    per_sample += static_cast<double>(t.count) *
                  static_cast<double>(sht_min_bytes_sent(t.spec, t.fields_per_sample, dtype, layout));
    collectives += static_cast<double>(t.count * (2 * (g.w > 1) + 2 * (g.h > 1)));
  }
  c.transpose_bytes = 2 * per_sample * samples * w.transpose_recompute;
  c.transposes = (c.transpose_bytes / in.bandwidth_bytes_per_second +
                  2 * collectives * forwards * w.transpose_recompute * in.latency_seconds) *
                 (1 - in.transpose_hidden_share);

  // Each parameter's gradient is reduced over the group that holds copies of its shard.
  const int64_t reps = g.ensemble * g.data;
  const std::vector<std::pair<double, int64_t>> groups = {{w.replicated_bytes, g.size()},
                                                          {w.h_split_bytes / static_cast<double>(g.h), reps * g.w},
                                                          {w.w_split_bytes / static_cast<double>(g.w), reps * g.h},
                                                          {w.hw_split_bytes / tiles, reps}};
  for (const auto& [bytes, n] : groups) {
    c.allreduce += ring_seconds(bytes, n, in);
    if (n > 1) c.allreduce_bytes += bytes;
  }
  // The overlap: hidden behind backward up to its length; the last bucket starts when backward ends.
  if (c.allreduce_bytes > 0) {
    const double last = c.allreduce * std::min(1.0, kBucketBytes / c.allreduce_bytes);
    c.allreduce = std::max(c.allreduce - std::min(in.allreduce_hidden_share * c.allreduce, c.compute * 2.0 / 3.0), last);
  }
  c.step = c.compute + c.transposes + c.allreduce;

  double params = 0;
  for (const auto& [bytes, n] : groups) params += bytes;
  const double copies = 2 + w.optimizer_state_factor + (g.size() > 1 ? 1 : 0);  // + grad, state, buckets
  const double held = static_cast<double>(ceil_div(ceil_div(w.batch, g.data), w.micro_batches) * members_here *
                                          w.rollout_steps);
  c.memory_bytes = params * copies + w.activation_bytes_per_sample * held / tiles * tile_imbalance;
  return c;
}

bool rank_before(const GridCost& a, const GridCost& b) {
  if (std::abs(a.step - b.step) > 1e-9 * std::max(a.step, b.step)) return a.step < b.step;
  if (a.grid.data != b.grid.data) return a.grid.data > b.grid.data;
  if (a.grid.h != b.grid.h) return a.grid.h > b.grid.h;
  return a.grid.ensemble < b.grid.ensemble;
}

GridPlan plan_grids(int64_t world_size, const PlannerWorkload& w, const CostInputs& in, const GridCheck& check) {
  check_inputs(w, in);
  GridPlan plan;
  for (const GridSpec& g : all_grids(world_size, w.members > 1)) {
    std::string why;
    if (g.h > w.nlat || g.w > w.nlon)
      why = fmt::format("splits the {}x{} sphere over {} x {} ranks (h x w): every rank needs a row and a column",
                        w.nlat, w.nlon, g.h, g.w);
    if (why.empty() && check) why = check(g);
    GridCost c;
    if (why.empty()) {
      c = predict_step(g, w, in);
      if (in.memory_limit_bytes > 0 && c.memory_bytes > in.memory_limit_bytes)
        why = fmt::format("needs {:.3g} GB per rank, over the limit of {:.3g} GB", c.memory_bytes / 1e9,
                          in.memory_limit_bytes / 1e9);
    }
    if (why.empty()) plan.ranked.push_back(c);
    else plan.excluded.emplace_back(g, why);
  }
  if (plan.ranked.empty()) {
    std::string reasons;
    for (const auto& [g, why] : plan.excluded) reasons += fmt::format("\n  {}: {}", g.str(), why);
    fail("--grid auto: expected at least one grid of {} ranks that this run allows, got none:{}", world_size, reasons);
  }
  std::stable_sort(plan.ranked.begin(), plan.ranked.end(), rank_before);
  return plan;
}

std::string format_plan(const GridPlan& plan, const CostInputs& in, size_t top) {
  const bool one_process = !plan.ranked.empty() && plan.ranked.front().grid.size() == 1;
  std::string s = fmt::format(
      "--grid auto: {:.3g} GFLOP/s, {}{}; predicted step:\n"
      "  grid        step ms  compute  transposes  all-reduce  memory GB/rank\n",
      in.flops_per_second / 1e9,
      one_process ? std::string("one process (no communication)")
                  : fmt::format("{:.3g} GB/s, {:.3g} us per collective", in.bandwidth_bytes_per_second / 1e9,
                                in.latency_seconds * 1e6),
      in.memory_limit_bytes > 0 ? fmt::format(", limit {:.3g} GB per rank", in.memory_limit_bytes / 1e9) : "");
  for (size_t i = 0; i < plan.ranked.size() && i < top; ++i) {
    const GridCost& c = plan.ranked[i];
    s += fmt::format("  {:<10} {:>8.2f} {:>8.2f} {:>11.2f} {:>11.2f} {:>15.3f}{}\n", c.grid.str(), c.step * 1e3,
                     c.compute * 1e3, c.transposes * 1e3, c.allreduce * 1e3, c.memory_bytes / 1e9,
                     i == 0 ? "  <- chosen" : "");
  }
  for (const auto& [g, why] : plan.excluded) s += fmt::format("  excluded {}: {}\n", g.str(), why);
  return s;
}

}  // namespace gs::dist
