// The backward engine: where gradients meet they are summed, broadcast gradients are reduced,
// backward() vs grad(), retain_graph, create_graph (Hessian-vector products, gradient
// penalties), and gradgradcheck on composites.
#include <pthread.h>

#include "tests/engine/engine_test_util.h"

using namespace gs;
using namespace gs_test;

namespace {

// Runs f on a new thread with a stack of `bytes` (no assertions inside: report through captures).
template <typename F>
void run_on_small_stack(size_t bytes, F f) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, bytes);
  pthread_t thread;
  auto body = [](void* p) -> void* {
    try {
      (*static_cast<F*>(p))();
    } catch (...) {
    }
    return nullptr;
  };
  REQUIRE(pthread_create(&thread, &attr, body, &f) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

}  // namespace

TEST_CASE("autograd: gradients that meet at one tensor are summed") {
  SUBCASE("x used twice in one op and across ops") {
    Tensor x = leaf({1, 2, 3});
    Tensor y = sum(add(mul(x, x), x));  // d/dx = 2x + 1
    y.backward();
    check_values(x.grad(), {3, 5, 7});
    CHECK(x.grad().dtype() == DType::f64);
    CHECK_FALSE(x.grad().requires_grad());
  }
  SUBCASE("a diamond: two paths from one intermediate") {
    Tensor x = leaf({0.5, -1.0});
    Tensor a = exp(x);
    Tensor y = sum(add(mul(a, 3.0), mul(a, a)));  // 3 e^x + e^2x -> 3 e^x + 2 e^2x
    y.backward();
    check_values(x.grad(), {3 * std::exp(0.5) + 2 * std::exp(1.0), 3 * std::exp(-1.0) + 2 * std::exp(-2.0)});
  }
  SUBCASE("gradients accumulate into .grad across backward calls") {
    Tensor x = leaf({1, 2});
    sum(mul(x, 3.0)).backward();
    sum(mul(x, x)).backward();
    check_values(x.grad(), {3 + 2, 3 + 4});
  }
  SUBCASE("a deep chain runs without recursion") {
    Tensor x = leaf({1.0});
    Tensor h = x;
    for (int i = 0; i < 2000; ++i) h = add(h, 0.5);
    h.backward();
    check_values(x.grad(), {1.0});
    check_values(h, {1001.0});
  }
  SUBCASE("detach cuts a path") {
    Tensor x = leaf({2, 3});
    sum(mul(x, x.detach())).backward();  // only the first factor carries gradient
    check_values(x.grad(), {2, 3});
  }
}

TEST_CASE("autograd: broadcast gradients are reduced to each input's shape") {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor row = leaf({1, 10, 100}, {3});
  Tensor col = leaf({1, -1}, {2, 1});
  Tensor s = leaf({2.0});  // 0-dim
  Tensor y = sum(mul(mul(mul(x, row), col), s));
  y.backward();
  // y = s * sum_ij x_ij row_j col_i
  check_values(row.grad(), {2 * (1 * 1 + 4 * -1), 2 * (2 - 5), 2 * (3 - 6)});
  CHECK(row.grad().sizes() == Shape{3});
  check_values(col.grad(), {2 * (1 + 20 + 300), 2 * (4 + 50 + 600)});
  CHECK(col.grad().sizes() == Shape{2, 1});
  CHECK(s.grad().sizes() == Shape{});
  check_values(s.grad(), {(1 + 20 + 300) - (4 + 50 + 600)});
  check_values(x.grad(), {2, 20, 200, -2, -20, -200});
  // Through expand: the gradient of an expanded tensor is summed back.
  Tensor v = leaf({1, 2}, {2, 1});
  sum(expand(v, {3, 2, 4})).backward();
  check_values(v.grad(), {12, 12});
}

TEST_CASE("autograd: backward() fills .grad, grad() returns gradients and leaves .grad alone") {
  Tensor x = leaf({1, 2, 3});
  Tensor w = leaf({4, 5, 6});
  Tensor y = sum(mul(x, w));
  auto g = grad({y}, {x, w});
  REQUIRE(g.size() == 2);
  check_values(g[0], {4, 5, 6});
  check_values(g[1], {1, 2, 3});
  CHECK_FALSE(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
  CHECK_FALSE(g[0].requires_grad());  // no create_graph: plain values
  // grad() against one input only.
  Tensor y2 = sum(mul(x, w));
  check_values(grad({y2}, {w})[0], {1, 2, 3});

  SUBCASE("unused inputs: an error unless allow_unused") {
    Tensor z = leaf({7, 8});
    Tensor y3 = sum(mul(x, x));
    std::string msg = error_of([&] { grad({y3}, {x, z}, {}, {.retain_graph = true}); });
    CHECK(has(msg, "grad: input 1 (f64 (2,) on cpu) was not used to compute the outputs"));
    CHECK(has(msg, "allow_unused=true"));
    auto r = grad({y3}, {x, z}, {}, {.allow_unused = true});
    check_values(r[0], {2, 4, 6});
    CHECK_FALSE(r[1].defined());
  }
  SUBCASE("inputs that do not require grad are refused") {
    Tensor c = f64({1, 2, 3});
    std::string msg = error_of([&] { grad({sum(mul(x, c))}, {c}); });
    CHECK(has(msg, "grad: input 0 does not require grad (f64 (3,) on cpu)"));
  }
}

TEST_CASE("autograd: gradients with respect to non-leaf tensors") {
  Tensor x = leaf({1, 2});
  Tensor a = mul(x, 2.0);
  Tensor b = mul(a, 3.0);
  Tensor c = add(a, b);          // paths of different length meet at a
  Tensor y = sum(mul(c, c));     // c = 8x -> dy/dc = 2c = 16x; dy/da = 4 * 2c = 64x
  auto g = grad({y}, {a, c}, {}, {.retain_graph = true});
  check_values(g[1], {16, 32});
  check_values(g[0], {64, 128});
  // Together with a leaf: the leaf's gradient is the chain through a.
  auto g2 = grad({y}, {x, a});
  check_values(g2[0], {128, 256});
  check_values(g2[1], {64, 128});
  CHECK_FALSE(a.grad().defined());  // non-leaves keep no .grad without retain_grad
}

TEST_CASE("autograd: several roots at once") {
  Tensor x = leaf({1, 2, 3});
  Tensor y1 = sum(mul(x, 2.0));
  Tensor y2 = sum(mul(x, x));
  backward({y1, y2});
  check_values(x.grad(), {4, 6, 8});
  // Explicit grad_outputs weight each root.
  Tensor x2 = leaf({1, 2});
  Tensor v1 = mul(x2, 3.0), v2 = mul(x2, x2);
  auto g = grad({v1, v2}, {x2}, {f64({1, 0}), f64({10, 100})});
  check_values(g[0], {3 + 20, 400});
  std::string msg = error_of([&] { backward({sum(x2), sum(x2)}, {f64({1.0})}); });
  CHECK(has(msg, "got 2 tensors and 1 grad_outputs; expected one grad_output per tensor"));
  // The same root twice counts twice; the same input twice gets its gradient twice.
  Tensor x3 = leaf({1, 2});
  Tensor y3 = sum(mul(x3, 3.0));
  backward({y3, y3}, {}, /*retain_graph=*/true);
  check_values(x3.grad(), {6, 6});
  auto twice = grad({y3}, {x3, x3});
  check_values(twice[0], {3, 3});
  check_values(twice[1], {3, 3});
}

TEST_CASE("autograd: an implicit gradient only for one-element outputs") {
  Tensor x = leaf({1, 2, 3});
  Tensor y = mul(x, 3.0);
  std::string msg = error_of([&] { y.backward(); });
  CHECK(has(msg, "grad can be implicitly created only for outputs with one element"));
  CHECK(has(msg, "f64 (3,) on cpu"));
  CHECK(has(msg, "Pass grad_outputs"));
  CHECK(has(error_of([&] { grad({y}, {x}); }), "grad can be implicitly created only for outputs with one element"));
  // A one-element output of any rank is fine.
  Tensor one = reshape(sum(x), {1, 1});
  one.backward();
  check_values(x.grad(), {1, 1, 1});
  // With an explicit gradient, any shape.
  Tensor x2 = leaf({1, 2, 3});
  mul(x2, 3.0).backward(f64({1, 10, 100}));
  check_values(x2.grad(), {3, 30, 300});
  msg = error_of([&] { mul(x2, 3.0).backward(f64({1, 2})); });
  CHECK(has(msg, "grad_output 0 must match its tensor f64 (3,) on cpu (shape, and dtype f64), got f64 (2,) on cpu"));
  // A tensor outside any graph.
  msg = error_of([] { f64({1.0}).backward(); });
  CHECK(has(msg, "does not require grad and does not have a grad_fn"));
}

TEST_CASE("autograd: retain_graph") {
  SUBCASE("a second backward through a released graph says so and how to retain it") {
    Tensor x = leaf({1, 2});
    Tensor y = sum(mul(x, x));
    y.backward();
    std::string msg = error_of([&] { y.backward(); });
    CHECK(has(msg, "Trying to backward through the graph a second time"));
    CHECK(has(msg, "'mul'"));
    CHECK(has(msg, "retain_graph=true"));
    check_values(x.grad(), {2, 4});  // the failed pass added nothing
  }
  SUBCASE("with retain_graph the second backward works and accumulates") {
    Tensor x = leaf({1, 2});
    Tensor y = sum(mul(x, x));
    y.backward({}, /*retain_graph=*/true);
    y.backward();
    check_values(x.grad(), {4, 8});
    CHECK(has(error_of([&] { y.backward(); }), "second time"));
  }
  SUBCASE("grad() releases too unless retained") {
    Tensor x = leaf({3.0});
    Tensor y = mul(x, x);
    check_values(grad({y}, {x})[0], {6});
    CHECK(has(error_of([&] { grad({y}, {x}); }), "retain_graph=true"));
  }
}

TEST_CASE("autograd: create_graph gives differentiable gradients") {
  SUBCASE("Hessian-vector product of sum(x^3)") {
    Tensor x = leaf({1, -2, 0.5});
    Tensor v = f64({1, 2, 3});
    Tensor g = grad({sum(pow(x, 3.0))}, {x}, {}, {.create_graph = true})[0];
    check_values(g, {3, 12, 0.75});  // 3 x^2
    CHECK(g.requires_grad());
    CHECK(g.grad_fn() != nullptr);
    Tensor hv = grad({sum(mul(g, v))}, {x})[0];
    check_values(hv, {6 * 1 * 1, 6 * -2 * 2, 6 * 0.5 * 3});  // H = diag(6x)
  }
  SUBCASE("Hessian-vector product of x . A x is (A + A^T) v") {
    std::vector<double> A{1, 2, 0, -1, 3, 4, 0.5, 0, 2};  // not symmetric
    Tensor a = f64(A, {3, 3});
    Tensor x = leaf({0.3, -0.7, 1.1});
    Tensor v = f64({1, -2, 0.5});
    Tensor ax = sum(mul(a, unsqueeze(x, 0)), {1});  // (A x)_i = sum_j A_ij x_j
    Tensor f = sum(mul(x, ax));
    Tensor g = grad({f}, {x}, {}, {.create_graph = true})[0];
    std::vector<double> xv{0.3, -0.7, 1.1}, vv{1, -2, 0.5}, want_g(3), want_hv(3);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        want_g[i] += (A[i * 3 + j] + A[j * 3 + i]) * xv[j];
        want_hv[i] += (A[i * 3 + j] + A[j * 3 + i]) * vv[j];
      }
    check_values(g, want_g);
    check_values(grad({sum(mul(g, v))}, {x})[0], want_hv);
  }
  SUBCASE("backward(create_graph) leaves a differentiable .grad") {
    Tensor x = leaf({2.0});
    pow(x, 4.0).backward({}, false, /*create_graph=*/true);
    Tensor g1 = x.grad();
    check_values(g1, {32});  // 4x^3
    REQUIRE(g1.requires_grad());
    Tensor g2 = grad({g1}, {x}, {}, {.create_graph = true})[0];
    check_values(g2, {48});  // 12x^2
    check_values(grad({g2}, {x})[0], {48});  // 24x
    // x -> .grad -> its graph -> saved x is a reference cycle (as in PyTorch): break it.
    x.set_grad(Tensor());
  }
  SUBCASE("a gradient penalty trains the weights through the input gradient") {
    // D(x) = sum(w x^2); grad_x D = 2 w x; P = |grad_x D|^2 = 4 sum(w^2 x^2).
    Tensor w = leaf({0.5, -1.0, 2.0});
    Tensor x = leaf({1.0, 2.0, -0.5});
    Tensor d = sum(mul(w, mul(x, x)));
    Tensor gx = grad({d}, {x}, {}, {.create_graph = true})[0];
    check_values(gx, {1.0, -4.0, -2.0});
    Tensor penalty = sum(mul(gx, gx));
    check_values(penalty, {1 + 16 + 4});
    penalty.backward();
    check_values(w.grad(), {8 * 0.5 * 1, 8 * -1.0 * 4, 8 * 2.0 * 0.25});  // 8 w x^2
    check_values(x.grad(), {8 * 0.25 * 1, 8 * 1 * 2, 8 * 4 * -0.5});    // 8 w^2 x
  }
  SUBCASE("grad outputs that require grad are differentiated too") {
    Tensor x = leaf({1.0, 2.0});
    Tensor v = leaf({3.0, 5.0});
    Tensor g = grad({mul(x, x)}, {x}, {v}, {.create_graph = true})[0];  // 2 x v
    check_values(g, {6, 20});
    auto gg = grad({sum(g)}, {x, v});
    check_values(gg[0], {6, 10});  // 2 v
    check_values(gg[1], {2, 4});   // 2 x
  }
}

TEST_CASE("autograd: gradgradcheck on composites of ops") {
  auto f = [](const std::vector<Tensor>& in) {
    Tensor x = in[0], y = in[1];
    return std::vector<Tensor>{add(tanh(mul(x, y)), div(pow(x, 3.0), add(mul(y, y), 1.0))), sum(exp(x), {0})};
  };
  Tensor x = randn({2, 3}, {11, 1}, DType::f64);
  Tensor y = randn({3}, {11, 2}, DType::f64);
  x.set_requires_grad(true);
  y.set_requires_grad(true);
  auto first = gradcheck(f, {x, y});
  CHECK_MESSAGE(first.ok, first.failure);
  auto second = gradgradcheck(f, {x, y});
  CHECK_MESSAGE(second.ok, second.failure);
  CHECK(second.max_abs_error < 1e-5);
  // Complex: exp and products with conjugation, through real/imag views.
  auto fz = [](const std::vector<Tensor>& in) {
    Tensor z = in[0];
    Tensor p = mul(exp(z), conj(z));
    return std::vector<Tensor>{p, add(real(p), mul(imag(z), imag(z)))};
  };
  Tensor z = randn({3}, {11, 3}, DType::c128);
  z.set_requires_grad(true);
  auto cz = gradcheck(fz, {z});
  CHECK_MESSAGE(cz.ok, cz.failure);
  auto czz = gradgradcheck(fz, {z});
  CHECK_MESSAGE(czz.ok, czz.failure);
}

TEST_CASE("autograd: gradients through views and complex parts") {
  Tensor x = leaf({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor y = add(sum(mul(select(x, 0, 1), 3.0)), sum(slice(x, 1, 0, 3, 2)));
  y.backward();
  check_values(x.grad(), {1, 0, 1, 4, 3, 4});
  // Real loss of a complex tensor: grad = dL/dRe + i dL/dIm.
  Tensor z = from_vector(std::vector<c128>{{1, 2}, {3, -1}});
  z.set_requires_grad(true);
  Tensor loss = add(sum(mul(real(z), 2.0)), sum(mul(imag(z), imag(z))));
  loss.backward();
  auto gz = z.grad().to_vector<c128>();
  CHECK(gz[0] == c128(2, 4));
  CHECK(gz[1] == c128(2, -2));
}

TEST_CASE("autograd: a stored gradient never shares storage with another tensor") {
  // In-place updates of .grad (zero_grad, optimizer steps, clipping) must not write into the
  // caller's grad_output or into another leaf's .grad: add() hands one gradient to both inputs.
  for (bool create_graph : {false, true}) {
    CAPTURE(create_graph);
    Tensor x = leaf({1, 2});
    Tensor w = leaf({3, 4});
    Tensor v = f64({1, 1});
    add(x, w).backward(v, false, create_graph);
    check_values(x.grad(), {1, 1});
    check_values(w.grad(), {1, 1});
    CHECK(x.grad().storage() != w.grad().storage());
    CHECK(x.grad().storage() != v.storage());
    CHECK(w.grad().storage() != v.storage());
    CHECK(x.grad().is_contiguous());
    // A retained non-leaf gradient does not alias the grad_output either.
    Tensor x2 = leaf({1, 2});
    Tensor h = mul(x2, 1.0);
    h.retain_grad();
    h.backward(v, false, create_graph);
    check_values(h.grad(), {1, 1});
    CHECK(h.grad().storage() != v.storage());
    // The root itself is a leaf.
    Tensor x3 = leaf({1, 2});
    x3.backward(v, false, create_graph);
    CHECK(x3.grad().storage() != v.storage());
  }
  // With create_graph the copies keep their history.
  Tensor x = leaf({2.0});
  Tensor w = leaf({3.0});
  Tensor y = mul(x, w);
  add(y, x).backward({}, false, true);  // dx = w + 1, dw = x
  REQUIRE(x.grad().requires_grad());
  check_values(grad({x.grad()}, {w}, {}, {.allow_unused = true})[0], {1});
  x.set_grad(Tensor());  // break the leaf -> .grad -> graph -> leaf cycles
  w.set_grad(Tensor());
}

TEST_CASE("autograd: long graphs are destroyed without deep recursion") {
  // A rollout of many steps makes chains deeper than the stack allows recursive destruction. On a
  // thread with a 512 KiB stack, 20000 nodes would overflow it (recursive destruction needs
  // several hundred bytes per node), so this stays quick and still fails without the
  // iterative release.
  const int depth = 20000;
  bool finished = false;
  double grad_value = 0;
  run_on_small_stack(512 * 1024, [&] {
    Tensor x = leaf({1.0});
    {
      Tensor h = x;
      for (int i = 0; i < depth; ++i) h = mul(h, 1.0);  // saves its input: the previous output
    }
    {
      Tensor h = x;
      for (int i = 0; i < depth; ++i) h = mul(h, h);  // saves the same tensor twice
    }
    {
      Tensor h = x;
      for (int i = 0; i < depth; ++i) h = exp(mul(h, 0.0));  // saves its output
    }
    {
      Tensor h = x;
      for (int i = 0; i < depth; ++i) h = add(h, 1.0);
      h.backward();
      grad_value = x.grad().item<double>();
    }
    finished = true;
  });
  CHECK(finished);
  CHECK(grad_value == 1.0);
}

namespace {

// Reentrant activation checkpointing: forward runs a block without recording; backward recomputes
// it with recording and runs a nested backward through it, which accumulates into the block's
// parameter while the outer pass is still running.
Tensor g_block_weight;
Tensor checkpointed_block(const Tensor& a) { return mul(exp(mul(a, g_block_weight)), g_block_weight); }

struct Checkpoint {
  static std::vector<Tensor> forward(FunctionCtx& ctx, const std::vector<Tensor>& in) {
    ctx.save_for_backward({in[0]});
    return {checkpointed_block(in[0])};
  }
  static std::vector<Tensor> backward(FunctionCtx& ctx, const std::vector<Tensor>& g) {
    Tensor a = ctx.saved_tensors()[0].detach();
    a.set_requires_grad(true);
    GradModeGuard on(true);
    checkpointed_block(a).backward(g[0]);  // reentrant
    return {a.grad()};
  }
};

}  // namespace

TEST_CASE("autograd: a backward inside a backward (reentrant checkpointing) gives the right gradients") {
  const std::vector<double> w0{0.5, -0.25};
  Tensor x0 = f64({1.0, 2.0});
  // Reference: the same computation recorded normally.
  Tensor w_ref = leaf(w0);
  g_block_weight = w_ref;
  sum(checkpointed_block(mul(w_ref, x0))).backward();
  // Checkpointed. w is used before the block too, so its accumulator in the outer pass is still
  // waiting for that gradient while the inner pass accumulates through it.
  Tensor w = leaf(w0);
  g_block_weight = w;
  Tensor a = mul(w, x0);
  Tensor c = apply_function<Checkpoint>("checkpoint", {a})[0];
  sum(c).backward();
  check_values(w.grad(), vals(w_ref.grad()), 1e-14);
  g_block_weight = Tensor();
}
