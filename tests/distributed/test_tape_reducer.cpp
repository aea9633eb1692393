// What only the tape reducer does (reducer.h, mode tape): its reduction is an op on the tape, so a
// distributed run differentiates through it. On every grid of the world (2x1x1, 1x2x1, 1x1x2, the
// uneven 1x3x1 and 1x1x3, 2x2x1, ...) against one process, f64 to 1e-10:
//   - a gradient penalty (the squared norm of the loss's gradient with respect to the input, added
//     to the loss) trained for 3 SGD steps: losses and weights;
//   - a Hessian-vector product of the global loss with respect to the parameters (the reduction
//     recorded under create_graph, differentiated again);
// and the reduction nodes in the DOT export and in anomaly names, and the errors for a gradient
// that went around them and for grad() of a parameter inside the scope. Both modes' first-order gradients: test_reducer.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "distributed/collectives.h"
#include "distributed/reducer.h"
#include "engine/autograd/anomaly.h"
#include "engine/autograd/dot.h"
#include "engine/autograd/engine.h"
#include "engine/factory.h"
#include "ops/ops.h"
#include "tests/distributed/dist_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::dist;

namespace {

constexpr int64_t B = 12, C = 2, H = 5, W = 6;  // B divides over 1-4 data replicas
constexpr double kTol = 1e-10;

struct Weights {
  Tensor wm, sh, sw;  // (C, C) replicated, (H) sharded over h, (W) sharded over w
};

Tensor leaf(const Tensor& t) { return contiguous_copy(t, true).set_requires_grad(); }

// Largest difference over the largest value of `want`.
double rel_max_diff(const Tensor& got, const Tensor& want) {
  auto a = contiguous_copy(got.detach()).to_vector<double>(), b = contiguous_copy(want.detach()).to_vector<double>();
  REQUIRE(a.size() == b.size());
  double num = 0, den = 0;
  for (size_t k = 0; k < a.size(); ++k) num = std::max(num, std::abs(a[k] - b[k])), den = std::max(den, std::abs(b[k]));
  return num / std::max(den, 1e-300);
}

Weights initial_weights() {
  return {randn({C, C}, {23, 1}, DType::f64), mul(randn({H}, {23, 2}, DType::f64), 0.5),
          add(mul(randn({W}, {23, 3}, DType::f64), 0.5), 1.0)};
}
Tensor input_batch() { return randn({B, C, H, W}, {23, 4}, DType::f64); }
Tensor area_weights() { return add(rand({H}, {23, 5}, DType::f64), 0.5); }

// The replica's mean over its batch block of sum_points a_h tanh(Wm (x - m) + sh_h + sw_w)^2, where
// m is each field's mean over the whole sphere: a sum over tiles (reduce_replicated), so the input
// gradient of one tile depends on every other. On one process the grid is trivial.
Tensor replica_loss(const Tensor& x, const Weights& w, const Tensor& area, const ProcessGrid& grid) {
  const CommPtr spatial = grid.comm(Group::spatial);
  // The mean is replicated; the tile's ops are per rank: copy_to_group sums their partial gradients.
  Tensor m = copy_to_group(div(reduce_replicated(sum(x, {2, 3}, true), spatial), double(H * W)), spatial);
  // mul saves sw itself (not a view of it): a double backward must still reach it through the
  // reducer's node after the scope has closed and sw is a leaf again.
  Tensor y = matmul(w.wm, permute(sub(x, m), {0, 2, 1, 3}));  // (b, h, C, w)
  y = tanh(add(mul(y, w.sw), reshape(w.sh, {-1, 1, 1})));
  Tensor part = sum(mul(mul(y, y), reshape(area, {-1, 1, 1})));
  return div(reduce_replicated(part, spatial), double(x.size(0)));
}

// This rank's part of whole tensors.
struct Tile {
  Block batch, rows, cols;
  explicit Tile(const ProcessGrid& g)
      : batch(split_block(B, g.data_size(), g.data_rank())), rows(g.local_lat(H)), cols(g.local_lon(W)) {}
  Tensor x(const Tensor& whole) const {
    return narrow(narrow(narrow(whole, 0, batch.start, batch.count), 2, rows.start, rows.count), 3, cols.start,
                  cols.count);
  }
  Weights weights(const Weights& whole) const {
    return {leaf(whole.wm), leaf(narrow(whole.sh, 0, rows.start, rows.count)),
            leaf(narrow(whole.sw, 0, cols.start, cols.count))};
  }
  void check(const Weights& got, const Weights& whole) const {
    CHECK(rel_max_diff(got.wm, whole.wm) < kTol);
    CHECK(rel_max_diff(got.sh, narrow(whole.sh, 0, rows.start, rows.count)) < kTol);
    CHECK(rel_max_diff(got.sw, narrow(whole.sw, 0, cols.start, cols.count)) < kTol);
  }
};

std::vector<ReducedParameter> reduced(const Weights& w) {
  return {{"wm", w.wm, Distribution::replicated()},
          {"sh", w.sh, Distribution::sharded_along(0, GridAxis::h)},
          {"sw", w.sw, Distribution::sharded_along(0, GridAxis::w)}};
}

void sgd(const Weights& w, double lr) {
  NoGradGuard ng;
  for (const Tensor& p : {w.wm, w.sh, w.sw}) {
    copy_values(p, sub(p, mul(p.grad(), lr)));
    bump_version(p);
    p.set_grad(Tensor());
  }
}

constexpr double kLambda = 0.7, kLr = 0.2;

// One process: J = L + lambda |dL/dx|^2 over the global batch; returns J.
double penalty_step_one_process(const Weights& w, const Tensor& x_whole, const Tensor& area) {
  Tensor x = leaf(x_whole);
  Tensor L = replica_loss(x, w, area, ProcessGrid{});
  Tensor gx = grad({L}, {x}, {}, {.create_graph = true})[0];
  Tensor J = add(L, mul(sum(mul(gx, gx)), kLambda));
  J.backward();
  return J.item<double>();
}

}  // namespace

TEST_CASE("tape reducer: a gradient-penalty loss trained 3 steps equals one process on every grid") {
  const Tensor x_whole = input_batch(), area = area_weights();
  const Weights w0 = initial_weights();
  Weights ref{leaf(w0.wm), leaf(w0.sh), leaf(w0.sw)};
  std::vector<double> ref_losses;
  for (int step = 0; step < 3; ++step) {
    ref_losses.push_back(penalty_step_one_process(ref, x_whole, area));
    sgd(ref, kLr);
  }
  gs::test::for_each_grid([&](const ProcessGrid& grid) {
    const Tile tile(grid);
    Weights w = tile.weights(w0);
    GradientReducer reducer(grid, reduced(w));
    const Tensor my_area = narrow(area, 0, tile.rows.start, tile.rows.count);
    for (int step = 0; step < 3; ++step) {
      Tensor L, P;
      {
        ReducedForward scope = reducer.forward_scope();
        Tensor x = leaf(tile.x(x_whole));
        // The replica's part of the global loss, and of its input gradient (this tile's).
        L = mul(replica_loss(x, w, my_area, grid), reducer.loss_scale());
        Tensor gx = grad({L}, {x}, {}, {.create_graph = true})[0];
        P = mul(sum(mul(gx, gx)), kLambda);  // this tile's part of the penalty
        add(L, P).backward();
      }
      // J = L (each replica's part, replicated over the spatial group) + the penalty's parts.
      Tensor parts = from_vector(std::vector<double>{L.item<double>(), P.item<double>()});
      grid.comm(Group::data)->all_reduce(narrow(parts, 0, 0, 1), ReduceOp::sum);
      grid.comm(Group::world)->all_reduce(narrow(parts, 0, 1, 1), ReduceOp::sum);
      const auto v = parts.to_vector<double>();
      CHECK(std::abs(v[0] + v[1] - ref_losses[static_cast<size_t>(step)]) < kTol * std::abs(ref_losses[0]));
      check_parameters_replicated(grid, reduced(w));
      sgd(w, kLr);
    }
    tile.check(w, ref);
    CHECK(reducer.stats().passes == 3);
    CHECK(reducer.stats().recorded_reductions == 0);  // the penalty's grad() does not reach the parameters
  });
}

TEST_CASE("tape reducer: a Hessian-vector product of the global loss equals one process on every grid") {
  const Tensor x_whole = input_batch(), area = area_weights();
  const Weights w0 = initial_weights();
  const Weights v{randn({C, C}, {29, 1}, DType::f64), randn({H}, {29, 2}, DType::f64),
                  randn({W}, {29, 3}, DType::f64)};
  // One process: H v = d/dθ <dL/dθ, v>.
  Weights ref{leaf(w0.wm), leaf(w0.sh), leaf(w0.sw)};
  Weights ref_hv;
  {
    Tensor L = replica_loss(x_whole, ref, area, ProcessGrid{});
    auto g = grad({L}, {ref.wm, ref.sh, ref.sw}, {}, {.create_graph = true});
    Tensor s = add(add(sum(mul(g[0], v.wm)), sum(mul(g[1], v.sh))), sum(mul(g[2], v.sw)));
    auto hv = grad({s}, {ref.wm, ref.sh, ref.sw});
    ref_hv = {hv[0], hv[1], hv[2]};
  }
  gs::test::for_each_grid([&](const ProcessGrid& grid) {
    const Tile tile(grid);
    Weights w = tile.weights(w0);
    GradientReducer reducer(grid, reduced(w));
    Tensor L;
    {
      ReducedForward scope = reducer.forward_scope();
      L = mul(replica_loss(tile.x(x_whole), w, narrow(area, 0, tile.rows.start, tile.rows.count), grid),
              reducer.loss_scale());
    }
    // Outside the scope the parameters are leaves again: grad() captures what their bucket nodes
    // hand on, the reduced (global) gradient, with its history.
    auto g = grad({L}, {w.wm, w.sh, w.sw}, {}, {.create_graph = true});
    CHECK(reducer.stats().recorded_reductions > 0);
    Weights ref_g;
    {
      Weights r1{leaf(w0.wm), leaf(w0.sh), leaf(w0.sw)};
      auto gg = grad({replica_loss(x_whole, r1, area, ProcessGrid{})}, {r1.wm, r1.sh, r1.sw});
      ref_g = {gg[0], gg[1], gg[2]};
    }
    tile.check({g[0], g[1], g[2]}, ref_g);
    // <G, v> with this rank's shards of v: every term is replicated where its gradient is.
    Weights vt = tile.weights(v);
    Tensor s = add(add(sum(mul(g[0], vt.wm.detach())), sum(mul(g[1], vt.sh.detach()))), sum(mul(g[2], vt.sw.detach())));
    auto hv = grad({s}, {w.wm, w.sh, w.sw});
    tile.check({hv[0], hv[1], hv[2]}, ref_hv);
  });
}

TEST_CASE("tape reducer: a step abandoned after an unreduced pass, or ended by an exception, leaves nothing behind") {
  const Tensor x_whole = input_batch(), area = area_weights();
  const Weights w0 = initial_weights();
  Weights ref{leaf(w0.wm), leaf(w0.sh), leaf(w0.sw)};
  replica_loss(x_whole, ref, area, ProcessGrid{}).backward();
  gs::test::for_each_grid([&](const ProcessGrid& grid) {
    const Tile tile(grid);
    Weights w = tile.weights(w0);
    GradientReducer reducer(grid, reduced(w), {.bucket_bytes = 8});
    const Tensor my_area = narrow(area, 0, tile.rows.start, tile.rows.count);
    auto part = [&] { return mul(replica_loss(tile.x(x_whole), w, my_area, grid), reducer.loss_scale()); };
    auto step = [&] {
      ReducedForward scope = reducer.forward_scope();
      part().backward();
    };
    // A first micro-batch's pass waits in the reducer; the step is then skipped (a non-finite loss).
    reducer.prepare_for_backward(false);
    step();
    reducer.discard_pending();
    // Two forward scopes feeding one backward: refused on every rank, mid-backward.
    Tensor twice;
    {
      ReducedForward scope = reducer.forward_scope();
      twice = part();
    }
    {
      ReducedForward scope = reducer.forward_scope();
      twice = add(twice, part());
    }
    CHECK(gs_test::contains(gs_test::error_of([&] { twice.backward(); }), "ran twice in one backward pass"));
    for (const Tensor& p : {w.wm, w.sh, w.sw}) p.set_grad(Tensor());
    // The next step is clean: the one-process gradient, nothing of the two above.
    step();
    tile.check({w.wm.grad(), w.sh.grad(), w.sw.grad()}, {ref.wm.grad(), ref.sh.grad(), ref.sw.grad()});
  });
}

TEST_CASE("tape reducer: the reduction nodes show in the DOT export and carry anomaly names") {
  gs::test::for_each_grid([&](const ProcessGrid& grid) {
    const Tile tile(grid);
    Weights w = tile.weights(initial_weights());
    GradientReducer reducer(grid, reduced(w), {.bucket_bytes = 8});  // a bucket per parameter
    Tensor L;
    {
      AnomalyModeGuard anomaly;
      AnomalyScope named("train step 7");
      ReducedForward scope = reducer.forward_scope();
      L = replica_loss(tile.x(input_batch()), w, narrow(area_weights(), 0, tile.rows.start, tile.rows.count), grid);
      const std::string& node = w.wm.grad_fn()->describe();
      CHECK(gs_test::contains(node, "reduce_gradients[bucket"));
      CHECK(gs_test::contains(node, "train step 7"));
    }
    CHECK(w.wm.is_leaf());  // the scope is closed
    const std::string dot = graph_to_dot({L});
    CHECK(gs_test::contains(dot, "reduce_gradients[bucket 0: 1 parameter, f64, sum over"));
    CHECK(gs_test::contains(dot, "reduce_gradients[bucket 2"));
    L.backward();
    CHECK(reducer.stats().passes == 1);
    CHECK(reducer.stats().launched_in_backward == 3);
  });
}

TEST_CASE("tape reducer: a gradient that went around the reduction nodes is an error, not a silent partial") {
  Weights w = Tile(ProcessGrid{}).weights(initial_weights());
  GradientReducer reducer(ProcessGrid{}, reduced(w));
  Tensor L = replica_loss(input_batch(), w, area_weights(), ProcessGrid{});  // no forward scope
  const std::string err = gs_test::error_of([&] { L.backward(); });
  CHECK(gs_test::contains(err, "did not pass through its bucket's reduction node"));
  CHECK(gs_test::contains(err, "forward_scope()"));
  // A scope left open by mistake when another opens: named.
  ReducedForward open = reducer.forward_scope();
  // grad() with respect to a routed parameter would be the local partial: refused, naming why.
  Tensor L2 = replica_loss(input_batch(), w, area_weights(), ProcessGrid{});
  const std::string inside = gs_test::error_of([&] { grad({L2}, {w.wm}); });
  CHECK(gs_test::contains(inside, "parameter 'wm' is routed through the gradient reducer's node"));
  CHECK(gs_test::contains(inside, "close the scope first"));
  CHECK(gs_test::contains(gs_test::error_of([&] { ReducedForward again = reducer.forward_scope(); }),
                          "is another forward scope of this reducer"));
}
