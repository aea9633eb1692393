// Data-parallel training through the stepper and the reducer equals one process on the global
// batch: the reported loss, raw parameter gradients (micro-batches and a 2-step rollout), the
// weights after 3 Adam steps, and a non-finite loss on one rank skipping the step on every rank.
#include <doctest/doctest.h>

#include <cmath>

#include "distributed/world.h"
#include "engine/factory.h"
#include "models/optim.h"
#include "models/sfno.h"
#include "models/stepper.h"
#include "ops/ops.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::models;

namespace {

constexpr int64_t B = 12;  // divides over 1-4 data replicas

SfnoOptions tiny() {
  SfnoOptions o;
  o.img_size = {8, 16};
  o.scale_factor = 2;
  o.in_chans = 2;
  o.out_chans = 2;
  o.embed_dim = 4;
  o.num_layers = 2;
  o.dtype = DType::f64;
  o.seed = 11;
  return o;
}

struct Run {
  std::shared_ptr<SFNO> model;
  std::shared_ptr<Adam> opt;
  std::shared_ptr<Stepper> stepper;
  Run() {
    model = std::make_shared<SFNO>(tiny());
    opt = std::make_shared<Adam>(model->named_parameters(), AdamOptions{.lr = 0.01});
    std::vector<double> area(8, 1.0);
    stepper = std::make_shared<Stepper>(model, opt, area, StepperOptions{.micro_batches = 2, .clip_grad_norm = 0.5});
  }
};

Batch global_batch(uint64_t stream) {
  return {randn({B, 2, 8, 16}, {21, stream}, DType::f64), randn({B, 2, 2, 8, 16}, {22, stream}, DType::f64)};
}

Batch share(const Batch& b, const dist::ProcessGrid& grid) {
  auto blk = dist::split_block(B, grid.data_size(), grid.data_rank());
  return {contiguous(narrow(b.input, 0, blk.start, blk.count)), contiguous(narrow(b.targets, 0, blk.start, blk.count))};
}

double rel(const Tensor& a, const Tensor& b) {
  auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  double num = 0, den = 0;
  for (size_t k = 0; k < va.size(); ++k) num = std::max(num, std::abs(va[k] - vb[k])), den = std::max(den, std::abs(vb[k]));
  return num / std::max(den, 1e-300);
}

}  // namespace

TEST_CASE("data-parallel stepper: loss, raw gradients and weights after 3 Adam steps equal one process") {
  auto world = dist::world_communicator();
  auto grid = dist::ProcessGrid::create(world, {world->size(), 1, 1});
  Run one, dp;
  dp.stepper->set_distributed(grid);
  Batch batch = global_batch(1);
  TrainResult r1 = one.stepper->compute_gradients(batch);
  TrainResult rd = dp.stepper->compute_gradients(share(batch, grid));
  CHECK(std::abs(rd.loss - r1.loss) <= 1e-12 * std::abs(r1.loss));
  CHECK(std::abs(rd.grad_norm - r1.grad_norm) <= 1e-12 * r1.grad_norm);
  auto p1 = one.model->named_parameters(), pd = dp.model->named_parameters();
  REQUIRE(p1.size() == pd.size());
  for (size_t i = 0; i < p1.size(); ++i) {
    CAPTURE(p1[i].name);
    REQUIRE(pd[i].tensor.grad().defined());
    CHECK(rel(pd[i].tensor.grad(), p1[i].tensor.grad()) < 1e-12);
  }
  CHECK(dp.stepper->reducer()->stats().passes == 1);  // two micro-batches, one reduction
  for (uint64_t s = 2; s <= 4; ++s) {
    Batch b = global_batch(s);
    one.stepper->train_on_batch(b);
    dp.stepper->train_on_batch(share(b, grid));
  }
  for (size_t i = 0; i < p1.size(); ++i) {
    CAPTURE(p1[i].name);
    CHECK(rel(pd[i].tensor, p1[i].tensor) < 1e-12);
  }
}

TEST_CASE("data-parallel stepper: a non-finite loss on one rank skips the step on every rank") {
  auto world = dist::world_communicator();
  auto grid = dist::ProcessGrid::create(world, {world->size(), 1, 1});
  Run dp;
  dp.stepper->set_distributed(grid);
  Batch b = share(global_batch(5), grid);
  // An infinity (a NaN would be a missing value, read as 0 and masked).
  if (world->rank() == world->size() - 1) b.input.data<double>()[3] = INFINITY;
  auto before = dp.model->parameters()[0].to_vector<double>();
  std::string err = gs_test::error_of([&] { dp.stepper->train_on_batch(b); });
  CHECK(gs_test::contains(err, "the optimizer step was not applied"));
  CHECK(dp.model->parameters()[0].to_vector<double>() == before);
  CHECK(dp.stepper->global_step() == 0);
  // The job goes on: the next healthy step runs on every rank.
  dp.stepper->train_on_batch(share(global_batch(6), grid));
  CHECK(dp.stepper->global_step() == 1);
}
