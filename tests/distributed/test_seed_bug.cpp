// The seed bug, reproduced: a DDP-style broadcast of every buffer between the forward steps of a
// two-step rollout writes into a Legendre table that the SHT saved for backward. A stack without
// read-only tables (emulated here by lifting the flag) gets the version-counter error naming the
// op, the shape and both versions; with gradsphere's policy (constant tables are read-only and
// never broadcast, mutable buffers only at step boundaries) the same run trains.
#include <doctest/doctest.h>

#include "distributed/communicator.h"
#include "distributed/world.h"
#include "engine/factory.h"
#include "ops/ops.h"
#include "ops/sphere/legendre/table.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/sht_common.h"
#include "models/module.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::sphere;

namespace {

// Two steps u -> isht(sht(u) * 0.9); `between` runs between them (where DDP broadcasts buffers).
Tensor rollout_loss(const Tensor& u0, const ShtSpec& spec, const std::function<void()>& between) {
  Tensor u1 = isht(mul(sht(u0, spec), 0.9), spec);
  between();
  Tensor u2 = isht(mul(sht(u1, spec), 0.9), spec);
  return sum(mul(u2, u2));
}

}  // namespace

TEST_CASE("seed bug: a buffer broadcast into a saved Legendre table between rollout steps") {
  auto world = dist::world_communicator();
  ShtSpec spec = make_sht_spec(GridKind::legendre_gauss, 8, 16);
  auto table = legendre_table_cached(detail::table_key(spec, LegendreTableKind::analysis, DType::f64));
  Tensor values = table->values;
  REQUIRE(values.storage()->read_only());
  const std::string reason = values.storage()->read_only_reason();
  Tensor u0 = randn({2, 8, 16}, {9, 1}, DType::f64).set_requires_grad();

  // gradsphere's policy: a DDP-style broadcast of the table is refused outright (read-only), and
  // the policy (constants never broadcast) leaves the run untouched.
  CHECK(gs_test::contains(gs_test::error_of([&] { world->all_reduce(values, dist::ReduceOp::sum); }), reason));
  Tensor loss = rollout_loss(u0, spec, [] {});
  loss.backward();
  Tensor grad_ok = u0.grad();
  REQUIRE(grad_ok.defined());

  // The seed's stack: tables are plain buffers, broadcast with the other buffers mid-rollout.
  values.storage()->set_read_only("");
  Tensor u = randn({2, 8, 16}, {9, 1}, DType::f64).set_requires_grad();
  const uint64_t before = values.version();
  Tensor bad_loss = rollout_loss(u, spec, [&] {
    // rank 0's table is the same numbers: the write changes nothing but the version, as in the seed
    if (world->size() > 1) world->broadcast(values, 0);
    else bump_version(values);
  });
  std::string err = gs_test::error_of([&] { bad_loss.backward(); });
  values.storage()->set_read_only(reason);
  if (world->size() > 1 && world->rank() == 0) {
    // The broadcast's source is not written (its version stays): rank 0 trains on, the others fail.
    CHECK(err == "(no error)");
    return;
  }
  CHECK(gs_test::contains(err, "legendre_analysis"));
  CHECK(gs_test::contains(err, "(f64, " + shape_str(values.sizes()) + ")"));
  CHECK(gs_test::contains(err, fmt::format("version {}", before)));
  CHECK(gs_test::contains(err, fmt::format("version {}", before + 1)));

  // And the same rollout under the policy trains again, with the gradient of the first run.
  Tensor u3 = randn({2, 8, 16}, {9, 1}, DType::f64).set_requires_grad();
  rollout_loss(u3, spec, [] {}).backward();
  CHECK(u3.grad().to_vector<double>() == grad_ok.to_vector<double>());
}

namespace {
struct WithBuffers : models::Module {
  Tensor running, table;
  WithBuffers(double rank) : Module("WithBuffers") {
    running = register_buffer("running_mean", full({3}, rank, DType::f64), models::BufferKind::mutable_state);
    table = register_buffer("table", full({4}, 2.0, DType::f64), models::BufferKind::constant);
  }
};
}  // namespace

TEST_CASE("buffers at a step boundary: mutable ones follow rank 0, constant ones are never written") {
  auto world = dist::world_communicator();
  auto grid = dist::ProcessGrid::create(world, {world->size(), 1, 1});
  WithBuffers m(world->rank());
  const uint64_t table_version = m.table.version();
  models::sync_mutable_buffers(m, grid);
  CHECK(m.running.to_vector<double>() == std::vector<double>(3, 0.0));
  CHECK(m.table.version() == table_version);
}
