// prod, cumsum, cumprod, std, norm, amax/amin, argmax/argmin (ops/reduce_more.h): values from
// closed forms or from PyTorch 2.14 (pasted, marked "torch"), the conventions at zeros, ties and
// NaN in gradients and double backward, and the error messages.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/factory.h"
#include "ops/ops.h"
#include "ops/reduce_more.h"
#include "tests/ops/value_checks.h"

namespace {

using gs::testing::check_values;
using gs::DType;
using gs::Tensor;
using Values = std::vector<double>;
const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor leaf(const Values& v, gs::Shape s = {}) { return gs::from_vector(v, std::move(s)).set_requires_grad(true); }


// f(x) summed, its gradient (create_graph) and the gradient of sum(gradient): first and second
// derivatives along all-ones directions, as the torch values below were taken.
struct Derivatives {
  Tensor value, grad, gradgrad;
};
template <typename F>
Derivatives derivatives(const Tensor& x, F f) {
  Derivatives d;
  d.value = gs::sum(f(x));
  d.grad = gs::grad({d.value}, {x}, {}, {.create_graph = true})[0];
  d.gradgrad = d.grad.requires_grad() ? gs::grad({gs::sum(d.grad)}, {x}, {}, {.allow_unused = true})[0]
                                      : gs::zeros_like(x);
  if (!d.gradgrad.defined()) d.gradgrad = gs::zeros_like(x);
  return d;
}

}  // namespace

TEST_CASE("prod: values over dims, all dims, keepdim and the empty product") {
  const Tensor x = gs::from_vector(Values{1, 2, 3, 4, 5, 6}, {2, 3});
  check_values(gs::prod(x), {720});
  check_values(gs::prod(x, {1}), {6, 120});
  CHECK(gs::prod(x, {0}, true).sizes() == gs::Shape{1, 3});
  check_values(gs::prod(x, {0}, true), {4, 10, 18});
  const Tensor y = gs::reshape(gs::arange(1.0, 13.0, 1.0, DType::f64), {2, 3, 2});
  check_values(gs::prod(y, {0, 2}), {1.0 * 2 * 7 * 8, 3.0 * 4 * 9 * 10, 5.0 * 6 * 11 * 12});
  check_values(gs::prod(gs::zeros({2, 0}, DType::f64), {1}), {1, 1});
  check_values(gs::prod(gs::transpose(x, 0, 1), {1}), {4, 10, 18});  // strided input
}

TEST_CASE("prod: gradient at zeros as torch (one zero: the others' product; two: 0), double backward too") {
  // torch: x = [2, 0, 3]: grad [0, 6, 0], d/dx sum(grad) [3, 5, 2].
  auto d = derivatives(leaf({2, 0, 3}), [](const Tensor& t) { return gs::prod(t); });
  check_values(d.grad, {0, 6, 0});
  check_values(d.gradgrad, {3, 5, 2});
  // torch: x = [2, 0, 0, 3]: grad 0, d/dx sum(grad) [0, 6, 6, 0].
  d = derivatives(leaf({2, 0, 0, 3}), [](const Tensor& t) { return gs::prod(t); });
  check_values(d.grad, {0, 0, 0, 0});
  check_values(d.gradgrad, {0, 6, 6, 0});
  // torch: prod(x, 1) of [[2, 0, 3], [1, 2, 3]]: grad [[0, 6, 0], [6, 3, 2]], gradgrad [[3, 5, 2], [5, 4, 3]].
  d = derivatives(leaf({2, 0, 3, 1, 2, 3}, {2, 3}), [](const Tensor& t) { return gs::prod(t, {1}); });
  check_values(d.grad, {0, 6, 0, 6, 3, 2});
  check_values(d.gradgrad, {3, 5, 2, 5, 4, 3});
  // Without zeros the rule is g * prod / x.
  d = derivatives(leaf({2, -1, 4}), [](const Tensor& t) { return gs::prod(t); });
  check_values(d.grad, {-4, 8, -2});
}

TEST_CASE("cumsum / cumprod: values forward and from the end, strided, 0-dim") {
  const Tensor x = gs::from_vector(Values{1, 2, 3, 4, 5, 6}, {2, 3});
  check_values(gs::cumsum(x, 1), {1, 3, 6, 4, 9, 15});
  check_values(gs::cumsum(x, 0), {1, 2, 3, 5, 7, 9});
  check_values(gs::cumsum(x, -1, true), {6, 5, 3, 15, 11, 6});
  check_values(gs::cumprod(x, 1), {1, 2, 6, 4, 20, 120});
  check_values(gs::cumprod(x, 1, true), {6, 6, 3, 120, 30, 6});
  check_values(gs::cumsum(gs::transpose(x, 0, 1), 1), {1, 5, 2, 7, 3, 9});
  check_values(gs::cumprod(gs::scalar_tensor(3.0, DType::f64), 0), {3});
  // f32 sums accumulate in f64: 1 + 1e8 ones would stall at 2^24 in f32.
  const Tensor ones = gs::ones({1 << 25}, DType::f32);
  CHECK(gs::cumsum(ones, 0).to_vector<double>().back() == static_cast<double>(1 << 25));
}

TEST_CASE("cumsum: the gradient is the sum from the end") {
  auto d = derivatives(leaf({1, 2, 3, 4}), [](const Tensor& t) { return gs::cumsum(t, 0); });
  check_values(d.grad, {4, 3, 2, 1});
  d = derivatives(leaf({1, 2, 3, 4}), [](const Tensor& t) { return gs::cumsum(t, 0, true); });
  check_values(d.grad, {1, 2, 3, 4});
}

TEST_CASE("cumprod: gradient and double backward with zeros as torch") {
  // torch: x = [2, 0, 3, 4], loss sum(cumprod): grad [1, 32, 0, 0], gradgrad [16, 32, 10, 6].
  auto d = derivatives(leaf({2, 0, 3, 4}), [](const Tensor& t) { return gs::cumprod(t, 0); });
  check_values(d.grad, {1, 32, 0, 0});
  check_values(d.gradgrad, {16, 32, 10, 6});
  // torch: x = [2, 0, 3, 0, 5], loss sum(cumprod(x) * [1..5]): grad [1, 22, 0, 0, 0],
  // gradgrad [11, 191, 6, 174, 0].
  const Tensor w = gs::from_vector(Values{1, 2, 3, 4, 5});
  d = derivatives(leaf({2, 0, 3, 0, 5}), [&](const Tensor& t) { return gs::mul(gs::cumprod(t, 0), w); });
  check_values(d.grad, {1, 22, 0, 0, 0});
  check_values(d.gradgrad, {11, 191, 6, 174, 0});
  // torch: flip(cumprod(flip(x))) of [2, 0, 3, 4]: grad [0, 36, 4, 4], gradgrad [12, 33, 13, 10].
  d = derivatives(leaf({2, 0, 3, 4}), [](const Tensor& t) { return gs::cumprod(t, 0, true); });
  check_values(d.grad, {0, 36, 4, 4});
  check_values(d.gradgrad, {12, 33, 13, 10});
  // Plain backward (no create_graph) takes torch's O(n) path: the same numbers.
  Tensor x = leaf({2, 0, 3, 0, 5});
  check_values(gs::grad({gs::sum(gs::mul(gs::cumprod(x, 0), w))}, {x})[0], {1, 22, 0, 0, 0});
}

TEST_CASE("std: values as sqrt(var), gradient 0 at zero variance (torch)") {
  // torch: std([1, 2, 4]) = 1.5275252316519465, grad [-0.436.., -0.109.., 0.545..].
  auto d = derivatives(leaf({1, 2, 4}), [](const Tensor& t) { return gs::std(t); });
  check_values(d.value, {1.5275252316519465});
  check_values(d.grad, {-0.43643578047198484, -0.10910894511799625, 0.5455447255899809});
  d = derivatives(leaf({3, 3, 3}), [](const Tensor& t) { return gs::std(t); });
  check_values(d.value, {0});
  check_values(d.grad, {0, 0, 0});
  check_values(d.gradgrad, {0, 0, 0});
  const Tensor x = gs::from_vector(Values{1, 2, 3, 5, 8, 13}, {2, 3});
  check_values(gs::std(x, {1}, 0, true), {std::sqrt(2.0 / 3), std::sqrt(98.0 / 9)}, 1e-14);
}

TEST_CASE("norm: p = 1, 2, inf values, gradients and double backward as torch") {
  const Tensor x = leaf({3, -4, 0, 1, -1, 1}, {2, 3});
  // torch: vector_norm(x, p, dim=1).sum() with its gradient and d/dx sum(gradient).
  auto d = derivatives(x, [](const Tensor& t) { return gs::norm(t, 1.0, {1}); });
  check_values(d.value, {10});
  check_values(d.grad, {1, -1, 0, 1, -1, 1});
  check_values(d.gradgrad, {0, 0, 0, 0, 0, 0});
  d = derivatives(x, [](const Tensor& t) { return gs::norm(t, 2.0, {1}); });
  check_values(d.value, {6.732050807568877});
  check_values(d.grad, {0.6, -0.8, 0.0, 0.5773502691896258, -0.5773502691896258, 0.5773502691896258});
  check_values(d.gradgrad, {0.224, 0.168, 0.2, 0.3849001794597505, 0.7698003589195012, 0.3849001794597505});
  d = derivatives(x, [](const Tensor& t) { return gs::norm(t, kInf, {1}); });
  check_values(d.value, {5});
  check_values(d.grad, {0, -1, 0, 1.0 / 3, -1.0 / 3, 1.0 / 3});
  check_values(d.gradgrad, {0, 0, 0, 0, 0, 0});
}

TEST_CASE("norm: the subgradients of torch at the zero vector, ties and NaN") {
  // torch: the 2-norm of 0 has gradient 0, and the double backward of its masked rule is NaN.
  auto d = derivatives(leaf({0, 0, 0}), [](const Tensor& t) { return gs::norm(t); });
  check_values(d.grad, {0, 0, 0});
  check_values(d.gradgrad, {kNaN, kNaN, kNaN});
  // torch: inf-norm of [-3, 3, 1]: ties split, signed: [-0.5, 0.5, 0].
  d = derivatives(leaf({-3, 3, 1}), [](const Tensor& t) { return gs::norm(t, kInf); });
  check_values(d.grad, {-0.5, 0.5, 0});
  // torch: inf-norm of [1, NaN, -2] is NaN with gradient [0, 0, 0] (sgn(NaN) = 0).
  d = derivatives(leaf({1, kNaN, -2}), [](const Tensor& t) { return gs::norm(t, kInf); });
  check_values(d.value, {kNaN});
  check_values(d.grad, {0, 0, 0});
  // No rescaling, as torch: the 2-norm of [1e300, 1e300] overflows.
  CHECK(gs::norm(gs::from_vector(Values{1e300, 1e300})).item<double>() == kInf);
}

TEST_CASE("amax / amin are max / min") {
  const Tensor x = gs::from_vector(Values{1, 5, 3, 4, 2, 6}, {2, 3});
  check_values(gs::amax(x, {1}), {5, 6});
  check_values(gs::amin(x, {0}, true), {1, 2, 3});
}

TEST_CASE("argmax / argmin: first index among ties, NaN first, dims, keepdim, flattened") {
  const Tensor x = gs::from_vector(Values{1, 3, 3, 2, 2, 0}, {2, 3});
  CHECK(gs::argmax(x).dtype() == DType::i64);
  CHECK(gs::argmax(x).item<int64_t>() == 1);  // torch: tensor(1)
  CHECK(gs::argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(gs::argmax(x, 1, true).sizes() == gs::Shape{2, 1});
  CHECK(gs::argmax(x, gs::kAllDims, true).sizes() == gs::Shape{1, 1});  // torch: tensor([[1]])
  CHECK(gs::argmin(x, 0).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 1});
  CHECK(gs::argmin(x).item<int64_t>() == 5);
  CHECK(gs::argmax(gs::transpose(x, 0, 1), 0).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  // torch: argmax([1, NaN, 2, NaN]) = 1, argmin([1, NaN, -2]) = 1.
  CHECK(gs::argmax(gs::from_vector(Values{1, kNaN, 2, kNaN})).item<int64_t>() == 1);
  CHECK(gs::argmin(gs::from_vector(Values{1, kNaN, -2})).item<int64_t>() == 1);
  CHECK(gs::argmax(gs::from_vector(Values{-kInf, -kInf})).item<int64_t>() == 0);
  CHECK(gs::argmax(gs::scalar_tensor(5.0)).item<int64_t>() == 0);
  // A large flattened input (the parallel loop) and f32.
  std::vector<float> v(100000, 0.0f);
  v[77777] = 2.0f, v[88888] = 2.0f;
  CHECK(gs::argmax(gs::from_vector(v)).item<int64_t>() == 77777);
  CHECK(gs::argmax(gs::reshape(gs::from_vector(v), {1000, 100}), 0).to_vector<int64_t>()[77] == 777);
}

TEST_CASE("reduce_more: error messages") {
  const Tensor x = gs::zeros({2, 3}, DType::f64);
  CHECK_THROWS_WITH_AS(gs::cumsum(x, 2), doctest::Contains("cumsum: dim 2 out of range for a tensor with 2 dims"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::prod(x, {0, 0}), doctest::Contains("prod: dim 0 appears twice"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::cumprod(gs::arange(3), 0), doctest::Contains("cumprod: expected an f32 or f64 tensor, got i64"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::norm(x, 3.0), doctest::Contains("norm: p must be 1, 2 or inf, got 3"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::std(x, {0}, 2), doctest::Contains("std: 2 elements per output"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::argmax(x, -3), doctest::Contains("argmax: dim -3 out of range"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::argmin(gs::zeros({2, 0}), 1), doctest::Contains("argmin: cannot take the index of the minimum of zero elements"),
                       gs::Error);
}

TEST_CASE("reduce_more: where gradsphere differs from torch 2.14 (engine/NOTES.md)") {
  // cumprod of [0, inf]: values and first derivatives as torch (grad [inf, 0]); torch's second
  // derivative is [1, 1] (its slices of length 1 skip a division), here x_1's is inf / inf = NaN.
  auto d = derivatives(leaf({0, kInf}), [](const Tensor& t) { return gs::cumprod(t, 0); });
  check_values(d.grad, {kInf, 0});
  check_values(d.gradgrad, {1, kNaN});
  // prod over several dims at once (torch.prod takes one): the product of products.
  const Tensor x = leaf({1, 2, 0, 4, 5, 6}, {1, 2, 3});
  d = derivatives(x, [](const Tensor& t) { return gs::prod(t, {0, 2}); });
  check_values(d.value, {120});
  check_values(d.grad, {0, 0, 2, 30, 24, 20});
}
