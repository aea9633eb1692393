// Collectives as tape ops: forward against the one-process result (a global tensor built from
// global indices, cut the way each rank holds it), the halo against the sphere rule of
// local_conv3x3, the double-counting factor of a wrong backward, and the distributed registry
// walk (first and second order, adjoint identity) on every grid of the world.
#include <doctest/doctest.h>

#include "distributed/collectives.h"
#include "distributed/dist_gradcheck.h"
#include "engine/autograd/engine.h"
#include "engine/factory.h"
#include "ops/ops.h"
#include "ops/sphere/sfno_blocks.h"
#include "tests/distributed/dist_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::dist;

namespace {

// The global tensor g[i0, i1, ...] = sum_k i_k * 10^(dims-1-k) + 0.5, in f64.
Tensor global_indexed(const Shape& s) {
  Tensor t = empty(s, DType::f64);
  double* p = t.data<double>();
  for (int64_t e = 0; e < t.numel(); ++e) {
    int64_t rem = e, v = 0, scale = 1;
    for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
      v += (rem % s[d]) * scale;
      rem /= s[d];
      scale *= 10;
    }
    p[e] = static_cast<double>(v) + 0.5;
  }
  return t;
}

Tensor block_of(const Tensor& t, int64_t dim, const Communicator& comm) {
  Block b = split_block(t.size(dim), comm.size(), comm.rank());
  return contiguous(narrow(t, dim, b.start, b.count));
}

bool same(const Tensor& a, const Tensor& b) { return a.sizes() == b.sizes() && a.to_vector<double>() == b.to_vector<double>(); }

const Group kGroups[] = {Group::world, Group::data, Group::h, Group::w, Group::spatial};

}  // namespace

TEST_CASE("collective forwards equal the one-process result, uneven and empty blocks included") {
  gs::test::for_each_grid([](const ProcessGrid& grid) {
    for (Group g : kGroups) {
      CAPTURE(group_name(g));
      auto comm = grid.comm(g);
      const int n = comm->size();
      for (int64_t len : {int64_t{17}, int64_t{2}}) {  // 17 over 3 ranks; 2 over 4 leaves ranks empty
        CAPTURE(len);
        Tensor whole = global_indexed({3, len, 4});
        Tensor mine = block_of(whole, 1, *comm);
        CHECK(same(gather_along(mine, 1, len, comm), whole));
        CHECK(same(scatter_along(whole, 1, comm), mine));
        // transpose: split along dim 1 -> split along dim 2 (and back)
        Tensor wide = global_indexed({2, len, 5});
        Tensor t = transpose(block_of(wide, 1, *comm), 1, 2, len, comm);
        CHECK(same(t, block_of(wide, 2, *comm)));
        CHECK(same(transpose(t, 2, 1, 5, comm), block_of(wide, 1, *comm)));
      }
      // reduce_replicated: rank r contributes (r + 1) * x
      Tensor x = global_indexed({2, 3});
      Tensor y = reduce_replicated(mul(x, double(comm->rank() + 1)), comm);
      CHECK(same(y, mul(x, double(n * (n + 1) / 2))));
      CHECK(same(copy_to_group(x, comm), x));
      CHECK_FALSE(copy_to_group(x, comm).is_view());
    }
  });
}

TEST_CASE("halo_exchange fills every halo point as local_conv3x3 reads the sphere") {
  gs::test::for_each_grid([](const ProcessGrid& grid) {
    struct Case {
      int64_t nlat, nlon, hr, hc;
    };
    for (Case c : {Case{5, 6, 1, 1}, Case{9, 8, 2, 3}, Case{4, 4, 3, 1}, Case{7, 9, 0, 2}}) {
      if (grid.h_size() > c.nlat || grid.w_size() > c.nlon) continue;
      CAPTURE(c.nlat);
      CAPTURE(c.nlon);
      Tensor field = global_indexed({2, c.nlat, c.nlon});
      Block r = grid.local_lat(c.nlat), k = grid.local_lon(c.nlon);
      Tensor tile = contiguous(narrow(narrow(field, 1, r.start, r.count), 2, k.start, k.count));
      Tensor ext = halo_exchange(tile, grid, c.hr, c.hc, c.nlat, c.nlon);
      REQUIRE(ext.sizes() == Shape{2, r.count + 2 * c.hr, k.count + 2 * c.hc});
      const double* f = field.data<double>();
      auto e = ext.to_vector<double>();
      int bad = 0;
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t er = 0; er < ext.size(1); ++er)
          for (int64_t ec = 0; ec < ext.size(2); ++ec) {
            HaloSource s = halo_source(r.start + er - c.hr, k.start + ec - c.hc, c.nlat, c.nlon);
            bad += e[(b * ext.size(1) + er) * ext.size(2) + ec] != f[(b * c.nlat + s.row) * c.nlon + s.col];
          }
      CHECK(bad == 0);
      // The adjoint of the exchange is its backward: <halo(x), y> = <x, adjoint(y)> is in the registry walk.
    }
  });
  // halo_source is local_conv3x3's sphere rule (sphere_neighbour_index) for a 3x3 stencil.
  for (int64_t h = 0; h < 5; ++h)
    for (int64_t w = 0; w < 6; ++w)
      for (int64_t dh = 0; dh < 3; ++dh)
        for (int64_t dw = 0; dw < 3; ++dw) {
          auto a = sphere::sphere_neighbour_index(h, w, dh, dw, 5, 6);
          auto b = halo_source(h + dh - 1, w + dw - 1, 5, 6);
          CHECK((a.row == b.row && a.col == b.col));
        }
}

TEST_CASE("halo_exchange refuses what it cannot do, naming it") {
  ProcessGrid one;
  Tensor x = zeros({1, 5, 7}, DType::f64);
  CHECK(gs_test::contains(gs_test::error_of([&] { halo_exchange(x, one, 1, 1, 5, 7); }), "needs an even nlon; got nlon 7"));
  CHECK(gs_test::contains(gs_test::error_of([&] { halo_exchange(x, one, 1, 1, 5, 8); }),
                          "expected its tile of 5 x 8 points"));
  CHECK(gs_test::contains(gs_test::error_of([&] { halo_exchange(x, one, 9, 1, 5, 8); }), "halo rows <= nlat (5)"));
}

TEST_CASE("the seed's double counting: an all-reduce as reduce_replicated's backward multiplies by the group size") {
  auto world = world_communicator();
  auto grid = ProcessGrid::create(world, {1, 1, world->size()});
  auto comm = grid.comm(Group::w);
  Tensor x = full({3}, 1.0, DType::f64).set_requires_grad();
  // Correct: loss = sum(reduce_replicated(x)) counted once -> d loss / d x = 1 on every rank.
  Tensor loss = sum(reduce_replicated(x, comm));
  loss.backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>(3, 1.0));
  // Wrong (the seed): the backward sums over the group too.
  struct WrongReduce {
    static std::vector<Tensor> forward(FunctionCtx&, const std::vector<Tensor>& in) {
      Tensor y = contiguous_copy(in[0], true);
      world_communicator()->all_reduce(y, ReduceOp::sum);
      return {y};
    }
    static std::vector<Tensor> backward(FunctionCtx&, const std::vector<Tensor>& g) {
      Tensor s = contiguous_copy(g[0], true);
      world_communicator()->all_reduce(s, ReduceOp::sum);
      return {s};
    }
  };
  Tensor x2 = full({3}, 1.0, DType::f64).set_requires_grad();
  sum(apply_function<WrongReduce>("wrong_reduce", {x2})[0]).backward();
  CHECK(x2.grad().to_vector<double>() == std::vector<double>(3, double(world->size())));
}

TEST_CASE("the distributed registry: gradcheck, gradgradcheck and the adjoint identity on every grid") {
  CHECK(DistRegistry::all().size() >= 15);  // the collectives and the distributed sphere ops
  // Grids with an ensemble axis at 2 and 3 ranks (its groups' samples). At 4 ranks only the grids
  // that split two axes (1x2x2, 2x1x2, 2x2x1): a 4-way split of one axis repeats what the 2- and
  // 3-rank runs check (one axis split evenly, unevenly, with interior ranks), and this is the
  // suite's longest case (73 of its 110 s at 4 ranks on 2 cores with every grid).
  const bool four = world_communicator()->size() == 4;
  gs::test::for_each_grid([four](const ProcessGrid& grid) {
    if (four && (grid.data_size() == 4 || grid.h_size() == 4 || grid.w_size() == 4)) return;
    for (const auto& op : DistRegistry::all()) {
      for (const auto& sample : op.samples(grid, {77, 1})) {
        CAPTURE(op.name);
        CAPTURE(sample.label);
        auto first = dist_gradcheck(grid, sample);
        CHECK_MESSAGE(first.ok, first.failure);
        if (op.second_order) {
          auto second = dist_gradgradcheck(grid, sample);
          CHECK_MESSAGE(second.ok, second.failure);
        }
        if (sample.linear) {  // the adjoint identity is a property of linear maps
          auto adj = dist_adjoint_check(grid, sample, {78, 1});
          CHECK_MESSAGE(adj.ok, adj.failure);
        }
        auto jvp = dist_jvpcheck(grid, sample);  // forward mode across ranks
        CHECK_MESSAGE(jvp.ok, jvp.failure);
      }
    }
  }, /*with_ensemble=*/!four);
}

TEST_CASE("the distributed gradcheck catches a wrong backward rule") {
  auto world = world_communicator();
  if (world->size() == 1) return;
  auto grid = ProcessGrid::create(world, {1, 1, world->size()});
  auto comm = grid.comm(Group::w);
  // copy_to_group with an identity backward: the missing all-reduce loses the other ranks' uses.
  struct CopyNoReduce {
    static std::vector<Tensor> forward(FunctionCtx&, const std::vector<Tensor>& in) { return {contiguous_copy(in[0], true)}; }
    static std::vector<Tensor> backward(FunctionCtx&, const std::vector<Tensor>& g) { return {g[0]}; }
  };
  DistSample s;
  s.label = "copy_to_group without its all-reduce";
  s.inputs = {dist_sample_leaf(grid, {3}, {5, 5}, Placement::replicated_over(Group::w))};
  s.input_placement = {Placement::replicated_over(Group::w)};
  s.output_placement = {Placement::per_rank()};
  s.fn = [](const std::vector<Tensor>& x) { return apply_function<CopyNoReduce>("copy_no_reduce", {x[0]}); };
  auto rep = dist_gradcheck(grid, s);
  CHECK_FALSE(rep.ok);
  CHECK(gs_test::contains(rep.failure, "Jacobian mismatch"));
}
