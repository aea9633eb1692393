// `--grid auto`: the process grid [E]xDxHxW of a run chosen from a cost model of one optimizer step
// (distributed/NOTES.md, "Choosing a grid"). This part is generic: it knows grids, transforms and
// collectives, not models; tools/grid_plan.cpp fills the workload from the configured model and
// the cost inputs from the configuration or start-up probes.
//
// Per grid, for the busiest rank (every term in seconds):
//   compute    = flops_per_sample * samples * recompute / (flops_per_second * H * W) * imbalance
//   transposes = (bytes / bandwidth + collectives * latency) * (1 - transpose_hidden_share)
//   all-reduce = sum over reduction groups of n > 1 ranks of 2 (n - 1) / n * bytes / bandwidth
//                + 2 (n - 1) * latency (a ring), less the hidden part (below)
//   step       = compute + transposes + all-reduce
// The all-reduce overlapped with backward (the reducer's buckets launched during backward) is
// credited as min(allreduce_hidden_share * all-reduce, backward compute = 2/3 of compute), leaving
// at least the last 25 MB bucket exposed (it starts when backward ends).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "distributed/process_grid.h"
#include "ops/sphere/sht.h"

namespace gs::dist {

// `count` transforms (sht or isht alike: their transposes move the same bytes) per forward pass of
// `fields_per_sample` fields per sample on `spec`.
struct PlannedTransform {
  sphere::ShtSpec spec;
  int64_t fields_per_sample = 0;
  int64_t count = 0;
};

// What one optimizer step of the model costs, whole (no grid applied).
struct PlannerWorkload {
  double flops_per_sample = 0;  // forward + backward of one sample through one rollout step
  double legendre_share = 0.15; // share of compute with the order imbalance over w (the contraction)
  sphere::ShtSpec compute_spec; // the sphere most compute runs on (tile and order imbalance)
  int64_t nlat = 0, nlon = 0;   // the data's sphere: every rank needs a row and a column of it
  std::vector<PlannedTransform> transforms;
  int64_t element_bytes = 4;    // of the fields the transposes move
  // The whole model's parameter bytes by how they are split (reducer.h: reduction_group):
  // replicated (reduced over world), over h (data_w), over w (data_h), over both (replicas).
  double replicated_bytes = 0, h_split_bytes = 0, w_split_bytes = 0, hw_split_bytes = 0;
  double optimizer_state_factor = 2;       // optimizer state bytes per parameter byte (Adam: 2)
  double activation_bytes_per_sample = 0;  // whole sphere, one rollout step, held for backward
  int64_t batch = 1, members = 1, rollout_steps = 1, micro_batches = 1;
  double compute_recompute = 1, transpose_recompute = 1;  // activation checkpointing reruns forwards
};

struct CostInputs {
  double flops_per_second = 0;
  double bandwidth_bytes_per_second = 0;
  double latency_seconds = 0;
  double memory_limit_bytes = 0;        // per rank; 0: no limit
  double transpose_hidden_share = 0;    // of transpose time hidden by pipelining (none on CPUs: 0)
  double allreduce_hidden_share = 0;    // of the all-reduce overlapped with backward (reducer)
};

struct GridCost {
  GridSpec grid;
  double compute = 0, transposes = 0, allreduce = 0, step = 0;  // seconds
  double imbalance = 1;                   // busiest rank's compute over the even share
  double transpose_bytes = 0;             // per rank per step
  double allreduce_bytes = 0;             // per rank per step (gradient payload)
  double memory_bytes = 0;                // per rank
};

// Why a grid cannot run ("" when it can): the training code's own checks (tools/grid_plan.cpp).
using GridCheck = std::function<std::string(const GridSpec&)>;

struct GridPlan {
  std::vector<GridCost> ranked;                              // fastest first, ties broken by rank_before
  std::vector<std::pair<GridSpec, std::string>> excluded;    // illegal or over the memory limit, with why
  const GridCost& best() const;
};

// The cost of one grid (no legality check).
GridCost predict_step(const GridSpec& grid, const PlannerWorkload& work, const CostInputs& in);
// Whether a is chosen before b: faster; at equal step time (within 1e-9 relative) more data
// parallelism, then more h (it moves less than w), then fewer ensemble ranks.
bool rank_before(const GridCost& a, const GridCost& b);
// Every grid of world_size ranks (with an ensemble axis when members > 1), checked by the sphere
// rule (every rank a row and a column of the data), by `check` and against the memory limit.
// Throws when none is left, with each grid's reason.
GridPlan plan_grids(int64_t world_size, const PlannerWorkload& work, const CostInputs& in, const GridCheck& check);
// The `top` best as a table (ms and GB columns) and the excluded grids with their reasons.
std::string format_plan(const GridPlan& plan, const CostInputs& in, size_t top = 3);

}  // namespace gs::dist
