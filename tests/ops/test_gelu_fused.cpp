// The fused GELU op (ops/gelu_fused.h): against gs::gelu forward and backward, with and without a
// channel bias, gradcheck and gradgradcheck, the parallel and non-contiguous paths, the errors.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/autograd/engine.h"
#include "engine/autograd/gradcheck.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/gelu_fused.h"
#include "ops/view.h"
#include "tests/tensor_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using gs_test::contains;
using gs_test::error_of;

using gs_test::max_abs_diff;

TEST_CASE("gelu_fused equals gs::gelu, forward and backward, and differentiates twice") {
  // f32 over a wide range (the polynomial erf is accurate to 1.5e-7 absolute), and f64 exactly.
  std::vector<float> xs;
  for (int i = -3000; i <= 3000; ++i) xs.push_back(static_cast<float>(i) * 0.005f);
  for (float big : {-100.f, -30.f, -9.f, 9.f, 30.f, 100.f}) xs.push_back(big);
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dt));
    const double tol = dt == DType::f32 ? 4e-7 : 1e-15;
    Tensor a = cast_copy(from_vector(xs, {static_cast<int64_t>(xs.size())}), dt).set_requires_grad();
    Tensor b = contiguous_copy(a.detach(), true).set_requires_grad();
    Tensor ya = gelu_fused(a), yb = gelu(b);
    const auto va = gs_test::values_f64(ya), vb = gs_test::values_f64(yb);
    for (size_t i = 0; i < va.size(); ++i) REQUIRE(std::abs(va[i] - vb[i]) <= tol * std::max(1.0, std::abs(vb[i])));
    Tensor g = randn(a.sizes(), {3, 3}, dt);
    ya.backward(g);
    yb.backward(g);
    const auto ga = gs_test::values_f64(a.grad()), gb = gs_test::values_f64(b.grad());
    for (size_t i = 0; i < ga.size(); ++i) REQUIRE(std::abs(ga[i] - gb[i]) <= 2 * tol * std::max(1.0, std::abs(gb[i])));
  }
  Tensor x = randn({3, 5}, {4, 4}, DType::f64).set_requires_grad();
  auto f = [](const std::vector<Tensor>& v) { return std::vector<Tensor>{gelu_fused(v[0])}; };
  CHECK(gradcheck(f, {x}).ok);
  GradcheckReport gg = gradgradcheck(f, {x});
  CAPTURE(gg.failure);
  CHECK(gg.ok);
  // With a bias over the channel dim: gelu(x + b), x (B, C, H, W).
  Tensor x4 = randn({2, 3, 2, 3}, {6, 6}, DType::f64).set_requires_grad();
  Tensor b = randn({3}, {7, 7}, DType::f64).set_requires_grad();
  auto fb = [](const std::vector<Tensor>& v) { return std::vector<Tensor>{gelu_fused(v[0], v[1])}; };
  GradcheckReport rb = gradcheck(fb, {x4, b});
  CAPTURE(rb.failure);
  CHECK(rb.ok);
  GradcheckReport ggb = gradgradcheck(fb, {x4, b});
  CAPTURE(ggb.failure);
  CHECK(ggb.ok);
  for (DType dt : {DType::f32, DType::f64}) {
    Tensor xa = cast_copy(randn({2, 4, 40, 50}, {8, 8}, DType::f64), dt).set_requires_grad();
    Tensor ba = cast_copy(randn({4}, {9, 9}, DType::f64), dt).set_requires_grad();
    Tensor xb = contiguous_copy(xa.detach(), true).set_requires_grad(), bb = contiguous_copy(ba.detach(), true).set_requires_grad();
    Tensor ya = gelu_fused(xa, ba), yb = gelu(add(xb, reshape(bb, {1, 4, 1, 1})));
    const double tol = dt == DType::f32 ? 1e-6 : 1e-14;
    CHECK(max_abs_diff(ya, yb) < tol);
    Tensor g = cast_copy(randn(ya.sizes(), {1, 9}, DType::f64), dt);
    ya.backward(g);
    yb.backward(g);
    CHECK(max_abs_diff(xa.grad(), xb.grad()) < 2 * tol);
    CHECK(max_abs_diff(ba.grad(), bb.grad()) < 2000 * tol);  // a sum of 4000 terms
  }
  CHECK(contains(error_of([] { gelu_fused(zeros({2, 3, 4}), zeros({4})); }), "expected a bias (3) of dtype f32"));
  // A non-contiguous input, large enough for the parallel path.
  Tensor t = transpose(randn({300, 200}, {5, 5}), 0, 1);
  CHECK(max_abs_diff(gelu_fused(t), gelu(t)) < 4e-7 * 10);
  CHECK(contains(error_of([] { gelu_fused(zeros({2}, DType::c64)); }), "expected an f32 or f64 tensor"));
}

TEST_CASE("gelu_fused: the create_graph backward path gives the fused kernel's first derivative") {
  // Plain backward runs the fused kernel; under create_graph the rule runs differentiable ops. Both
  // must be the same derivative (gradgradcheck only checks the second path against itself).
  for (DType dt : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dt));
    const double tol = dt == DType::f32 ? 2e-6 : 1e-13;
    Tensor x = cast_copy(randn({2, 3, 4, 5}, {10, 1}, DType::f64), dt).set_requires_grad();
    Tensor b = cast_copy(randn({3}, {10, 2}, DType::f64), dt).set_requires_grad();
    Tensor g = cast_copy(randn({2, 3, 4, 5}, {10, 3}, DType::f64), dt);
    auto fused = grad({gelu_fused(x, b)}, {x, b}, {g});
    auto ops = grad({gelu_fused(x, b)}, {x, b}, {g}, {.create_graph = true});
    REQUIRE(ops[0].grad_fn() != nullptr);  // really the differentiable path
    CHECK(max_abs_diff(fused[0], ops[0]) < tol);
    CHECK(max_abs_diff(fused[1], ops[1]) < 20 * tol);  // a sum of 40 terms per channel
  }
}

