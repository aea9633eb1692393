// The registry entries of the reducer's tape ops (reducer.h): reduce_gradients, the tape
// reducer's bucket node; spatial_root_only, a projection onto
// the spatial root, on tiles of uneven splits (and empty tiles where the grid splits a dim finer
// than it has rows); replicated_loss_term on a term that every spatial rank computes alike, entered
// through copy_to_group over the spatial group. That sum stands for the reducer's: the term's
// gradient is then the global one, counted once, and without replicated_loss_term it would be
// counted once per spatial rank.
#include "distributed/collectives.h"
#include "distributed/dist_registry.h"
#include "distributed/reducer.h"
#include "ops/elementwise.h"

namespace gs::dist {
namespace {

using V = std::vector<Tensor>;

std::vector<DistSample> spatial_root_only_samples(const ProcessGrid& grid, RandomKey key) {
  std::vector<DistSample> out;
  uint64_t s = key.stream;
  struct Case {
    int64_t nlat, nlon;
    DType dtype;
  };
  // 5 x 7 splits unevenly over 2, 3 and 4 ranks; 2 x 3 leaves some ranks an empty tile.
  for (Case c : {Case{5, 7, DType::f64}, Case{5, 7, DType::c128}, Case{2, 3, DType::f64}}) {
    DistSample d;
    d.label = fmt::format("{}x{} field by tile, {}", c.nlat, c.nlon, dtype_name(c.dtype));
    d.inputs = {dist_sample_leaf(grid, {2, grid.local_lat(c.nlat).count, grid.local_lon(c.nlon).count},
                                 {key.seed, ++s}, Placement::per_rank(), c.dtype)};
    d.input_placement = {Placement::per_rank()};
    d.output_placement = {Placement::per_rank()};
    d.fn = [grid](const V& x) { return V{spatial_root_only(x[0], grid)}; };
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<DistSample> replicated_loss_term_samples(const ProcessGrid& grid, RandomKey key) {
  std::vector<DistSample> out;
  uint64_t s = key.stream;
  const Placement over_spatial = Placement::replicated_over(Group::spatial);
  for (const Shape& shape : {Shape{}, Shape{3}}) {
    DistSample d;
    d.label = shape.empty() ? "a scalar term" : "a (3) term";
    d.inputs = {dist_sample_leaf(grid, shape, {key.seed, ++s}, over_spatial)};
    d.input_placement = {over_spatial};
    d.output_placement = {over_spatial};
    d.fn = [grid](const V& x) {
      return V{replicated_loss_term(copy_to_group(x[0], grid.comm(Group::spatial)), grid)};
    };
    out.push_back(std::move(d));
  }
  return out;
}

// The tape reducer's node (reducer.h, mode tape) as an op: the identity on parameters replicated
// over their reduction groups (world; data x w for one sharded over h), each rank's output its own
// (so the global function copies the parameter to every rank, and its adjoint sums: the reduction).
// A reducer is built per call, on the call's leaves; under forward mode the inputs are duals
// (not leaves) and the identity carries their tangents without the node.
std::vector<DistSample> reduce_gradients_samples(const ProcessGrid& grid, RandomKey key) {
  const Placement over_world = Placement::replicated_over(Group::world);
  const Placement over_data_w = Placement::replicated_over(Group::data_w);
  DistSample d;
  d.label = "a replicated (2, 3) and an h-sharded (rows) parameter, one bucket each";
  const int64_t rows = grid.local_lat(5).count;
  d.inputs = {dist_sample_leaf(grid, {2, 3}, {key.seed, key.stream + 1}, over_world),
              dist_sample_leaf(grid, {rows, 2}, {key.seed, key.stream + 2}, over_data_w)};
  d.input_placement = {over_world, over_data_w};
  d.output_placement = {Placement::per_rank(), Placement::per_rank()};
  d.fn = [grid](const V& x) {
    const bool routable = x[0].is_leaf() && x[0].requires_grad() && x[1].is_leaf() && x[1].requires_grad();
    if (!routable) return V{mul(x[0], 1.0), mul(x[1], 1.0)};
    GradientReducer reducer(grid,
                            {{"replicated", x[0], Distribution::replicated()},
                             {"rows", x[1], Distribution::sharded_along(0, GridAxis::h)}},
                            {.bucket_bytes = 8});
    ReducedForward scope = reducer.forward_scope();
    return V{mul(x[0], 1.0), mul(x[1], 1.0)};
  };
  return {d};
}

DistRegistrar reducer_ops{
    {"reduce_gradients", reduce_gradients_samples},
    {"spatial_root_only", spatial_root_only_samples},
    {"replicated_loss_term", replicated_loss_term_samples},
};

}  // namespace
}  // namespace gs::dist
