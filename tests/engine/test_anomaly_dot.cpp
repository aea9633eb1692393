// Anomaly mode (creation scopes, errors that name the node, the NaN/Inf check) and the DOT
// export of the tape.
#include <cmath>

#include "tests/engine/engine_test_util.h"

using namespace gs;
using namespace gs_test;

namespace {

using V = std::vector<Tensor>;

struct Exploding {
  static V forward(FunctionCtx&, const V& in) { return {mul(in[0], 1.0)}; }
  static V backward(FunctionCtx&, const V&) { gs::fail("the rule hit a case it does not handle"); }
};

// A correct forward whose backward returns NaN.
struct NanBackward {
  static V forward(FunctionCtx&, const V& in) { return {mul(in[0], 2.0)}; }
  static V backward(FunctionCtx&, const V& g) { return {div(mul(g[0], 0.0), 0.0)}; }
};

}  // namespace

TEST_CASE("anomaly: nodes record their creation scope only in anomaly mode") {
  Tensor x = leaf({1, 2});
  Tensor plain = mul(x, 2.0);
  CHECK(plain.grad_fn()->scope().empty());
  CHECK(plain.grad_fn()->describe() == fmt::format("'mul' (node #{})", plain.grad_fn()->sequence_nr()));
  {
    AnomalyScope ignored("not recorded without anomaly mode");
    CHECK(mul(x, 2.0).grad_fn()->scope().empty());
  }
  AnomalyModeGuard anomaly;
  CHECK(AnomalyMode::enabled());
  Tensor outer, inner, after;
  {
    AnomalyScope enc("encoder");
    outer = exp(x);
    {
      AnomalyScope blk("block 1");
      CHECK(current_anomaly_scope() == "encoder/block 1");
      inner = mul(outer, 3.0);
    }
    after = add(inner, 1.0);
  }
  CHECK(current_anomaly_scope().empty());
  CHECK(outer.grad_fn()->scope() == "encoder");
  CHECK(inner.grad_fn()->scope() == "encoder/block 1");
  CHECK(after.grad_fn()->scope() == "encoder");
  CHECK(mul(x, 1.0).grad_fn()->scope().empty());
  CHECK(inner.grad_fn()->describe() ==
        fmt::format("'mul' (node #{}, created in scope 'encoder/block 1')", inner.grad_fn()->sequence_nr()));
}

TEST_CASE("anomaly: anomaly mode is off by default and the guard restores it") {
  CHECK_FALSE(AnomalyMode::enabled());
  {
    AnomalyModeGuard a(/*check_nan=*/false);
    CHECK(AnomalyMode::enabled());
    CHECK_FALSE(AnomalyMode::check_nan());
    {
      AnomalyModeGuard b;
      CHECK(AnomalyMode::check_nan());
    }
    CHECK_FALSE(AnomalyMode::check_nan());
  }
  CHECK_FALSE(AnomalyMode::enabled());
  CHECK_FALSE(AnomalyMode::check_nan());
}

TEST_CASE("anomaly: an error in backward names the node and its scope") {
  Tensor x = leaf({1, 2});
  AnomalyModeGuard anomaly;
  Tensor y;
  {
    AnomalyScope scope("decoder/head");
    y = sum(apply_function<Exploding>("exploding", {x})[0]);
  }
  std::string msg = error_of([&] { y.backward(); });
  CHECK(has(msg, "in backward of 'exploding' (node #"));
  CHECK(has(msg, "created in scope 'decoder/head'"));
  CHECK(has(msg, "the rule hit a case it does not handle"));
}

TEST_CASE("anomaly: the NaN check names the first node that produced a NaN gradient") {
  SUBCASE("sqrt of a negative number") {
    Tensor x = leaf({-1.0, 4.0});
    Tensor y;
    {
      AnomalyModeGuard anomaly;
      AnomalyScope scope("norm");
      y = sum(mul(sqrt(x), 3.0));
    }
    // Off: the NaN flows into .grad silently.
    y.backward({}, /*retain_graph=*/true);
    CHECK(std::isnan(vals(x.grad())[0]));
    CHECK(vals(x.grad())[1] == doctest::Approx(0.75));
    // Anomaly mode without the NaN check: still silent.
    {
      AnomalyModeGuard no_nan_check(false);
      y.backward({}, true);
    }
    AnomalyModeGuard anomaly;
    std::string msg = error_of([&] { y.backward({}, true); });
    CHECK(has(msg, "anomaly mode: backward of 'sqrt'"));
    CHECK(has(msg, "created in scope 'norm'"));
    CHECK(has(msg, "produced NaN or Inf in the gradient for its input 0 (f64 (2,) on cpu)"));
  }
  SUBCASE("a custom backward returning NaN in the middle of a chain") {
    AnomalyModeGuard anomaly;
    Tensor x = leaf({0.5, 1.5});
    Tensor a = exp(x);                                              // runs after the NaN: not named
    Tensor b = apply_function<NanBackward>("nan_backward", {a})[0];  // makes the NaN
    Tensor c = mul(b, b);                                           // runs before: fine
    std::string msg = error_of([&] { sum(c).backward(); });
    CHECK(has(msg, "backward of 'nan_backward'"));
    CHECK_FALSE(has(msg, "'exp'"));
    CHECK_FALSE(x.grad().defined());
  }
  SUBCASE("Inf counts too") {
    AnomalyModeGuard anomaly;
    Tensor x = leaf({0.0, 1.0});
    std::string msg = error_of([&] { sum(sqrt(x)).backward(); });  // d sqrt(x)/dx = inf at 0
    CHECK(has(msg, "backward of 'sqrt'"));
    CHECK(has(msg, "NaN or Inf"));
  }
}

TEST_CASE("dot: the tape as Graphviz shows op names, shapes and saved-tensor versions") {
  Tensor x = leaf({1, 2, 3});
  x.set_name("x");
  Tensor table = f64({0.5, 0.25, 0.125});
  Tensor y = mul(x, table);
  y.set_name("weighted");
  Tensor loss = sum(exp(y));
  std::string dot = graph_to_dot({loss, y});
  CAPTURE(dot);
  CHECK(dot.rfind("digraph autograd {", 0) == 0);
  CHECK(dot.back() == '\n');
  CHECK(has(dot, "}\n"));
  CHECK(has(dot, "output 0\\nf64 () on cpu"));
  CHECK(has(dot, "weighted\\noutput 1\\nf64 (3,) on cpu"));
  CHECK(has(dot, "[label=\"sum\\nout: f64 ()\"]"));
  CHECK(has(dot, "[label=\"exp\\nout: f64 (3,)\\nsaved output 0: f64 (3,) v0 (now v0)\"]"));
  CHECK(has(dot, "mul\\nout: f64 (3,)\\nsaved input 0: f64 (3,) v0 (now v0)\\nsaved input 1: f64 (3,) v0 (now v0)"));
  CHECK(has(dot, "AccumulateGrad\\nx\\nout: f64 (3,)"));
  CHECK(has(dot, "r0 -> n"));
  CHECK(has(dot, "r1 -> n"));
  // One box per node: x's accumulator appears once although two roots reach it.
  size_t boxes = 0;
  for (size_t p = dot.find("AccumulateGrad"); p != std::string::npos; p = dot.find("AccumulateGrad", p + 1)) ++boxes;
  CHECK(boxes == 1);
  // After the table is overwritten, the box shows the stale saved version.
  overwrite_raw(table, 1.0);
  dot = graph_to_dot({loss});
  CHECK(has(dot, "saved input 1: f64 (3,) v0 (now v1)"));
  CHECK(has(dot, "saved input 0: f64 (3,) v0 (now v0)"));
  // After a backward that released the graph, the saved tensors show as released.
  Tensor x2 = leaf({1.0});
  Tensor l2 = mul(x2, x2);
  l2.backward();
  CHECK(has(graph_to_dot({l2}), "saved input 0: released"));
  // Scopes appear when recorded; quotes in names are escaped.
  AnomalyModeGuard anomaly;
  AnomalyScope scope("layer \"2\"");
  Tensor x3 = leaf({1.0});
  x3.set_name("w\"q");
  std::string d3 = graph_to_dot({mul(x3, 2.0)});
  CHECK(has(d3, "scope: layer \\\"2\\\""));
  CHECK(has(d3, "w\\\"q"));
  CHECK(has(d3, "n0 -> n"));
}
