// Grad modes (no_grad, inference mode, nested guards) and hooks: tensor hooks that replace a
// gradient, retain_grad, post-accumulate hooks on leaves, and end-of-backward callbacks.
#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "engine/autograd/engine.h"
#include "engine/autograd/node.h"
#include "tests/engine/engine_test_util.h"

using namespace gs;
using namespace gs_test;

TEST_CASE("modes: no_grad records nothing, but versions still bump") {
  Tensor x = leaf({1, 2});
  Tensor y;
  {
    NoGradGuard ng;
    CHECK_FALSE(GradMode::enabled());
    CHECK_FALSE(recording_enabled());
    y = mul(x, 3.0);
    CHECK(y.grad_fn() == nullptr);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
    Tensor v = select(x, 0, 0);  // views made under no_grad carry no history either
    CHECK(v.grad_fn() == nullptr);
    scale_(y, 2.0);
    CHECK(y.version() == 1);
    scale_(x, 2.0);  // the optimizer-step pattern: allowed on a leaf under no_grad
    CHECK(x.version() == 1);
    CHECK(x.is_leaf());
  }
  CHECK(GradMode::enabled());
  check_values(y, {6, 12});
  check_values(x, {2, 4});
  CHECK(has(error_of([&] { sum(y).backward(); }), "does not require grad"));
  // Recording resumes after the guard.
  Tensor z = mul(x, 3.0);
  CHECK(z.grad_fn() != nullptr);
}

TEST_CASE("modes: inference mode records no tape and saves nothing") {
  Tensor x = leaf({1, 2});
  Tensor table = f64({3, 4});
  {
    InferenceModeGuard im;
    CHECK(InferenceMode::enabled());
    CHECK(GradMode::enabled());  // grad mode itself is untouched...
    CHECK_FALSE(recording_enabled());  // ...but nothing is recorded
    Tensor y = mul(x, table);
    CHECK(y.grad_fn() == nullptr);
    CHECK_FALSE(y.requires_grad());
    // Nothing was saved, so writing the table afterwards cannot break anything.
    scale_(table, 2.0);
    CHECK(table.version() == 1);
    // Even an explicit GradModeGuard(true) does not re-enable recording inside inference mode.
    GradModeGuard on(true);
    CHECK(mul(x, x).grad_fn() == nullptr);
  }
  CHECK_FALSE(InferenceMode::enabled());
  CHECK(mul(x, table).grad_fn() != nullptr);
}

TEST_CASE("modes: nested guards restore the state they found, also on exceptions") {
  CHECK(GradMode::enabled());
  {
    NoGradGuard a;
    {
      GradModeGuard on(true);
      CHECK(recording_enabled());
      Tensor x = leaf({1.0});
      CHECK(mul(x, x).grad_fn() != nullptr);
      {
        NoGradGuard b;
        CHECK_FALSE(GradMode::enabled());
        {
          InferenceModeGuard im;
          {
            InferenceModeGuard im2;
            CHECK(InferenceMode::enabled());
          }
          CHECK(InferenceMode::enabled());  // the outer inference guard still holds
        }
        CHECK_FALSE(InferenceMode::enabled());
      }
      CHECK(GradMode::enabled());
    }
    CHECK_FALSE(GradMode::enabled());
    {
      GradModeGuard off(false);
      CHECK_FALSE(GradMode::enabled());
    }
    CHECK_FALSE(GradMode::enabled());
  }
  CHECK(GradMode::enabled());
  try {
    NoGradGuard ng;
    InferenceModeGuard im;
    throw std::runtime_error("leave the scope by an exception");
  } catch (const std::runtime_error&) {
  }
  CHECK(GradMode::enabled());
  CHECK_FALSE(InferenceMode::enabled());
  // Backward switches grad mode for its pass (on for create_graph, off otherwise) and restores
  // it afterwards, also when the pass fails.
  {
    NoGradGuard ng;
    Tensor x = leaf({1.0});
    Tensor y;
    {
      GradModeGuard on(true);
      y = mul(x, x);
    }
    bool mode_in_hook = false;
    x.register_hook([&](const Tensor& g) {
      mode_in_hook = GradMode::enabled();
      return Tensor();
    });
    y.backward({}, /*retain_graph=*/true, /*create_graph=*/true);
    CHECK(mode_in_hook);
    CHECK_FALSE(GradMode::enabled());
    CHECK(x.grad().requires_grad());
    x.register_hook([](const Tensor&) -> Tensor { gs::fail("hook failed on purpose"); });
    CHECK(has(error_of([&] { y.backward({}, true, true); }), "hook failed on purpose"));
    CHECK_FALSE(GradMode::enabled());
    x.set_grad(Tensor());  // x -> .grad -> graph -> saved x: break the cycle
  }
  {
    Tensor x = leaf({1.0});
    bool mode_in_hook = true;
    x.register_hook([&](const Tensor&) {
      mode_in_hook = GradMode::enabled();
      return Tensor();
    });
    mul(x, x).backward();
    CHECK_FALSE(mode_in_hook);
    CHECK(GradMode::enabled());
  }
}

TEST_CASE("hooks: tensor hooks on leaves can observe and replace the gradient") {
  Tensor x = leaf({1, 2, 3});
  std::vector<std::vector<double>> seen;
  x.register_hook([&](const Tensor& g) {
    seen.push_back(vals(g));
    return Tensor();  // observe only
  });
  x.register_hook([](const Tensor& g) { return mul(g, 2.0); });
  x.register_hook([&](const Tensor& g) {
    seen.push_back(vals(g));  // sees the replaced gradient
    return add(g, 1.0);
  });
  sum(mul(x, x)).backward();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0] == std::vector<double>{2, 4, 6});
  CHECK(seen[1] == std::vector<double>{4, 8, 12});
  check_values(x.grad(), {5, 9, 13});
  // The hook sees the summed gradient once, not each contribution.
  Tensor w = leaf({1.0});
  int calls = 0;
  w.register_hook([&](const Tensor& g) {
    ++calls;
    CHECK(g.item<double>() == 5.0);
    return Tensor();
  });
  add(mul(w, 2.0), mul(w, 3.0)).backward();
  CHECK(calls == 1);
}

TEST_CASE("hooks: tensor hooks on non-leaves replace the gradient flowing on") {
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 3.0);
  std::vector<double> seen;
  h.register_hook([&](const Tensor& g) {
    seen = vals(g);
    return mul(g, 10.0);
  });
  Tensor y = sum(mul(h, h));  // dy/dh = 2h = 6x
  y.backward();
  CHECK(seen == std::vector<double>{6, 12});
  check_values(x.grad(), {180, 360});  // 10 * 6x * 3
  // Hooks also apply when h is captured by grad().
  Tensor x2 = leaf({1.0});
  Tensor h2 = mul(x2, 2.0);
  h2.register_hook([](const Tensor& g) { return mul(g, -1.0); });
  auto g = grad({mul(h2, 4.0)}, {h2, x2});
  check_values(g[0], {-4});
  check_values(g[1], {-8});
  // A hook returning the wrong shape is an error that says what was expected.
  Tensor x3 = leaf({1, 2});
  Tensor h3 = mul(x3, 1.0);
  h3.register_hook([](const Tensor&) { return zeros({3}, DType::f64); });
  std::string msg = error_of([&] { sum(h3).backward(); });
  CHECK(has(msg, "a hook on output 0 of 'mul'"));
  CHECK(has(msg, "returned a gradient of f64 (3,), expected f64 (2,) on cpu"));
  x3.register_hook([](const Tensor&) { return zeros({1}, DType::f64); });
  CHECK(has(error_of([&] { sum(mul(x3, 2.0)).backward(); }), "a hook on a leaf returned a gradient of f64 (1,)"));
  CHECK(has(error_of([] { f64({1.0}).register_hook([](const Tensor& g) { return g; }); }),
            "cannot register a hook on a tensor that does not require grad"));
}

TEST_CASE("hooks: retain_grad keeps the gradient of a non-leaf") {
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 3.0);
  Tensor k = mul(x, 5.0);
  h.retain_grad();
  Tensor y = sum(add(mul(h, h), k));
  y.backward({}, /*retain_graph=*/true);
  REQUIRE(h.grad().defined());
  check_values(h.grad(), {6, 12});  // 2h
  CHECK_FALSE(k.grad().defined());  // not retained
  CHECK_FALSE(h.grad().requires_grad());
  y.backward();  // accumulates like a leaf's .grad
  check_values(h.grad(), {12, 24});
  // A hook registered before retain_grad changes what is retained.
  Tensor x2 = leaf({1.0});
  Tensor h2 = mul(x2, 1.0);
  h2.register_hook([](const Tensor& g) { return mul(g, 7.0); });
  h2.retain_grad();
  mul(h2, 2.0).backward();
  check_values(h2.grad(), {14});
  // After an in-place op, .grad is the gradient of the current value (the registration moves
  // to the new history), for built-in in-place ops and for mark_dirty custom functions.
  Tensor x3 = leaf({1, 2});
  Tensor h3 = mul(x3, 2.0);
  h3.retain_grad();
  scale_(h3, 3.0);
  sum(mul(h3, h3)).backward();  // h3 = 6 x3
  check_values(h3.grad(), {12, 24});
  check_values(x3.grad(), {72, 144});
  // On a leaf retain_grad changes nothing.
  x2.retain_grad();
  CHECK(x2.is_leaf());
  CHECK(has(error_of([] { f64({1.0}).retain_grad(); }), "does not require grad"));
}

TEST_CASE("hooks: post-accumulate hooks run once per backward, after .grad is updated") {
  Tensor x = leaf({1, 2});
  Tensor w = leaf({3.0});
  std::vector<std::vector<double>> grads_seen;
  int calls = 0;
  x.register_post_accumulate_grad_hook([&](const Tensor& t) {
    ++calls;
    CHECK(t.is_same(x));
    grads_seen.push_back(vals(t.grad()));
  });
  auto loss = [&] { return sum(add(mul(x, x), mul(x, w))); };  // x used three times: 2x + w
  loss().backward();
  CHECK(calls == 1);
  REQUIRE(grads_seen.size() == 1);
  CHECK(grads_seen[0] == std::vector<double>{5, 7});
  loss().backward();
  CHECK(calls == 2);
  CHECK(grads_seen[1] == std::vector<double>{10, 14});  // the accumulated value
  // The tensor hooks run first, then .grad is updated, then the post-accumulate hook.
  std::vector<std::string> order;
  Tensor p = leaf({1.0});
  p.register_hook([&](const Tensor& g) {
    order.push_back("tensor hook");
    return mul(g, 2.0);
  });
  p.register_post_accumulate_grad_hook([&](const Tensor& t) {
    order.push_back("post-accumulate, grad " + std::to_string(t.grad().item<double>()));
  });
  mul(p, 3.0).backward();
  CHECK(order == std::vector<std::string>{"tensor hook", "post-accumulate, grad 6.000000"});
  // A post-accumulate hook may take the gradient (as a bucketed reducer would) and replace it.
  Tensor q = leaf({1.0, 1.0});
  q.register_post_accumulate_grad_hook([](const Tensor& t) { t.set_grad(mul(t.grad(), 0.5)); });
  sum(mul(q, 4.0)).backward();
  check_values(q.grad(), {2, 2});
  // grad() does not touch .grad, so it runs no post-accumulate hooks.
  grad({loss()}, {x});
  CHECK(calls == 2);
  // Only leaves that require grad can have them.
  Tensor h = mul(x, 1.0);
  std::string msg = error_of([&] { h.register_post_accumulate_grad_hook([](const Tensor&) {}); });
  CHECK(has(msg, "expected a leaf that requires grad, got a non-leaf"));
  CHECK(has(error_of([] { f64({1.0}).register_post_accumulate_grad_hook([](const Tensor&) {}); }),
            "got a leaf that does not require grad"));
}

TEST_CASE("hooks: end-of-backward callbacks run once, after every node") {
  Tensor x = leaf({1, 2});
  Tensor w = leaf({3.0});
  std::vector<std::string> log;
  int queued = 0;
  x.register_hook([&](const Tensor& g) {
    log.push_back("x hook");
    if (queued++ == 0)
      queue_backward_callback([&] {
        log.push_back("callback: x.grad " + std::to_string(vals(x.grad())[1]) + ", w.grad " +
                      std::to_string(w.grad().item<double>()));
        queue_backward_callback([&] { log.push_back("callback queued by a callback"); });
      });
    return Tensor();
  });
  w.register_post_accumulate_grad_hook([&](const Tensor&) { log.push_back("w accumulated"); });
  // w's accumulator runs after x's in this graph or before it; either way the callback comes last.
  Tensor y = sum(add(mul(x, w), mul(x, x)));
  y.backward();
  REQUIRE(log.size() == 4);
  CHECK(log[2] == "callback: x.grad 7.000000, w.grad 3.000000");
  CHECK(log[3] == "callback queued by a callback");
  CHECK(std::count(log.begin(), log.begin() + 2, "x hook") == 1);
  CHECK(std::count(log.begin(), log.begin() + 2, "w accumulated") == 1);
  // Callbacks belong to one pass: the next backward does not rerun them.
  log.clear();
  sum(mul(w, 2.0)).backward();
  CHECK(log == std::vector<std::string>{"w accumulated"});
  // Outside backward it is an error.
  std::string msg = error_of([] { queue_backward_callback([] {}); });
  CHECK(has(msg, "queue_backward_callback: can only be called while backward is running"));
  // grad() runs them too.
  Tensor z = leaf({2.0});
  bool ran = false;
  z.register_hook([&](const Tensor& g) {
    queue_backward_callback([&] { ran = true; });
    return Tensor();
  });
  grad({mul(z, z)}, {z});
  CHECK(ran);
}

namespace {

// Two outputs (copies of x and of x2), recorded by hand: its backward logs what it saw, defers its
// gradients (scaled by 10, to tell them from the rule's own return), and counts progress calls.
class DeferringNode : public Node {
 public:
  DeferringNode(std::vector<std::string>& log, int& progress) : Node("deferring"), log_(log), progress_(progress) {
    materialize_grads = false;
    runs_when_ready = true;
  }
  std::vector<Tensor> apply(std::vector<Tensor> grads) override {
    log_.push_back(std::string("deferring ran; slot 1 ") + (grads[1].defined() ? "defined" : "undefined"));
    Tensor g = grads[0];
    defer_gradients({.finish =
                         [this, g] {
                           log_.push_back("finish");
                           return std::vector<Tensor>{mul(g, 10.0), Tensor()};
                         },
                     .progress = [this] { progress_++; }});
    return {mul(g, -1.0), Tensor()};  // replaced by what finish returns
  }

 private:
  std::vector<std::string>& log_;
  int& progress_;
};

}  // namespace

TEST_CASE("engine: a deferring rule's gradients are handed on once nothing else is ready; materialize_grads, runs_when_ready") {
  Tensor x = leaf({1, 2}), x2 = leaf({5}), z = leaf({0.5, 0.25});
  std::vector<std::string> log;
  int progress = 0;
  auto node = std::make_shared<DeferringNode>(log, progress);
  // Outputs a (of x) and b (of x2), wired as the reducer wires its parameters.
  Tensor a = contiguous_copy(x.detach()), b = contiguous_copy(x2.detach());
  for (auto [out, in, slot] : {std::tuple{a, x, 0u}, std::tuple{b, x2, 1u}}) {
    node->next_edges.push_back(gradient_edge(in));
    node->input_meta.push_back(TensorMeta::of(in));
    node->output_meta.push_back(TensorMeta::of(in));
    auto& m = out.impl()->meta();
    m.requires_grad = true;
    m.grad_fn = node;
    m.output_nr = slot;
  }
  // b is unused. a's branch is recorded last, so it runs first and makes the node ready while z's
  // chain has nodes left to run; the node was recorded first, so only runs_when_ready runs it then.
  z.register_hook([&](const Tensor& g) {
    log.push_back("z hook");
    return Tensor();
  });
  Tensor z_part = sum(exp(tanh(mul(z, z))));
  Tensor a_part = sum(mul(a, 3.0));
  Tensor y = add(z_part, a_part);
  y.backward();
  REQUIRE(log.size() == 3);
  CHECK(log[0] == "deferring ran; slot 1 undefined");  // materialize_grads = false; runs_when_ready
  CHECK(log[1] == "z hook");                           // the rest of backward first ...
  CHECK(log[2] == "finish");                           // ... then the deferred gradients
  CHECK(progress >= 1);
  check_values(x.grad(), {30, 30});  // what finish returned: 3 x 10
  CHECK_FALSE(x2.grad().defined());
  // Outside a rule it is an error.
  CHECK(has(error_of([] { defer_gradients({.finish = [] { return std::vector<Tensor>{}; }, .progress = {}}); }),
            "can only be called from a backward rule"));
}
