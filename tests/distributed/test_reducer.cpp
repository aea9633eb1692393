// The gradient reducer against one process, in both modes (tape and hooks): raw gradients (not
// optimizer-updated weights, which would hide scale errors) of replicated and sharded parameters,
// gradient accumulation, a parameter without a gradient, global-norm clipping, the weight-penalty
// rule and bucket order. What only the tape reducer does (double backward across ranks, the DOT
// export): test_tape_reducer.cpp.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>

#include "distributed/collectives.h"
#include "distributed/nccl_communicator.h"
#include "distributed/reducer.h"
#include "engine/cuda_runtime.h"
#include "engine/factory.h"
#include "ops/ops.h"
#include "tests/distributed/dist_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::dist;

namespace {

constexpr int64_t B = 12, C = 2, H = 5, W = 6;  // B divides over 1-4 data replicas

struct Problem {
  Tensor x;      // (B, C, H, W)
  Tensor area;   // (H)
  Tensor w0, sh0, sw0;  // initial parameter values: (C, C), (H), (W)
};

Problem on_device(Problem p, Device dev) {
  for (Tensor* t : {&p.x, &p.area, &p.w0, &p.sh0, &p.sw0}) *t = to_device_copy(*t, dev);
  return p;
}

Problem make_problem() {
  Problem p;
  p.x = randn({B, C, H, W}, {11, 1}, DType::f64);
  p.area = add(rand({H}, {11, 2}, DType::f64), 0.5);
  p.w0 = randn({C, C}, {11, 3}, DType::f64);
  p.sh0 = randn({H}, {11, 4}, DType::f64);
  p.sw0 = randn({W}, {11, 5}, DType::f64);
  return p;
}

// sum over the given points of a_h * (Wm x + sh_h + sw_w)^2, for x (b, C, h, w).
Tensor point_sum(const Tensor& x, const Tensor& wm, const Tensor& sh, const Tensor& sw, const Tensor& area) {
  Tensor y = matmul(permute(x, {0, 2, 3, 1}), transpose(wm, 0, 1));  // (b, h, w, C)
  y = add(add(y, reshape(sh, {-1, 1, 1})), reshape(sw, {1, -1, 1}));
  return sum(mul(mul(y, y), reshape(area, {-1, 1, 1})));
}

struct Params {
  Tensor wm, sh, sw, unused;
  std::vector<ReducedParameter> list() const {
    return {{"wm", wm, Distribution::replicated()},
            {"sh", sh, Distribution::sharded_along(0, GridAxis::h)},
            {"sw", sw, Distribution::sharded_along(0, GridAxis::w)},
            {"unused", unused, Distribution::replicated()}};
  }
};

Tensor leaf(const Tensor& t) { return contiguous_copy(t, true).set_requires_grad(); }

// This rank's parameters: the replicated ones whole, the sharded ones cut to the tile.
Params local_params(const Problem& p, const ProcessGrid& grid) {
  Block r = grid.local_lat(H), c = grid.local_lon(W);
  return {leaf(p.w0), leaf(narrow(p.sh0, 0, r.start, r.count)), leaf(narrow(p.sw0, 0, c.start, c.count)),
          leaf(ones({2}, DType::f64, p.x.device()))};
}

// This rank's share of the global loss (1/B) sum_b point_sum: its batch block and tile, summed
// over the spatial group (reduce_replicated), as the mean over its own batch (the reducer
// averages the data replicas). `batch` narrows the local batch further (micro-batches).
Tensor local_loss(const Problem& p, const Params& q, const ProcessGrid& grid, Block batch) {
  Block r = grid.local_lat(H), c = grid.local_lon(W);
  Tensor x = narrow(narrow(narrow(p.x, 0, batch.start, batch.count), 2, r.start, r.count), 3, c.start, c.count);
  Tensor area = narrow(p.area, 0, r.start, r.count);
  Tensor part = point_sum(x, q.wm, q.sh, q.sw, area);
  return div(reduce_replicated(part, grid.comm(Group::spatial)), double(B / grid.data_size()));
}

Block my_batch(const ProcessGrid& grid) { return split_block(B, grid.data_size(), grid.data_rank()); }

constexpr ReducerMode kModes[] = {ReducerMode::tape, ReducerMode::hooks};
const char* mode_name(ReducerMode m) { return m == ReducerMode::tape ? "tape" : "hooks"; }

// One backward pass of a step as the mode wants it: in tape mode the forward runs inside the
// reducer's forward scope and the replica backpropagates its part of the global loss.
void reduced_backward(GradientReducer& r, const std::function<Tensor()>& replica_loss) {
  ReducedForward scope = r.forward_scope();
  Tensor loss = replica_loss();
  (r.loss_scale() == 1.0 ? loss : mul(loss, r.loss_scale())).backward();
}

struct Reference {
  Tensor wm, sh, sw;  // one-process gradients
};
Reference one_process(const Problem& p, double penalty = 0.0) {
  Tensor wm = leaf(p.w0), sh = leaf(p.sh0), sw = leaf(p.sw0);
  Tensor loss = div(point_sum(p.x, wm, sh, sw, p.area), double(B));
  if (penalty != 0.0) loss = add(loss, mul(sum(mul(wm, wm)), penalty));
  loss.backward();
  return {wm.grad(), sh.grad(), sw.grad()};
}

double rel_diff(const Tensor& a, const Tensor& b) {
  auto va = a.to_vector<double>(), vb = b.to_vector<double>();
  REQUIRE(va.size() == vb.size());
  double num = 0, den = 0;
  for (size_t k = 0; k < va.size(); ++k) num = std::max(num, std::abs(va[k] - vb[k])), den = std::max(den, std::abs(vb[k]));
  return num / std::max(den, 1e-300);
}

void check_against(const Params& q, const Reference& ref, const ProcessGrid& grid, double scale = 1.0) {
  Block r = grid.local_lat(H), c = grid.local_lon(W);
  CHECK(rel_diff(q.wm.grad(), mul(ref.wm, scale)) < 1e-12);
  CHECK(rel_diff(q.sh.grad(), mul(narrow(ref.sh, 0, r.start, r.count), scale)) < 1e-12);
  CHECK(rel_diff(q.sw.grad(), mul(narrow(ref.sw, 0, c.start, c.count), scale)) < 1e-12);
}

}  // namespace

TEST_CASE("reducer: raw gradients of replicated and sharded parameters equal one process on every grid") {
  Problem p = make_problem();
  Reference ref = one_process(p);
  for (ReducerMode mode : kModes) gs::test::for_each_grid([&](const ProcessGrid& grid) {
    CAPTURE(mode_name(mode));
    Params q = local_params(p, grid);
    GradientReducer reducer(grid, q.list(), {.mode = mode});
    reduced_backward(reducer, [&] { return local_loss(p, q, grid, my_batch(grid)); });
    check_against(q, ref, grid);
    CHECK_FALSE(q.unused.grad().defined());  // no rank had a gradient: stays undefined, as in one process
    CHECK(reducer.stats().passes == 1);
    check_parameters_replicated(grid, q.list());
    // A second step after zeroing: the same gradients again (no stale value, buckets rebuilt).
    for (auto& t : {q.wm, q.sh, q.sw}) t.set_grad(Tensor());
    reduced_backward(reducer, [&] { return local_loss(p, q, grid, my_batch(grid)); });
    check_against(q, ref, grid);
  });
}

TEST_CASE("reducer: gradients on a GPU are reduced there and equal one process on the CPU") {
  if (cuda::device_count() == 0) {
    MESSAGE("skipped: no GPU (" << cuda::unavailable_reason() << ")");
    return;
  }
  const Device dev = local_rank_device();
  Problem p = make_problem();
  Reference ref = one_process(p);
  Problem pd = on_device(p, dev);
  for (ReducerMode mode : kModes) gs::test::for_each_grid([&](const ProcessGrid& grid) {
    CAPTURE(mode_name(mode));
    Params q = local_params(pd, grid);
    GradientReducer reducer(grid, q.list(), {.mode = mode});
    reduced_backward(reducer, [&] { return local_loss(pd, q, grid, my_batch(grid)); });
    CHECK(q.wm.grad().device() == dev);
    check_against(q, ref, grid);
    CHECK_FALSE(q.unused.grad().defined());
    check_parameters_replicated(grid, q.list());
  });
  // Parameters on two devices cannot share buckets.
  Tensor a = leaf(p.w0), b = leaf(pd.w0);
  CHECK(gs_test::contains(gs_test::error_of([&] {
                            GradientReducer r(ProcessGrid{}, {{"a", a, Distribution::replicated()},
                                                               {"b", b, Distribution::replicated()}});
                          }),
                          "expected one device for all"));
}

TEST_CASE("reducer: accumulation over micro-batches reduces once, after the last") {
  Problem p = make_problem();
  Reference ref = one_process(p);
  for (ReducerMode mode : kModes) gs::test::for_each_grid([&](const ProcessGrid& grid) {
    CAPTURE(mode_name(mode));
    Params q = local_params(p, grid);
    GradientReducer reducer(grid, q.list(), {.mode = mode});
    Block b = my_batch(grid);
    Block first{b.start, b.count / 2}, second{b.start + b.count / 2, b.count - b.count / 2};
    reducer.prepare_for_backward(false);
    reduced_backward(reducer, [&] { return local_loss(p, q, grid, first); });
    CHECK(reducer.stats().passes == 0);
    reducer.prepare_for_backward(true);
    reduced_backward(reducer, [&] { return local_loss(p, q, grid, second); });
    CHECK(reducer.stats().passes == 1);
    check_against(q, ref, grid);
  });
}

TEST_CASE("reducer: a parameter used in one step and not the next keeps no stale gradient") {
  Problem p = make_problem();
  for (ReducerMode mode : kModes) gs::test::for_each_grid([&](const ProcessGrid& grid) {
    CAPTURE(mode_name(mode));
    Params q = local_params(p, grid);
    GradientReducer reducer(grid, q.list(), {.mode = mode});
    // Step 1 uses `unused` on spatial rank 0 of data replica 0 only: every rank still ends with
    // the same reduced gradient (2 * unused / D).
    reduced_backward(reducer, [&] {
      Tensor loss = local_loss(p, q, grid, my_batch(grid));
      return grid.world_rank() == 0 ? add(loss, sum(mul(q.unused, q.unused))) : loss;
    });
    REQUIRE(q.unused.grad().defined());
    CHECK(q.unused.grad().to_vector<double>() == std::vector<double>(2, 2.0 / double(grid.data_size())));
    check_parameters_replicated(grid, q.list());
    for (auto& t : {q.wm, q.sh, q.sw, q.unused}) t.set_grad(Tensor());
    reduced_backward(reducer, [&] { return local_loss(p, q, grid, my_batch(grid)); });
    CHECK_FALSE(q.unused.grad().defined());
  });
}

TEST_CASE("reducer: the global gradient norm and clipping equal one process") {
  Problem p = make_problem();
  Reference ref = one_process(p);
  double ref_sq = 0;
  for (auto& g : {ref.wm, ref.sh, ref.sw})
    for (double v : g.to_vector<double>()) ref_sq += v * v;
  const double ref_norm = std::sqrt(ref_sq);
  for (ReducerMode mode : kModes) gs::test::for_each_grid([&](const ProcessGrid& grid) {
    CAPTURE(mode_name(mode));
    Params q = local_params(p, grid);
    GradientReducer reducer(grid, q.list(), {.mode = mode});
    reduced_backward(reducer, [&] { return local_loss(p, q, grid, my_batch(grid)); });
    CHECK(std::abs(global_grad_norm(grid, q.list()) - ref_norm) < 1e-12 * ref_norm);
    const double norm = clip_global_grad_norm(grid, q.list(), ref_norm / 4);
    CHECK(std::abs(norm - ref_norm) < 1e-12 * ref_norm);
    check_against(q, ref, grid, (ref_norm / 4) / (ref_norm + 1e-6));
  });
}

TEST_CASE("reducer: a weight penalty computed on every rank enters the gradient once through replicated_loss_term") {
  Problem p = make_problem();
  const double lambda = 0.3;
  Reference ref = one_process(p, lambda);
  for (ReducerMode mode : kModes) gs::test::for_each_grid([&](const ProcessGrid& grid) {
    CAPTURE(mode_name(mode));
    Params q = local_params(p, grid);
    GradientReducer reducer(grid, q.list(), {.mode = mode});
    reduced_backward(reducer, [&] {
      Tensor penalty = mul(sum(mul(q.wm, q.wm)), lambda);
      return add(local_loss(p, q, grid, my_batch(grid)), replicated_loss_term(penalty, grid));
    });
    check_against(q, ref, grid);
    // Without it the penalty's gradient is counted once per spatial rank.
    q.wm.set_grad(Tensor()), q.sh.set_grad(Tensor()), q.sw.set_grad(Tensor());
    reduced_backward(reducer,
                     [&] { return add(local_loss(p, q, grid, my_batch(grid)), mul(sum(mul(q.wm, q.wm)), lambda)); });
    Tensor expected = add(ref.wm, mul(q.wm.detach(), 2 * lambda * double(grid.h_size() * grid.w_size() - 1)));
    CHECK(rel_diff(q.wm.grad(), expected) < 1e-12);
  });
}

TEST_CASE("reducer: small buckets launch during backward, follow the ready order, and give the same gradients") {
  Problem p = make_problem();
  Reference ref = one_process(p);
  for (ReducerMode mode : kModes) gs::test::for_each_grid([&](const ProcessGrid& grid) {
    CAPTURE(mode_name(mode));
    Params q = local_params(p, grid);
    GradientReducer reducer(grid, q.list(), {.bucket_bytes = 8, .mode = mode});
    CHECK(reducer.bucket_layout().size() == 4);  // one parameter per bucket
    CHECK(reducer.bucket_layout()[0][0] == "unused");  // reverse registration order before the first pass
    reduced_backward(reducer, [&] { return local_loss(p, q, grid, my_batch(grid)); });
    check_against(q, ref, grid);
    // Rebuilt from the observed order: the never-ready parameter comes last.
    CHECK(reducer.bucket_layout().back()[0] == "unused");
    for (auto& t : {q.wm, q.sh, q.sw}) t.set_grad(Tensor());
    reduced_backward(reducer, [&] { return local_loss(p, q, grid, my_batch(grid)); });
    check_against(q, ref, grid);
    CHECK(reducer.stats().passes == 2);
    // In the first pass the never-ready `unused` sat in the first bucket and held every launch
    // back to the end; in the rebuilt order the three others go out during backward.
    CHECK(reducer.stats().launched_in_backward == 3);
  });
}

TEST_CASE("reducer: parameters that are not leaves or repeat are refused") {
  ProcessGrid one;
  Tensor a = ones({2}, DType::f64).set_requires_grad();
  CHECK(gs_test::contains(gs_test::error_of([&] { GradientReducer r(one, {{"a", a, {}}, {"b", a, {}}}); }),
                          "'a' and 'b' are the same tensor"));
  Tensor nl = mul(a, 2.0);
  CHECK(gs_test::contains(gs_test::error_of([&] { GradientReducer r(one, {{"nl", nl, {}}}); }), "must be a leaf"));
  CHECK(gs_test::contains(gs_test::error_of([&] { GradientReducer r(one, {{"a", a, Distribution::sharded_along(3, GridAxis::h)}}); }),
                          "is declared sharded dim 3 over h, but has no such dims"));
}
