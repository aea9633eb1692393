// var, max, min and logsumexp (ops/reduce.cpp): forward against naive loops in long double,
// ties, NaN, big values, both dtypes, non-contiguous inputs, gradients and error messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "ops/ops.h"

namespace {

using gs::DType;
using gs::Shape;
using gs::Tensor;
using Dims = std::vector<int64_t>;

// The input's values grouped by output element (row-major over the kept dims): the reference
// reductions below fold each group with a plain loop.
std::vector<std::vector<long double>> groups_of(const Tensor& t, const Dims& dims) {
  const int64_t nd = t.dim();
  std::vector<bool> reduced(nd, dims.empty());
  for (auto d : dims)
    if (nd > 0) reduced[(d + nd) % nd] = true;
  Shape out_stride(nd, 0);
  int64_t n_out = 1;
  for (int64_t d = nd - 1; d >= 0; --d)
    if (!reduced[d]) out_stride[d] = n_out, n_out *= t.sizes()[d];
  std::vector<std::vector<long double>> groups(n_out);
  auto values = t.to_vector<double>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t rem = i, out = 0;
    for (int64_t d = nd - 1; d >= 0; --d) {
      out += (rem % t.sizes()[d]) * out_stride[d];
      rem /= t.sizes()[d];
    }
    groups[out].push_back(values[i]);
  }
  return groups;
}

template <typename F>
std::vector<double> reference(const Tensor& t, const Dims& dims, F fold) {
  std::vector<double> r;
  for (auto& g : groups_of(t, dims)) r.push_back(static_cast<double>(fold(g)));
  return r;
}

long double max_of(const std::vector<long double>& g) { return *std::max_element(g.begin(), g.end()); }
long double min_of(const std::vector<long double>& g) { return *std::min_element(g.begin(), g.end()); }
long double lse_of(const std::vector<long double>& g) {  // no shift: long double holds exp(1000)
  long double s = 0;
  for (auto v : g) s += std::exp(v);
  return std::log(s);
}
auto var_of(int64_t correction) {
  return [correction](const std::vector<long double>& g) {
    long double mean = std::accumulate(g.begin(), g.end(), 0.0L) / g.size(), ss = 0;
    for (auto v : g) ss += (v - mean) * (v - mean);
    return ss / (static_cast<long double>(g.size()) - correction);
  };
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    if (tol == 0.0) CHECK(got[i] == want[i]);  // max/min pick an element: exact
    else CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol).scale(1.0));
  }
}

Tensor randn(const Shape& s, uint64_t stream, DType dtype = DType::f64) {
  return gs::randn(s, {2024, stream}, dtype);
}

// A (rows, cols) tensor that is a transposed view, not contiguous.
Tensor transposed_randn(int64_t rows, int64_t cols, uint64_t stream, DType dtype = DType::f64) {
  Tensor t = gs::transpose(randn({cols, rows}, stream, dtype), 0, 1);
  REQUIRE(!t.is_contiguous());
  return t;
}

Shape sizes_after(const Tensor& t, const Dims& dims, bool keepdim) {
  Shape s;
  const int64_t nd = t.dim();
  for (int64_t d = 0; d < nd; ++d) {
    bool r = dims.empty() || std::any_of(dims.begin(), dims.end(), [&](int64_t x) { return (x + nd) % nd == d; });
    if (!r) s.push_back(t.sizes()[d]);
    else if (keepdim) s.push_back(1);
  }
  return s;
}

const std::vector<std::pair<Dims, bool>> kReductions = {
    {{}, false}, {{0}, false}, {{-1}, false}, {{0, 2}, false}, {{1}, true}, {{-3, -2}, true}, {{}, true}};

}  // namespace

TEST_CASE("max/min/var/logsumexp: forward matches naive loops on odd shapes, dims and keepdim") {
  for (DType dtype : {DType::f64, DType::f32}) {
    const double tol = dtype == DType::f64 ? 1e-12 : 2e-5;
    Tensor x = randn({3, 4, 5}, 1, dtype);
    for (const auto& [dims, keepdim] : kReductions) {
      CAPTURE(dtype);
      CAPTURE(gs::shape_str(dims));
      CAPTURE(keepdim);
      Shape want_sizes = sizes_after(x, dims, keepdim);
      Tensor mx = gs::max(x, dims, keepdim), mn = gs::min(x, dims, keepdim);
      Tensor v1 = gs::var(x, dims, 1, keepdim), v0 = gs::var(x, dims, 0, keepdim);
      Tensor lse = gs::logsumexp(x, dims, keepdim);
      for (const Tensor& r : {mx, mn, v1, v0, lse}) {
        CHECK(r.sizes() == want_sizes);
        CHECK(r.dtype() == dtype);
      }
      check_close(mx.to_vector<double>(), reference(x, dims, max_of), 0.0);
      check_close(mn.to_vector<double>(), reference(x, dims, min_of), 0.0);
      check_close(v1.to_vector<double>(), reference(x, dims, var_of(1)), tol);
      check_close(v0.to_vector<double>(), reference(x, dims, var_of(0)), tol);
      check_close(lse.to_vector<double>(), reference(x, dims, lse_of), tol);
    }
  }
}

TEST_CASE("max/min/var/logsumexp: non-contiguous inputs (transposed views)") {
  for (DType dtype : {DType::f64, DType::f32}) {
    const double tol = dtype == DType::f64 ? 1e-12 : 2e-5;
    Tensor x = transposed_randn(5, 7, 2, dtype);
    for (Dims dims : {Dims{}, Dims{0}, Dims{-1}}) {
      CAPTURE(gs::shape_str(dims));
      check_close(gs::max(x, dims).to_vector<double>(), reference(x, dims, max_of), 0.0);
      check_close(gs::min(x, dims).to_vector<double>(), reference(x, dims, min_of), 0.0);
      check_close(gs::var(x, dims).to_vector<double>(), reference(x, dims, var_of(1)), tol);
      check_close(gs::logsumexp(x, dims).to_vector<double>(), reference(x, dims, lse_of), tol);
    }
  }
}

TEST_CASE("max/min: large inputs take the multithreaded paths and agree with a plain loop") {
  // One output from many inputs (per-thread partials, then combine) and many outputs.
  Tensor flat = randn({70001}, 3);
  auto v = flat.to_vector<double>();
  CHECK(gs::max(flat).item<double>() == *std::max_element(v.begin(), v.end()));
  CHECK(gs::min(flat).item<double>() == *std::min_element(v.begin(), v.end()));
  Tensor wide = randn({301, 203}, 4, DType::f32);
  check_close(gs::max(wide, {1}).to_vector<double>(), reference(wide, {1}, max_of), 0.0);
  check_close(gs::min(wide, {0}).to_vector<double>(), reference(wide, {0}, min_of), 0.0);
}

TEST_CASE("max/min: 0-dim inputs, empty outputs and NaN") {
  Tensor s = gs::scalar_tensor(2.5, DType::f64);
  CHECK(gs::max(s).item<double>() == 2.5);
  CHECK(gs::min(s, {-1}, true).item<double>() == 2.5);
  CHECK(gs::max(s).dim() == 0);
  // Reducing a non-empty dim of an empty tensor gives an empty result, not an error.
  CHECK(gs::max(gs::zeros({0, 3}, DType::f64), {1}).sizes() == Shape{0});
  // NaN propagates, as in torch.amax.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = gs::from_vector<double>({1.0, nan, 3.0, 4.0, 5.0, 6.0}, {2, 3});
  auto m = gs::max(x, {1}).to_vector<double>();
  CHECK(std::isnan(m[0]));
  CHECK(m[1] == 6.0);
  CHECK(std::isnan(gs::min(x).item<double>()));
  // -inf and +inf are ordinary values.
  const double inf = std::numeric_limits<double>::infinity();
  Tensor y = gs::from_vector<double>({-inf, -inf, inf, 0.0}, {2, 2});
  CHECK(gs::max(y, {1}).to_vector<double>() == std::vector<double>{-inf, inf});
}

TEST_CASE("max/min: the gradient is split evenly between tied extrema") {
  Tensor x = gs::from_vector<double>({1, 3, 3, 2, 3, 0}, {2, 3});
  x.set_requires_grad(true);
  SUBCASE("max over a dim") {
    gs::sum(gs::max(x, {1})).backward();
    CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0.5, 0, 1, 0});
  }
  SUBCASE("max over all: three ties share the gradient") {
    gs::max(x).backward(gs::scalar_tensor(3.0, DType::f64));
    auto g = x.grad().to_vector<double>();
    std::vector<double> want{0, 1, 1, 0, 1, 0};
    for (size_t i = 0; i < g.size(); ++i) CHECK(g[i] == doctest::Approx(want[i]));
  }
  SUBCASE("min with keepdim, weighted output gradient") {
    Tensor y = gs::from_vector<double>({2, 0, 0, 5, 5, 7}, {3, 2});
    y.set_requires_grad(true);
    Tensor m = gs::min(y, {0}, true);  // columns {2, 0, 5} and {0, 5, 7}: one minimum each
    CHECK(m.sizes() == Shape{1, 2});
    gs::sum(gs::mul(m, gs::from_vector<double>({10, 100}, {1, 2}))).backward();
    CHECK(y.grad().to_vector<double>() == std::vector<double>{0, 100, 10, 0, 0, 0});
    Tensor z = gs::from_vector<double>({4, 4, 4, 4}, {4});
    z.set_requires_grad(true);
    gs::min(z).backward();
    CHECK(z.grad().to_vector<double>() == std::vector<double>{0.25, 0.25, 0.25, 0.25});
  }
}

TEST_CASE("max: the tie-split gradient is itself differentiable (create_graph)") {
  Tensor x = gs::from_vector<double>({1, 3, 3}, {3});
  x.set_requires_grad(true);
  Tensor w = gs::from_vector<double>({2.0}, {});
  w.set_requires_grad(true);
  // d/dx of max(x) * w is w/2 at the ties; its derivative in w is 1/2 there.
  auto g = gs::grad({gs::mul(gs::max(x), w)}, {x}, {}, {.create_graph = true});
  CHECK(g[0].to_vector<double>() == std::vector<double>{0, 1, 1});
  auto gw = gs::grad({gs::sum(g[0])}, {w});
  CHECK(gw[0].item<double>() == doctest::Approx(1.0));
}

TEST_CASE("logsumexp: stable for big values, exact edge cases, gradient is softmax") {
  for (DType dtype : {DType::f64, DType::f32}) {
    CAPTURE(dtype);
    const double tol = dtype == DType::f64 ? 1e-14 : 1e-6;
    Tensor big = gs::to(gs::from_vector<double>({1000, 1000, 999, -1000, -1000, -1001}, {2, 3}), dtype);
    auto r = gs::logsumexp(big, {1}).to_vector<double>();
    const double tail = std::log(2.0 + std::exp(-1.0));
    CHECK(r[0] == doctest::Approx(1000 + tail).epsilon(tol));
    CHECK(r[1] == doctest::Approx(-1000 + tail).epsilon(tol));
    CHECK(gs::logsumexp(big).item<double>() == doctest::Approx(1000 + tail).epsilon(tol));
  }
  const double inf = std::numeric_limits<double>::infinity();
  Tensor edge = gs::from_vector<double>({-inf, -inf, 1.0, inf}, {2, 2});
  auto e = gs::logsumexp(edge, {1}).to_vector<double>();
  CHECK(e[0] == -inf);  // log(0), not NaN
  CHECK(e[1] == inf);
  // d lse / dx = softmax(x): finite and summing to one even at 1000.
  Tensor x = gs::from_vector<double>({1000, 999, 998}, {3});
  x.set_requires_grad(true);
  gs::logsumexp(x).backward();
  auto g = x.grad().to_vector<double>();
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  CHECK(g[0] == doctest::Approx(1 / z));
  CHECK(g[1] == doctest::Approx(std::exp(-1.0) / z));
  CHECK(g[2] == doctest::Approx(std::exp(-2.0) / z));
}

TEST_CASE("var: keeps its precision when the mean dwarfs the spread; corrections") {
  Tensor x = gs::from_vector<double>({1e8 + 1, 1e8 + 2, 1e8 + 3, 1e8 + 4}, {4});
  CHECK(gs::var(x).item<double>() == doctest::Approx(5.0 / 3.0).epsilon(1e-12));
  CHECK(gs::var(x, {}, 0).item<double>() == doctest::Approx(1.25).epsilon(1e-12));
  CHECK(gs::var(x, {0}, 3).item<double>() == doctest::Approx(5.0).epsilon(1e-12));
  CHECK(gs::var(gs::scalar_tensor(3.0, DType::f64), {}, 0).item<double>() == 0.0);
}

TEST_CASE("max/min/var/logsumexp: errors say what was expected and what was received") {
  Tensor c = gs::zeros({2, 3}, DType::c128);
  CHECK_THROWS_WITH_AS(gs::max(c), doctest::Contains("max: expected an f32 or f64 tensor, got c128 (2, 3)"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::min(c), doctest::Contains("complex numbers have no ordering"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::var(c), doctest::Contains("var: expected an f32 or f64 tensor, got c128"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::logsumexp(gs::arange(4)),
                       doctest::Contains("logsumexp: expected an f32 or f64 tensor, got i64"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::max(gs::zeros({0, 3}, DType::f64), {0}),
                       doctest::Contains("max: cannot reduce over zero elements (input (0, 3) over dims [0])"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::logsumexp(gs::zeros({2, 0})), doctest::Contains("over all dims"), gs::Error);
  CHECK_THROWS_WITH_AS(
      gs::var(gs::zeros({4, 1}), {1}),
      doctest::Contains("var: 1 elements per output (input (4, 1) over dims [1]) with correction 1 leave 0 "
                        "degrees of freedom"),
      gs::Error);
  CHECK_THROWS_WITH_AS(gs::max(gs::zeros({2, 3}), {1, -1}), doctest::Contains("appears twice"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::min(gs::zeros({2, 3}), {2}), doctest::Contains("dim 2 out of range"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::max(Tensor()), doctest::Contains("max: input is an undefined tensor"), gs::Error);
}
