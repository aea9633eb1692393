// cat, stack, split and pad (ops/shape_ops.cpp): forward against naive index loops, views,
// gradients (exact values) and error messages. Finite differences, first and second order, are the
// registry walk's (test_registry.cpp), on the samples of ops/shape_ops.cpp.
#include <doctest/doctest.h>

#include <vector>

#include "ops/ops.h"

namespace {

using gs::DType;
using gs::PadMode;
using gs::Shape;
using gs::Tensor;

Tensor randn(const Shape& s, uint64_t stream, DType dtype = DType::f64) {
  return gs::randn(s, {77, stream}, dtype);
}

Tensor transposed_randn(int64_t rows, int64_t cols, uint64_t stream, DType dtype = DType::f64) {
  Tensor t = gs::transpose(randn({cols, rows}, stream, dtype), 0, 1);
  REQUIRE(!t.is_contiguous());
  return t;
}

// Row-major multi-index <-> flat index.
Shape unravel(int64_t i, const Shape& sizes) {
  Shape idx(sizes.size());
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) idx[d] = i % sizes[d], i /= sizes[d];
  return idx;
}
int64_t ravel(const Shape& idx, const Shape& sizes) {
  int64_t i = 0;
  for (size_t d = 0; d < sizes.size(); ++d) i = i * sizes[d] + idx[d];
  return i;
}

// Naive references: one output element at a time, found by index arithmetic.
std::vector<double> cat_reference(const std::vector<Tensor>& ts, int64_t dim) {
  Shape out = ts[0].sizes();
  out[dim] = 0;
  for (auto& t : ts) out[dim] += t.sizes()[dim];
  std::vector<std::vector<double>> values;
  for (auto& t : ts) values.push_back(t.to_vector<double>());
  std::vector<double> r(gs::numel_of(out));
  for (int64_t i = 0; i < static_cast<int64_t>(r.size()); ++i) {
    Shape idx = unravel(i, out);
    size_t k = 0;
    while (idx[dim] >= ts[k].sizes()[dim]) idx[dim] -= ts[k++].sizes()[dim];
    r[i] = values[k][ravel(idx, ts[k].sizes())];
  }
  return r;
}

std::vector<double> stack_reference(const std::vector<Tensor>& ts, int64_t dim) {
  Shape out = ts[0].sizes();
  out.insert(out.begin() + dim, static_cast<int64_t>(ts.size()));
  std::vector<std::vector<double>> values;
  for (auto& t : ts) values.push_back(t.to_vector<double>());
  std::vector<double> r(gs::numel_of(out));
  for (int64_t i = 0; i < static_cast<int64_t>(r.size()); ++i) {
    Shape idx = unravel(i, out);
    int64_t k = idx[dim];
    idx.erase(idx.begin() + dim);
    r[i] = values[k][ravel(idx, ts[k].sizes())];
  }
  return r;
}

// out[i] = t[i - before] where that is inside t; otherwise `value` (constant) or the periodic image.
std::vector<double> pad_reference(const Tensor& t, const std::vector<int64_t>& pads, PadMode mode, double value) {
  Shape before(t.dim(), 0), out = t.sizes();
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    int64_t d = t.dim() - 1 - static_cast<int64_t>(k);
    before[d] = pads[2 * k];
    out[d] += pads[2 * k] + pads[2 * k + 1];
  }
  auto src = t.to_vector<double>();
  std::vector<double> r(gs::numel_of(out));
  for (int64_t i = 0; i < static_cast<int64_t>(r.size()); ++i) {
    Shape idx = unravel(i, out);
    bool inside = true;
    for (int64_t d = 0; d < t.dim(); ++d) {
      int64_t j = idx[d] - before[d], n = t.sizes()[d];
      if (mode == PadMode::circular) j = ((j % n) + n) % n;
      inside = inside && j >= 0 && j < n;
      idx[d] = j;
    }
    r[i] = inside ? src[ravel(idx, t.sizes())] : value;
  }
  return r;
}

Shape padded_sizes(const Tensor& t, const std::vector<int64_t>& pads) {
  Shape s = t.sizes();
  for (size_t k = 0; k < pads.size() / 2; ++k) s[t.dim() - 1 - k] += pads[2 * k] + pads[2 * k + 1];
  return s;
}

Tensor leaf(const Shape& s, uint64_t stream, DType dtype = DType::f64) {
  Tensor t = randn(s, stream, dtype);
  t.set_requires_grad(true);
  return t;
}

}  // namespace

TEST_CASE("cat: forward matches a naive loop (odd sizes, negative dims, non-contiguous, f32/f64)") {
  for (DType dtype : {DType::f64, DType::f32}) {
    CAPTURE(dtype);
    std::vector<Tensor> last = {randn({2, 3}, 1, dtype), transposed_randn(2, 2, 2, dtype), randn({2, 4}, 3, dtype)};
    Tensor c = gs::cat(last, -1);
    CHECK(c.sizes() == Shape{2, 9});
    CHECK(c.dtype() == dtype);
    CHECK(c.to_vector<double>() == cat_reference(last, 1));
    std::vector<Tensor> first = {randn({1, 3, 2}, 4, dtype), randn({3, 3, 2}, 5, dtype), randn({0, 3, 2}, 6, dtype)};
    CHECK(gs::cat(first, 0).to_vector<double>() == cat_reference(first, 0));
    std::vector<Tensor> middle = {randn({2, 2, 3}, 7, dtype), randn({2, 5, 3}, 8, dtype)};
    CHECK(gs::cat(middle, -2).to_vector<double>() == cat_reference(middle, 1));
  }
  // One tensor: a copy, not an alias.
  Tensor x = randn({3}, 9);
  Tensor y = gs::cat({x});
  CHECK(y.to_vector<double>() == x.to_vector<double>());
  CHECK(y.storage() != x.storage());
  // Complex values and a large, multithreaded copy.
  Tensor z = randn({2, 3}, 10, DType::c128);
  CHECK(gs::cat({z, z}, 1).to_vector<gs::c128>()[4] == z.to_vector<gs::c128>()[1]);
  std::vector<Tensor> big = {randn({300, 70}, 11), transposed_randn(300, 130, 12)};
  CHECK(gs::cat(big, 1).to_vector<double>() == cat_reference(big, 1));
}

TEST_CASE("cat: each input gets its slice of the gradient") {
  Tensor a = leaf({2, 1}, 20), b = gs::zeros({2, 2}, DType::f64), c = leaf({2, 3}, 21);
  Tensor w = gs::reshape(gs::arange(0.0, 12.0, 1.0, DType::f64), {2, 6});
  gs::sum(gs::mul(gs::cat({a, b, c}, 1), w)).backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0, 6});
  CHECK(!b.grad().defined());
  CHECK(c.grad().to_vector<double>() == std::vector<double>{3, 4, 5, 9, 10, 11});
}

TEST_CASE("stack: forward and gradient") {
  for (DType dtype : {DType::f64, DType::f32}) {
    std::vector<Tensor> ts = {randn({2, 3}, 30, dtype), transposed_randn(2, 3, 31, dtype), randn({2, 3}, 32, dtype)};
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      CAPTURE(dim);
      Tensor s = gs::stack(ts, dim);
      int64_t d = dim < 0 ? dim + 3 : dim;
      Shape want = {2, 3};
      want.insert(want.begin() + d, 3);
      CHECK(s.sizes() == want);
      CHECK(s.to_vector<double>() == stack_reference(ts, d));
    }
  }
  CHECK(gs::stack({gs::scalar_tensor(1.0), gs::scalar_tensor(2.0)}).to_vector<double>() == std::vector<double>{1, 2});
  Tensor a = leaf({2}, 33), b = leaf({2}, 34);
  Tensor w = gs::from_vector<double>({1, 2, 3, 4}, {2, 2});
  gs::sum(gs::mul(gs::stack({a, b}, 1), w)).backward();  // stack(.., 1)[i, k] = (a, b)[k][i]
  CHECK(a.grad().to_vector<double>() == std::vector<double>{1, 3});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{2, 4});
}

TEST_CASE("split: views with the right sizes; the gradient lands in place") {
  Tensor t = randn({7, 3}, 40);
  auto pieces = gs::split(t, 3);
  REQUIRE(pieces.size() == 3);
  CHECK(pieces[0].sizes() == Shape{3, 3});
  CHECK(pieces[2].sizes() == Shape{1, 3});
  for (auto& p : pieces) CHECK(p.storage() == t.storage());  // views, not copies
  CHECK(gs::cat(pieces, 0).to_vector<double>() == t.to_vector<double>());
  auto cols = gs::split(t, std::vector<int64_t>{2, 0, 1}, -1);
  REQUIRE(cols.size() == 3);
  CHECK(cols[1].sizes() == Shape{7, 0});
  CHECK(gs::cat(cols, 1).to_vector<double>() == t.to_vector<double>());
  CHECK(gs::split(gs::zeros({0, 2}), 4).size() == 1);  // an empty dim splits into one empty piece
  CHECK(gs::split(t, 10).size() == 1);
  Tensor x = leaf({5}, 41);
  auto xs = gs::split(x, 2);
  gs::sum(gs::mul(xs[2], 3.0)).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 0, 3});
}

TEST_CASE("pad: constant and circular forward match naive index loops") {
  struct Case {
    Shape sizes;
    std::vector<int64_t> pads;
    PadMode mode;
    double value;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4}, {1, 2}, PadMode::constant, 0.0},
      {{2, 3, 4}, {1, 2, 0, 3}, PadMode::constant, -1.5},
      {{2, 3, 4}, {-1, 2, 2, -2}, PadMode::constant, 7.0},   // negative pads crop
      {{2, 3, 4}, {-2, -2}, PadMode::constant, 0.0},         // cropped to nothing
      {{2, 3, 4}, {1, 1, 1, 1, 1, 1}, PadMode::constant, 2.0},
      {{2, 3, 4}, {2, 1, 3, 3}, PadMode::circular, 0.0},     // pads up to the dim's size
      {{2, 3, 4}, {4, 4}, PadMode::circular, 0.0},
      {{2, 3, 4}, {0, 1, 1, 0, 2, 2}, PadMode::circular, 0.0},
      {{5}, {3, 0}, PadMode::circular, 0.0},
      {{2, 3}, {}, PadMode::circular, 0.0},                    // no pads: a copy
  };
  for (DType dtype : {DType::f64, DType::f32}) {
    for (const auto& c : cases) {
      CAPTURE(gs::shape_str(c.sizes));
      CAPTURE(gs::shape_str(c.pads));
      CAPTURE(static_cast<int>(c.mode));
      for (bool contiguous : {true, false}) {
        Tensor t = contiguous || c.sizes.size() != 3
                       ? randn(c.sizes, 50, dtype)
                       : gs::transpose(randn({c.sizes[0], c.sizes[2], c.sizes[1]}, 51, dtype), 1, 2);
        Tensor out = gs::pad(t, c.pads, c.mode, c.value);
        CHECK(out.sizes() == padded_sizes(t, c.pads));
        CHECK(out.dtype() == dtype);
        CHECK(out.storage() != t.storage());
        CHECK(out.to_vector<double>() == pad_reference(t, c.pads, c.mode, c.value));
      }
    }
  }
  Tensor z = gs::from_vector<gs::c128>({{1, 2}, {3, 4}}, {2});
  CHECK(gs::pad(z, {1, 0}, PadMode::circular).to_vector<gs::c128>() == std::vector<gs::c128>{{3, 4}, {1, 2}, {3, 4}});
}

TEST_CASE("pad: gradients; circular halos send their gradient back to the elements they copied") {
  Tensor x = gs::from_vector<double>({1, 2, 3}, {3});
  x.set_requires_grad(true);
  Tensor w = gs::from_vector<double>({1, 2, 3, 4, 5, 6}, {6});
  // pad (2, 1): out = [x1, x2, x0, x1, x2, x0]
  Tensor out = gs::pad(x, {2, 1}, PadMode::circular);
  CHECK(out.to_vector<double>() == std::vector<double>{2, 3, 1, 2, 3, 1});
  gs::sum(gs::mul(out, w)).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3 + 6, 1 + 4, 2 + 5});
  Tensor y = gs::from_vector<double>({1, 2, 3, 4}, {4});
  y.set_requires_grad(true);
  // constant (-1, 2): out = [y1, y2, y3, 0, 0]; y0 was cropped and gets no gradient.
  gs::sum(gs::mul(gs::pad(y, {-1, 2}), gs::from_vector<double>({1, 2, 3, 4, 5}, {5}))).backward();
  CHECK(y.grad().to_vector<double>() == std::vector<double>{0, 1, 2, 3});
}

TEST_CASE("cat/stack/split/pad: errors name the offending tensor and the shapes") {
  Tensor a = gs::zeros({2, 3}), b = gs::zeros({2, 4}), d = gs::zeros({2, 3}, DType::f64);
  CHECK_THROWS_WITH_AS(gs::cat({}), doctest::Contains("cat: expected a non-empty list of tensors"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::stack({}), doctest::Contains("stack: expected a non-empty list"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::cat({a, b}, 0),
                       doctest::Contains("cat: tensor 1 has shape (2, 4), but tensor 0 has shape (2, 3)"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::cat({a, gs::zeros({2, 3, 1})}, 1), doctest::Contains("tensor 1 has shape (2, 3, 1)"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(
      gs::cat({a, a, d}, 1),
      doctest::Contains("expected every tensor to have dtype f32 (that of tensor 0), but tensor 2 is f64"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::cat({a, Tensor()}), doctest::Contains("cat: tensor 1 of the list is undefined"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::cat({gs::scalar_tensor(1.0)}), doctest::Contains("0-dim tensors cannot be concatenated"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::cat({a, b}, 2), doctest::Contains("dim 2 out of range"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::stack({a, a, b}),
                       doctest::Contains("stack: expected every tensor to have shape (2, 3) (that of tensor 0), but "
                                         "tensor 2 has shape (2, 4)"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::split(a, 0), doctest::Contains("split: split_size must be positive, got 0"), gs::Error);
  CHECK_THROWS_WITH_AS(
      gs::split(a, std::vector<int64_t>{1, 1}, 1),
      doctest::Contains("split: the sizes (1, 1) add up to 2, but dim 1 of the input (2, 3) has size 3"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::split(a, std::vector<int64_t>{4, -1}, 1), doctest::Contains("piece 1 has negative size -1"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::split(gs::scalar_tensor(1.0), 1), doctest::Contains("cannot split a 0-dim tensor"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::pad(a, {1}), doctest::Contains("pad: expected an even number of pads"), gs::Error);
  CHECK_THROWS_WITH_AS(
      gs::pad(a, {1, 1, 1, 1, 1, 1}),
      doctest::Contains("pad: the 6 pads (1, 1, 1, 1, 1, 1) cover 3 dims, but the input (2, 3) has only 2"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::pad(a, {4, 0}, PadMode::circular),
                       doctest::Contains("circular pads (4, 0) for dim 1 of size 3 would wrap more than once"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::pad(a, {0, 0, -1, 0}, PadMode::circular),
                       doctest::Contains("circular padding needs non-negative pads, got (-1, 0) for dim 0"), gs::Error);
  CHECK_THROWS_WITH_AS(gs::pad(a, {-2, -2}), doctest::Contains("crop dim 1 of size 3 to a negative size -1"),
                       gs::Error);
  CHECK_THROWS_WITH_AS(gs::pad(a, {1, 1}, PadMode::circular, 3.0),
                       doctest::Contains("a fill value (3) applies to constant mode only"), gs::Error);
}
