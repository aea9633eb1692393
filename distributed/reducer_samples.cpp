// The registry entries of the reducer's tape ops (reducer.h): spatial_root_only, a projection onto
// the spatial root, on tiles of uneven splits (and empty tiles where the grid splits a dim finer
// than it has rows); replicated_loss_term on a term that every spatial rank computes alike, entered
// through copy_to_group over the spatial group. That sum stands for the reducer's: the term's
// gradient is then the global one, counted once, and without replicated_loss_term it would be
// counted once per spatial rank.
#include "distributed/collectives.h"
#include "distributed/dist_registry.h"
#include "distributed/reducer.h"

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

DistRegistrar reducer_ops{
    {"spatial_root_only", spatial_root_only_samples},
    {"replicated_loss_term", replicated_loss_term_samples},
};

}  // namespace
}  // namespace gs::dist
