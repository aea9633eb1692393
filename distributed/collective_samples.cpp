// The collective tape ops' entries in the distributed registry. Each op is sampled over every
// group of the current grid (sample_groups), in f64 and c128, with dims that do not divide evenly (17 over 3, 5
// over 2 or 4) and with dims smaller than the group (some ranks hold empty blocks).
#include "distributed/collectives.h"
#include "distributed/dist_registry.h"

namespace gs::dist {
namespace {

// The groups a sample runs over: the ensemble axis's two (ensemble, and replicas = ensemble x data)
// only on a grid that has one (with E = 1 they are a single rank and the data group).
std::vector<Group> sample_groups(const ProcessGrid& grid) {
  std::vector<Group> out = {Group::world, Group::data, Group::h, Group::w, Group::spatial};
  if (grid.ensemble_size() > 1) out.insert(out.end(), {Group::ensemble, Group::replicas});
  return out;
}

std::string group_label(Group g, const ProcessGrid& grid) {
  return fmt::format("group {} ({} ranks)", group_name(g), grid.group_size(g));
}

std::vector<DistSample> reduce_samples(const ProcessGrid& grid, RandomKey key) {
  std::vector<DistSample> out;
  uint64_t s = key.stream;
  for (Group g : sample_groups(grid)) {
    auto comm = grid.comm(g);
    for (DType dt : {DType::f64, DType::c128}) {
      DistSample d;
      d.label = fmt::format("{}, {}", group_label(g, grid), dtype_name(dt));
      d.inputs = {dist_sample_leaf(grid, {2, 3}, {key.seed, ++s}, Placement::per_rank(), dt)};
      d.input_placement = {Placement::per_rank()};
      d.output_placement = {Placement::replicated_over(g)};
      d.fn = [comm](const std::vector<Tensor>& x) { return std::vector<Tensor>{reduce_replicated(x[0], comm)}; };
      out.push_back(std::move(d));
    }
  }
  return out;
}

std::vector<DistSample> copy_samples(const ProcessGrid& grid, RandomKey key) {
  std::vector<DistSample> out;
  uint64_t s = key.stream;
  for (Group g : sample_groups(grid)) {
    auto comm = grid.comm(g);
    DistSample d;
    d.label = group_label(g, grid);
    d.inputs = {dist_sample_leaf(grid, {3, 2}, {key.seed, ++s}, Placement::replicated_over(g))};
    d.input_placement = {Placement::replicated_over(g)};
    d.output_placement = {Placement::per_rank()};
    d.fn = [comm](const std::vector<Tensor>& x) { return std::vector<Tensor>{copy_to_group(x[0], comm)}; };
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<DistSample> gather_samples(const ProcessGrid& grid, RandomKey key) {
  std::vector<DistSample> out;
  uint64_t s = key.stream;
  for (Group g : sample_groups(grid)) {
    auto comm = grid.comm(g);
    for (int64_t global : {int64_t{5}, int64_t{2}}) {
      const int64_t local = split_block(global, comm->size(), comm->rank()).count;
      DistSample d;
      d.label = fmt::format("{}, dim 1 of {}", group_label(g, grid), global);
      d.inputs = {dist_sample_leaf(grid, {2, local, 2}, {key.seed, ++s}, Placement::per_rank())};
      d.input_placement = {Placement::per_rank()};
      d.output_placement = {Placement::replicated_over(g)};
      d.fn = [comm, global](const std::vector<Tensor>& x) {
        return std::vector<Tensor>{gather_along(x[0], 1, global, comm)};
      };
      out.push_back(std::move(d));
    }
  }
  return out;
}

std::vector<DistSample> scatter_samples(const ProcessGrid& grid, RandomKey key) {
  std::vector<DistSample> out;
  uint64_t s = key.stream;
  for (Group g : sample_groups(grid)) {
    auto comm = grid.comm(g);
    for (int64_t global : {int64_t{5}, int64_t{2}}) {
      DistSample d;
      d.label = fmt::format("{}, dim 0 of {}", group_label(g, grid), global);
      d.inputs = {dist_sample_leaf(grid, {global, 3}, {key.seed, ++s}, Placement::replicated_over(g))};
      d.input_placement = {Placement::replicated_over(g)};
      d.output_placement = {Placement::per_rank()};
      d.fn = [comm](const std::vector<Tensor>& x) { return std::vector<Tensor>{scatter_along(x[0], 0, comm)}; };
      out.push_back(std::move(d));
    }
  }
  return out;
}

std::vector<DistSample> transpose_samples(const ProcessGrid& grid, RandomKey key) {
  std::vector<DistSample> out;
  uint64_t s = key.stream;
  for (Group g : sample_groups(grid)) {
    auto comm = grid.comm(g);
    // (from, to) globals: uneven both ways, and a dim smaller than the group.
    for (auto [from_g, to_g] : {std::pair<int64_t, int64_t>{5, 3}, {2, 7}}) {
      for (DType dt : {DType::f64, DType::c128}) {
        const int64_t local = split_block(from_g, comm->size(), comm->rank()).count;
        DistSample d;
        d.label = fmt::format("{}, split dim 1 of {} -> dim 2 of {}, {}", group_label(g, grid), from_g, to_g,
                              dtype_name(dt));
        d.inputs = {dist_sample_leaf(grid, {2, local, to_g}, {key.seed, ++s}, Placement::per_rank(), dt)};
        d.input_placement = {Placement::per_rank()};
        d.output_placement = {Placement::per_rank()};
        d.fn = [comm, from_g](const std::vector<Tensor>& x) {
          return std::vector<Tensor>{transpose(x[0], 1, 2, from_g, comm)};
        };
        out.push_back(std::move(d));
      }
    }
  }
  return out;
}

// Fields of (nlat, nlon) split over the grid's h and w groups; only grids whose split leaves every
// rank a row and a column.
std::vector<DistSample> halo_samples(const ProcessGrid& grid, RandomKey key, bool adjoint) {
  std::vector<DistSample> out;
  uint64_t s = key.stream;
  struct Case {
    int64_t nlat, nlon, hr, hc;
  };
  for (Case c : {Case{5, 6, 1, 1}, Case{4, 8, 2, 1}, Case{3, 4, 0, 2}}) {
    if (grid.h_size() > c.nlat || grid.w_size() > c.nlon) continue;
    const Block r = grid.local_lat(c.nlat), k = grid.local_lon(c.nlon);
    DistSample d;
    d.label = fmt::format("{}x{} field, halo {} x {}", c.nlat, c.nlon, c.hr, c.hc);
    Shape shape = adjoint ? Shape{1, 2, r.count + 2 * c.hr, k.count + 2 * c.hc} : Shape{1, 2, r.count, k.count};
    d.inputs = {dist_sample_leaf(grid, shape, {key.seed, ++s}, Placement::per_rank())};
    d.input_placement = {Placement::per_rank()};
    d.output_placement = {Placement::per_rank()};
    d.fn = [grid, c, adjoint](const std::vector<Tensor>& x) {
      return std::vector<Tensor>{adjoint ? halo_exchange_adjoint(x[0], grid, c.hr, c.hc, c.nlat, c.nlon)
                                         : halo_exchange(x[0], grid, c.hr, c.hc, c.nlat, c.nlon)};
    };
    out.push_back(std::move(d));
  }
  return out;
}

DistRegistrar collectives{
    {"reduce_replicated", reduce_samples},
    {"copy_to_group", copy_samples},
    {"gather_along", gather_samples},
    {"scatter_along", scatter_samples},
    {"transpose", transpose_samples},
    {"halo_exchange", [](const ProcessGrid& g, RandomKey k) { return halo_samples(g, k, false); }},
    {"halo_exchange_adjoint", [](const ProcessGrid& g, RandomKey k) { return halo_samples(g, k, true); }},
};

}  // namespace
}  // namespace gs::dist
