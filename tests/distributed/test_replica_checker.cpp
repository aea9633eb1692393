// The replica checker (GS_CHECK_REPLICAS=1): it names the collective calls when ranks disagree,
// and catches a wrong backward rule, a missing spatial gradient reduction and noise drawn from
// rank-local indices: the three ways spatial ranks silently drift apart.
#include <doctest/doctest.h>

#include "distributed/collectives.h"
#include "distributed/reducer.h"
#include "distributed/replica_check.h"
#include "engine/factory.h"
#include "ops/ops.h"
#include "tests/distributed/dist_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::dist;

namespace {
struct CheckerOn {
  CheckerOn() { set_check_replicas(true); }
  ~CheckerOn() { set_check_replicas(false); }
};
}  // namespace

TEST_CASE("replica checker: ranks that reach different collectives get an error naming both calls") {
  auto world = world_communicator();
  if (world->size() == 1) return;
  CheckerOn on;
  std::string err = gs_test::error_of([&] {
    Tensor t = ones({3}, DType::f64);
    if (world->rank() == 1) world->barrier();
    else world->all_reduce(t, ReduceOp::sum);
  });
  CHECK(gs_test::contains(err, "ranks reached different collectives on group 'world'"));
  CHECK(gs_test::contains(err, "all_reduce(sum) f64 x 3"));
  CHECK(gs_test::contains(err, "rank 1 is at call"));
  CHECK(gs_test::contains(err, "'barrier'"));
  // Both ranks stepped past the mismatch together: the next collective works.
  Tensor t = ones({1}, DType::f64);
  world->all_reduce(t, ReduceOp::sum);
  CHECK(t.item<double>() == world->size());
}

TEST_CASE("replica checker: a collective with a wrong backward rule is caught where replication breaks") {
  auto world = world_communicator();
  if (world->size() == 1) return;
  auto grid = ProcessGrid::create(world, {1, 1, world->size()});
  auto comm = grid.comm(Group::w);
  CheckerOn on;
  // copy_to_group with an identity backward (Megatron's classic slip): each rank's gradient of the
  // replicated tensor holds only its own use, so the copies differ.
  struct CopyNoReduce {
    static std::vector<Tensor> forward(FunctionCtx&, const std::vector<Tensor>& in) { return {contiguous_copy(in[0], true)}; }
    static std::vector<Tensor> backward(FunctionCtx&, const std::vector<Tensor>& g) { return {g[0]}; }
  };
  Tensor x = full({4}, 1.0, DType::f64).set_requires_grad();
  Tensor replicated = reduce_replicated(x, comm);
  Tensor per_rank = apply_function<CopyNoReduce>("copy_no_reduce", {replicated})[0];
  Tensor loss = sum(mul(per_rank, double(comm->rank() + 1)));
  std::string err = gs_test::error_of([&] { loss.backward(); });
  CHECK(gs_test::contains(err, "the gradient reaching reduce_replicated's output is declared replicated over group 'w'"));
  CHECK(gs_test::contains(err, "largest difference"));
  // The correct rule passes the same check.
  Tensor x2 = full({4}, 1.0, DType::f64).set_requires_grad();
  sum(mul(copy_to_group(reduce_replicated(x2, comm), comm), double(comm->rank() + 1))).backward();
  CHECK(x2.grad().to_vector<double>() == std::vector<double>(4, double(comm->size() * (comm->size() + 1) / 2)));
}

TEST_CASE("replica checker: a missing spatial gradient reduction makes the parameters drift apart") {
  auto world = world_communicator();
  if (world->size() == 1) return;
  auto grid = ProcessGrid::create(world, {1, world->size(), 1});
  Tensor w = full({3}, 0.5, DType::f64).set_requires_grad();
  std::vector<ReducedParameter> params{{"block.weight", w, Distribution::replicated()}};
  // Each spatial rank sees its own tile of data; no reducer, then an SGD step.
  Tensor tile = full({3}, double(grid.h_rank() + 1), DType::f64);
  sum(mul(w, tile)).backward();
  {
    NoGradGuard ng;
    add_(w, w.grad(), -0.1);
  }
  std::string err = gs_test::error_of([&] { check_parameters_replicated(grid, params); });
  CHECK(gs_test::contains(err, "parameter 'block.weight' (replicated) is declared replicated over group 'world'"));
  CHECK(gs_test::contains(err, "ranks 0 and 1 hold different values"));
  // With the reducer the same step keeps them equal.
  Tensor w2 = full({3}, 0.5, DType::f64).set_requires_grad();
  std::vector<ReducedParameter> params2{{"block.weight", w2, Distribution::replicated()}};
  GradientReducer reducer(grid, params2);
  {
    ReducedForward scope = reducer.forward_scope();
    Tensor loss = sum(mul(w2, tile));
    loss.backward();
  }
  {
    NoGradGuard ng;
    add_(w2, w2.grad(), -0.1);
  }
  CHECK(gs_test::error_of([&] { check_parameters_replicated(grid, params2); }) == "(no error)");
}

TEST_CASE("replica checker: noise drawn from rank-local indices is caught at copy_to_group") {
  auto world = world_communicator();
  if (world->size() == 1) return;
  auto grid = ProcessGrid::create(world, {1, 1, world->size()});
  auto comm = grid.comm(Group::w);
  CheckerOn on;
  // A conditioning vector every spatial rank must draw alike: keyed by the global index it is.
  Tensor good = randn({8}, {3, 0}, DType::f64);
  CHECK(copy_to_group(good, comm).numel() == 8);
  // Drawn with the rank in the key (or from rank-local indices): each rank holds other noise.
  Tensor bad = randn({8}, {3, static_cast<uint64_t>(grid.world_rank())}, DType::f64);
  std::string err = gs_test::error_of([&] { copy_to_group(bad, comm); });
  CHECK(gs_test::contains(err, "the input of copy_to_group is declared replicated over group 'w'"));
}
