// The distributed sphere ops' entries in the distributed registry: small transforms whose splits
// are uneven (5 rows, 9 columns), with fewer fields than ranks, and odd nlon. A parameter that
// every rank holds alike (a norm's weight) enters through copy_to_group over the world, which makes
// its gradient the global one (what the reducer's sum gives a model's parameters).
#include "distributed/collectives.h"
#include "distributed/dist_registry.h"
#include "distributed/pipelined_sht.h"
#include "distributed/sphere_blocks.h"
#include "distributed/sphere_transforms.h"
#include "engine/factory.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/spectral_conv.h"

namespace gs::dist {
namespace {

using sphere::ShtSpec;
using V = std::vector<Tensor>;

std::vector<ShtSpec> sample_specs() {
  return {sphere::make_sht_spec(sphere::GridKind::legendre_gauss, 5, 8, 4, 4),
          sphere::make_sht_spec(sphere::GridKind::equiangular, 5, 9, 3, 3)};
}

std::string spec_label(const ShtSpec& s) { return fmt::format("{} {}x{}", sphere::grid_name(s.grid), s.nlat, s.nlon); }

// Runs the transforms in `chunks` chunks (pipelined_sht.h; 0: the setting as it is), restoring it after.
struct ChunksScope {
  explicit ChunksScope(int chunks) : active(chunks > 0), previous(active ? set_sht_pipeline_chunks(chunks) : 0) {}
  ~ChunksScope() {
    if (active) set_sht_pipeline_chunks(previous);
  }
  ChunksScope(const ChunksScope&) = delete;
  ChunksScope& operator=(const ChunksScope&) = delete;
  bool active;
  int previous;
};

// forward: a field tile (1, 2, rows, cols) -> coefficients; inverse: coefficients -> a tile. Then
// the first spec again on 4 fields (already flat: (4, [2,] rows, cols)) pipelined in 2 chunks, so
// that its tape ops (the transform and its adjoint) are what the gradients come from.
std::vector<DistSample> transform_samples(const ProcessGrid& grid, RandomKey key, bool inverse, bool vector) {
  std::vector<DistSample> out;
  uint64_t s = key.stream;
  auto add = [&](const ShtSpec& spec, Shape shape, int chunks) {
    DistSample d;
    d.label = chunks > 0 ? spec_label(spec) + ", 4 fields pipelined in 2 chunks" : spec_label(spec);
    if (inverse) shape.insert(shape.end(), {local_degrees(grid, spec.lmax).count, local_orders(grid, spec.mmax).count});
    else shape.insert(shape.end(), {grid.local_lat(spec.nlat).count, grid.local_lon(spec.nlon).count});
    d.inputs = {
        dist_sample_leaf(grid, shape, {key.seed, ++s}, Placement::per_rank(), inverse ? DType::c128 : DType::f64)};
    d.input_placement = {Placement::per_rank()};
    d.output_placement = {Placement::per_rank()};
    d.fn = [spec, grid, inverse, vector, chunks](const V& x) {
      ChunksScope scope(chunks);
      if (vector) return V{inverse ? ivector_sht(x[0], spec, grid) : vector_sht(x[0], spec, grid)};
      return V{inverse ? isht(x[0], spec, grid) : sht(x[0], spec, grid)};
    };
    out.push_back(std::move(d));
  };
  for (const ShtSpec& spec : sample_specs()) add(spec, {1, 2}, 0);
  add(sample_specs()[0], vector ? Shape{4, 2} : Shape{4}, 2);
  return out;
}

std::vector<DistSample> instance_norm_samples(const ProcessGrid& grid, RandomKey key) {
  std::vector<DistSample> out;
  uint64_t s = key.stream;
  for (bool quadrature : {false, true}) {
    const int64_t nlat = 5, nlon = 6, C = 3;
    DistSample d;
    d.label = quadrature ? "legendre-gauss quadrature weights" : "uniform";
    d.inputs = {dist_sample_leaf(grid, {2, C, grid.local_lat(nlat).count, grid.local_lon(nlon).count}, {key.seed, ++s},
                                 Placement::per_rank()),
                dist_sample_leaf(grid, {C}, {key.seed, ++s}, Placement::replicated_over(Group::world)),
                dist_sample_leaf(grid, {C}, {key.seed, ++s}, Placement::replicated_over(Group::world))};
    d.input_placement = {Placement::per_rank(), Placement::replicated_over(Group::world),
                         Placement::replicated_over(Group::world)};
    d.output_placement = {Placement::per_rank()};
    d.linear = false;
    const Tensor q = quadrature ? from_vector(sphere::make_quadrature(sphere::GridKind::legendre_gauss, nlat).weights)
                                : Tensor();
    d.fn = [grid, q, nlat, nlon](const V& x) {
      const CommPtr& world = grid.comm(Group::world);
      return V{instance_norm(x[0], copy_to_group(x[1], world), copy_to_group(x[2], world), 1e-5, q, nlat, nlon, grid)};
    };
    out.push_back(std::move(d));
  }
  return out;
}

// sht -> spectral convolution with this rank's shard of the weight -> isht. A shard is held alike
// by the ranks of its reduction group (data x w for a weight split over h; data for one split
// both ways): copy_to_group over that group makes its gradient the global one, which is what the
// reducer's sum gives the model (reduction_group in reducer.h).
std::vector<DistSample> spectral_filter_samples(const ProcessGrid& grid, RandomKey key) {
  std::vector<DistSample> out;
  uint64_t s = key.stream;
  const ShtSpec spec = sample_specs()[0];
  const int64_t cin = 2, cout = 3;
  for (auto op : {sphere::SpectralOperator::driscoll_healy, sphere::SpectralOperator::diagonal}) {
    const bool diagonal = op == sphere::SpectralOperator::diagonal;
    const Block l = local_degrees(grid, spec.lmax), m = local_orders(grid, spec.mmax);
    Shape wshape{cin, cout, l.count};
    if (diagonal) wshape.push_back(m.count);
    const Group group = diagonal ? Group::data : Group::data_w;
    DistSample d;
    d.label = diagonal ? "diagonal, weight split by degree and order" : "driscoll-healy, weight split by degree";
    d.inputs = {dist_sample_leaf(grid, {1, cin, grid.local_lat(spec.nlat).count, grid.local_lon(spec.nlon).count},
                                 {key.seed, ++s}, Placement::per_rank()),
                dist_sample_leaf(grid, wshape, {key.seed, ++s}, Placement::replicated_over(group), DType::c128)};
    d.input_placement = {Placement::per_rank(), Placement::replicated_over(group)};
    d.output_placement = {Placement::per_rank()};
    d.linear = false;  // bilinear in (x, weight)
    d.fn = [grid, spec, op, group](const V& x) {
      const Tensor w = copy_to_group(x[1], grid.comm(group));
      return V{isht(sphere::spectral_conv(sht(x[0], spec, grid), w, op), spec, grid)};
    };
    out.push_back(std::move(d));
  }
  return out;
}

// The layer norm over the grid with this rank's tile of the (H, W) affine parameters (held alike
// over the data group).
std::vector<DistSample> grid_layer_norm_samples(const ProcessGrid& grid, RandomKey key) {
  const int64_t nlat = 5, nlon = 6;
  uint64_t s = key.stream;
  const Shape tile{grid.local_lat(nlat).count, grid.local_lon(nlon).count};
  const Placement over_data = Placement::replicated_over(Group::data);
  DistSample d;
  d.label = "5x6 field, affine (H, W) by tile";
  d.inputs = {dist_sample_leaf(grid, {2, 2, tile[0], tile[1]}, {key.seed, ++s}, Placement::per_rank()),
              dist_sample_leaf(grid, tile, {key.seed, ++s}, over_data),
              dist_sample_leaf(grid, tile, {key.seed, ++s}, over_data)};
  d.input_placement = {Placement::per_rank(), over_data, over_data};
  d.output_placement = {Placement::per_rank()};
  d.linear = false;
  d.fn = [grid, nlat, nlon](const V& x) {
    const CommPtr& data = grid.comm(Group::data);
    return V{grid_layer_norm(x[0], copy_to_group(x[1], data), copy_to_group(x[2], data), 1e-5, nlat, nlon, grid)};
  };
  return {std::move(d)};
}

std::vector<DistSample> local_conv_samples(const ProcessGrid& grid, RandomKey key) {
  const int64_t nlat = 6, nlon = 8;
  if (grid.h_size() > nlat || grid.w_size() > nlon) return {};
  uint64_t s = key.stream;
  DistSample d;
  d.label = "6x8 field, 2 -> 3 channels";
  d.inputs = {dist_sample_leaf(grid, {1, 2, grid.local_lat(nlat).count, grid.local_lon(nlon).count}, {key.seed, ++s},
                               Placement::per_rank()),
              dist_sample_leaf(grid, {3, 2, 3, 3}, {key.seed, ++s}, Placement::replicated_over(Group::world)),
              dist_sample_leaf(grid, {3}, {key.seed, ++s}, Placement::replicated_over(Group::world))};
  d.input_placement = {Placement::per_rank(), Placement::replicated_over(Group::world),
                       Placement::replicated_over(Group::world)};
  d.output_placement = {Placement::per_rank()};
  d.linear = false;  // bilinear in (x, weight)
  d.fn = [grid, nlat, nlon](const V& x) {
    const CommPtr& world = grid.comm(Group::world);
    return V{local_conv3x3(x[0], copy_to_group(x[1], world), copy_to_group(x[2], world), nlat, nlon, grid)};
  };
  return {std::move(d)};
}

std::vector<DistSample> area_samples(const ProcessGrid& grid, RandomKey key, bool mse) {
  const int64_t nlat = 5, nlon = 7;
  const std::vector<double> aw = sphere::make_quadrature(sphere::GridKind::equiangular, nlat).weights;
  uint64_t s = key.stream;
  const Shape tile{2, 2, grid.local_lat(nlat).count, grid.local_lon(nlon).count};
  DistSample d;
  d.label = "5x7 field, equiangular weights";
  d.inputs = {dist_sample_leaf(grid, tile, {key.seed, ++s}, Placement::per_rank())};
  if (mse) d.inputs.push_back(dist_sample_leaf(grid, tile, {key.seed, ++s}, Placement::per_rank()));
  d.input_placement = std::vector<Placement>(d.inputs.size(), Placement::per_rank());
  d.output_placement = {Placement::replicated_over(Group::spatial)};
  d.linear = !mse;
  d.fn = [grid, aw, nlon, mse](const V& x) {
    return V{mse ? area_weighted_mse(x[0], x[1], aw, nlon, grid) : area_weighted_mean(x[0], aw, nlon, grid)};
  };
  return {std::move(d)};
}

DistRegistrar sphere_ops{
    {"dist::sht", [](const ProcessGrid& g, RandomKey k) { return transform_samples(g, k, false, false); }},
    {"dist::isht", [](const ProcessGrid& g, RandomKey k) { return transform_samples(g, k, true, false); }},
    {"dist::vector_sht", [](const ProcessGrid& g, RandomKey k) { return transform_samples(g, k, false, true); }},
    {"dist::ivector_sht", [](const ProcessGrid& g, RandomKey k) { return transform_samples(g, k, true, true); }},
    {"dist::spectral_filter", spectral_filter_samples},
    {"dist::instance_norm", instance_norm_samples},
    {"dist::grid_layer_norm", grid_layer_norm_samples},
    {"dist::local_conv3x3", local_conv_samples},
    {"dist::area_weighted_mean", [](const ProcessGrid& g, RandomKey k) { return area_samples(g, k, false); }},
    {"dist::area_weighted_mse", [](const ProcessGrid& g, RandomKey k) { return area_samples(g, k, true); }},
};

}  // namespace
}  // namespace gs::dist
