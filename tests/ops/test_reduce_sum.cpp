// sum, mean and sum_to (ops/reduce_sum.cpp) against naive loops: dims, negative dims, keepdim,
// all dims, non-contiguous inputs, large f32 inputs (accumulation accuracy), complex, errors.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/test_util.h"

namespace {

using gs::c128;
using gs::DType;
using gs::Shape;
using gs::Tensor;

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

Tensor random_tensor(const Shape& s, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  if (gs::is_complex(dtype)) {
    std::vector<c128> v(numel(s));
    for (auto& x : v) x = c128(u(rng), u(rng));
    Tensor t = gs::from_vector(v, s);
    return dtype == DType::c128 ? t : gs::cast_copy(t, dtype);
  }
  std::vector<double> v(numel(s));
  for (auto& x : v) x = u(rng);
  Tensor t = gs::from_vector(v, s);
  return dtype == DType::f64 ? t : gs::cast_copy(t, dtype);
}

// Naive reduction of row-major values over the dims flagged in `reduced`; returns the keepdim
// shape's values in row-major order.
template <typename V>
std::vector<V> naive_sum(const std::vector<V>& x, const Shape& s, const std::vector<bool>& reduced, double scale) {
  Shape out_s = s;
  for (size_t d = 0; d < s.size(); ++d)
    if (reduced[d]) out_s[d] = 1;
  std::vector<V> out(numel(out_s), V(0));
  for (int64_t i = 0; i < numel(s); ++i) {
    int64_t rem = i, o = 0, mult = 1;
    for (size_t d = s.size(); d-- > 0;) {
      int64_t idx = rem % s[d];
      rem /= s[d];
      if (!reduced[d]) o += idx * mult;
      mult *= out_s[d];
    }
    out[o] += x[i];
  }
  for (auto& v : out) v *= scale;
  return out;
}

std::vector<bool> reduced_flags(int64_t ndim, const std::vector<int64_t>& dims) {
  std::vector<bool> r(ndim, dims.empty());
  for (auto d : dims) r[d < 0 ? d + ndim : d] = true;
  return r;
}

Shape result_shape(const Shape& s, const std::vector<bool>& reduced, bool keepdim) {
  Shape r;
  for (size_t d = 0; d < s.size(); ++d) {
    if (!reduced[d]) r.push_back(s[d]);
    else if (keepdim) r.push_back(1);
  }
  return r;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double tol) {
  REQUIRE(got.size() == want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1.0 + std::abs(want[i])))) {
      ++bad;
      FAIL_CHECK("element " << i << ": got " << got[i] << ", expected " << want[i]);
    }
}

void check_close(const std::vector<c128>& got, const std::vector<c128>& want, double tol) {
  REQUIRE(got.size() == want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1.0 + std::abs(want[i])))) {
      ++bad;
      FAIL_CHECK("element " << i << ": got " << got[i] << ", expected " << want[i]);
    }
}

std::string dims_str(const std::vector<int64_t>& dims) {
  std::string s = "{";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "}";
}

using gs_test::error_of;

using gs_test::contains;

const std::vector<std::vector<int64_t>> kDimSets = {{}, {0}, {1}, {2}, {-1}, {-3}, {0, 2}, {2, 0}, {-1, 0},
                                                     {1, 2}, {0, 1, 2}, {-3, -2, -1}};

// The inputs every reduction test walks: contiguous odd shape, permuted, stepped slice, expanded.
std::vector<std::pair<std::string, Tensor>> inputs_3d(DType dt) {
  return {
      {"contiguous (3,5,7)", random_tensor({3, 5, 7}, dt, 1)},
      {"permuted (3,5,7)", gs::permute(random_tensor({7, 3, 5}, dt, 2), {1, 2, 0})},
      {"stepped slice (3,5,7)", gs::slice(random_tensor({3, 5, 14}, dt, 3), 2, 1, 14, 2)},
      {"expanded (3,5,7) of (3,1,7)", gs::expand(random_tensor({3, 1, 7}, dt, 4), {3, 5, 7})},
  };
}

}  // namespace

TEST_CASE("sum/mean: every dim set, keepdim or not, on contiguous and strided inputs (f32, f64)") {
  for (DType dt : {DType::f64, DType::f32}) {
    double tol = dt == DType::f32 ? 2e-6 : 1e-13;
    for (auto& [label, x] : inputs_3d(dt)) {
      auto xv = x.to_vector<double>();
      for (const auto& dims : kDimSets) {
        auto flags = reduced_flags(3, dims);
        int64_t count = 1;
        for (int d = 0; d < 3; ++d)
          if (flags[d]) count *= x.sizes()[d];
        for (bool keepdim : {false, true}) {
          INFO(gs::dtype_name(dt) << " " << label << " dims " << dims_str(dims) << " keepdim " << keepdim);
          Tensor s = gs::sum(x, dims, keepdim);
          Tensor m = gs::mean(x, dims, keepdim);
          CHECK(s.dtype() == dt);
          CHECK(m.dtype() == dt);
          CHECK(s.sizes() == result_shape(x.sizes(), flags, keepdim));
          CHECK(m.sizes() == s.sizes());
          CHECK(s.is_contiguous());
          CHECK(!s.is_view());
          check_close(s.to_vector<double>(), naive_sum(xv, x.sizes(), flags, 1.0), tol);
          check_close(m.to_vector<double>(), naive_sum(xv, x.sizes(), flags, 1.0 / static_cast<double>(count)), tol);
        }
      }
    }
  }
}

TEST_CASE("sum/mean: defaults reduce everything to a 0-dim tensor") {
  Tensor x = random_tensor({4, 3}, DType::f64, 11);
  auto xv = x.to_vector<double>();
  double total = std::accumulate(xv.begin(), xv.end(), 0.0);
  Tensor s = gs::sum(x);
  CHECK(s.dim() == 0);
  CHECK(s.item<double>() == doctest::Approx(total).epsilon(1e-14));
  CHECK(gs::mean(x).dim() == 0);
  CHECK(gs::mean(x).item<double>() == doctest::Approx(total / 12).epsilon(1e-14));
  CHECK(gs::sum(x, {}, true).sizes() == Shape{1, 1});
  // 0-dim input: dims {} / {0} / {-1} all reduce "everything", i.e. the value itself.
  Tensor z = gs::scalar_tensor(2.5, DType::f64);
  CHECK(gs::sum(z).item<double>() == 2.5);
  CHECK(gs::sum(z, {0}).item<double>() == 2.5);
  CHECK(gs::sum(z, {-1}, true).dim() == 0);
  CHECK(gs::mean(z).item<double>() == 2.5);
  // 1-element and size-1 dims.
  CHECK(gs::sum(gs::ones({1, 1, 1}, DType::f32), {1}).sizes() == Shape{1, 1});
}

TEST_CASE("sum/mean: empty inputs") {
  Tensor e = gs::zeros({0, 3}, DType::f64);
  CHECK(gs::sum(e).item<double>() == 0.0);
  CHECK(gs::sum(e, {0}).sizes() == Shape{3});
  CHECK(gs::sum(e, {0}).to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK(gs::sum(e, {1}).sizes() == Shape{0});
  CHECK(gs::mean(e, {1}).sizes() == Shape{0});  // nothing to average, nothing averaged
  std::string msg = error_of([&] { gs::mean(e, {0}); });
  CHECK(contains(msg, "mean"));
  CHECK(contains(msg, "(0, 3)"));
  CHECK(contains(error_of([&] { gs::mean(e); }), "mean"));
}

TEST_CASE("sum/mean: complex (c64, c128), contiguous and transposed") {
  for (DType dt : {DType::c128, DType::c64}) {
    double tol = dt == DType::c64 ? 2e-6 : 1e-13;
    std::vector<std::pair<std::string, Tensor>> xs = {
        {"contiguous (3,4,5)", random_tensor({3, 4, 5}, dt, 21)},
        {"transposed (3,4,5)", gs::transpose(random_tensor({5, 4, 3}, dt, 22), 0, 2)},
    };
    for (auto& [label, x] : xs) {
      auto xv = x.to_vector<c128>();
      for (const auto& dims : std::vector<std::vector<int64_t>>{{}, {0}, {-1}, {0, 2}, {1}}) {
        INFO(gs::dtype_name(dt) << " " << label << " dims " << dims_str(dims));
        auto flags = reduced_flags(3, dims);
        int64_t count = 1;
        for (int d = 0; d < 3; ++d)
          if (flags[d]) count *= x.sizes()[d];
        Tensor s = gs::sum(x, dims, true);
        CHECK(s.dtype() == dt);
        check_close(s.to_vector<c128>(), naive_sum(xv, x.sizes(), flags, 1.0), tol);
        Tensor m = gs::mean(x, dims);
        CHECK(m.dtype() == dt);
        check_close(m.to_vector<c128>(), naive_sum(xv, x.sizes(), flags, 1.0 / static_cast<double>(count)), tol);
      }
    }
  }
}

TEST_CASE("sum/mean: 1e6 f32 elements accumulate to 1e-6 relative of a double reference") {
  // Uniform [0, 1) values: a plain float accumulator drifts by ~1e-4 relative over 1e6 terms.
  Tensor x = gs::rand({1000, 1000}, {7, 7}, DType::f32);
  auto xv = x.to_vector<double>();
  long double ref = 0;
  for (double v : xv) ref += v;
  const double total = static_cast<double>(ref);
  // All dims, contiguous (the parallel single-output path).
  double s = gs::sum(x).item<double>();
  CHECK(std::abs(s - total) <= 1e-6 * std::abs(total));
  double m = gs::mean(x).item<double>();
  CHECK(std::abs(m - total / 1e6) <= 1e-6 * std::abs(total / 1e6));
  // Flattened 1-d and non-contiguous (transposed): same total.
  double sf = gs::sum(gs::reshape(x, {-1})).item<double>();
  CHECK(std::abs(sf - total) <= 1e-6 * std::abs(total));
  Tensor xt = gs::transpose(x, 0, 1);
  double st = gs::sum(xt).item<double>();
  CHECK(std::abs(st - total) <= 1e-6 * std::abs(total));
  // Per-row and per-column sums, each a 1000-term sum.
  auto rows = gs::sum(x, {1}).to_vector<double>();
  auto cols = gs::sum(xt, {0}).to_vector<double>();  // = rows of x
  auto cols_x = gs::sum(x, {0}).to_vector<double>();
  REQUIRE(rows.size() == 1000);
  int bad = 0;
  for (int64_t i = 0; i < 1000 && bad < 5; ++i) {
    double r = 0, c = 0;
    for (int64_t j = 0; j < 1000; ++j) r += xv[i * 1000 + j], c += xv[j * 1000 + i];
    if (std::abs(rows[i] - r) > 1e-6 * r || std::abs(cols[i] - r) > 1e-6 * r || std::abs(cols_x[i] - c) > 1e-6 * c) {
      ++bad;
      FAIL_CHECK("row/col " << i << ": rows " << rows[i] << " cols " << cols[i] << " vs " << r << "; col sum "
                            << cols_x[i] << " vs " << c);
    }
  }
  // 1e6 values of 1 + 2^-20: a float accumulator stalls at 1e6 (the 2^-20 parts fall below the
  // 0.0625 spacing of floats there); a double one gets 1e6 + 0.95, then rounds once to f32.
  Tensor near_one = gs::full({1000000}, 1.0 + 1.0 / 1024 / 1024, DType::f32);
  double s1 = gs::sum(near_one).item<double>();
  CHECK(std::abs(s1 - 1e6 * (1.0 + 1.0 / 1024 / 1024)) <= 0.0625);
}

TEST_CASE("sum_to: reduces a broadcast back to its shape") {
  Tensor x = random_tensor({2, 3, 4}, DType::f64, 31);
  auto xv = x.to_vector<double>();
  struct Case {
    Shape target;
    std::vector<bool> reduced;  // over x's dims
  };
  std::vector<Case> cases = {
      {{2, 3, 4}, {false, false, false}}, {{3, 4}, {true, false, false}},  {{4}, {true, true, false}},
      {{1, 3, 1}, {true, false, true}},   {{3, 1}, {true, false, true}},   {{1, 1, 1}, {true, true, true}},
      {{}, {true, true, true}},           {{1}, {true, true, true}},       {{2, 1, 4}, {false, true, false}},
  };
  for (const auto& c : cases) {
    INFO("target " << gs::shape_str(c.target));
    Tensor r = gs::sum_to(x, c.target);
    CHECK(r.sizes() == c.target);
    check_close(r.to_vector<double>(), naive_sum(xv, x.sizes(), c.reduced, 1.0), 1e-13);
  }
  CHECK(gs::sum_to(x, {2, 3, 4}).is_same(x));
  // Non-contiguous and expanded inputs.
  Tensor e = gs::expand(random_tensor({3, 1}, DType::f64, 32), {2, 3, 5});
  auto ev = gs::select(gs::select(e, 0, 0), 1, 0).to_vector<double>();
  auto r = gs::sum_to(e, {3, 1}).to_vector<double>();
  for (int i = 0; i < 3; ++i) CHECK(r[i] == doctest::Approx(10 * ev[i]));
  Tensor t = gs::transpose(random_tensor({4, 3}, DType::f64, 33), 0, 1);
  check_close(gs::sum_to(t, {1, 4}).to_vector<double>(),
              naive_sum(t.to_vector<double>(), t.sizes(), {true, false}, 1.0), 1e-13);
  // Complex.
  Tensor z = random_tensor({2, 3}, DType::c128, 34);
  check_close(gs::sum_to(z, {3}).to_vector<c128>(), naive_sum(z.to_vector<c128>(), z.sizes(), {true, false}, 1.0),
              1e-13);
  // Errors name both shapes.
  std::string msg = error_of([&] { gs::sum_to(x, {5}); });
  CHECK(contains(msg, "sum_to"));
  CHECK(contains(msg, "(2, 3, 4)"));
  CHECK(contains(msg, "(5,)"));
  CHECK(contains(error_of([&] { gs::sum_to(x, {2, 2, 3, 4}); }), "(2, 2, 3, 4)"));
  CHECK(contains(error_of([&] { gs::sum_to(x, {2, 3, 1, 4}); }), "sum_to"));
  CHECK(contains(error_of([&] { gs::sum_to(Tensor(), {1}); }), "undefined"));
}

TEST_CASE("sum/mean: errors for duplicate and out-of-range dims, dtypes, undefined") {
  Tensor x = random_tensor({2, 3, 4}, DType::f64, 41);
  std::string msg = error_of([&] { gs::sum(x, {1, 1}); });
  CHECK(contains(msg, "sum"));
  CHECK(contains(msg, "twice"));
  CHECK(contains(error_of([&] { gs::sum(x, {0, -3}); }), "twice"));
  CHECK(contains(error_of([&] { gs::mean(x, {2, -1}); }), "mean"));
  msg = error_of([&] { gs::sum(x, {3}); });
  CHECK(contains(msg, "sum"));
  CHECK(contains(msg, "dim 3"));
  CHECK(contains(msg, "out of range"));
  CHECK(contains(msg, "3 dims"));
  msg = error_of([&] { gs::mean(x, {-4}); });
  CHECK(contains(msg, "mean"));
  CHECK(contains(msg, "-4"));
  CHECK(contains(msg, "out of range"));
  CHECK(contains(error_of([&] { gs::sum(gs::scalar_tensor(1.0), {1}); }), "out of range"));
  msg = error_of([&] { gs::sum(gs::arange(5), {}); });
  CHECK(contains(msg, "sum"));
  CHECK(contains(msg, "i64"));
  CHECK(contains(error_of([&] { gs::mean(gs::from_vector(std::vector<bool>{true})); }), "bool"));
  CHECK(contains(error_of([&] { gs::sum(Tensor()); }), "undefined"));
  CHECK(contains(error_of([&] { gs::mean(Tensor()); }), "undefined"));
}

TEST_CASE("sum/mean: gradients broadcast back (and keep their graph)") {
  Tensor x = random_tensor({2, 3}, DType::f64, 51);
  x.set_requires_grad(true);
  auto g = gs::grad({gs::sum(gs::mean(x, {1}, true))}, {x})[0];
  CHECK(g.sizes() == x.sizes());
  for (double v : g.to_vector<double>()) CHECK(v == doctest::Approx(1.0 / 3));
  auto g2 = gs::grad({gs::sum(gs::sum(x, {0}))}, {x})[0];
  for (double v : g2.to_vector<double>()) CHECK(v == 1.0);
  {
    gs::NoGradGuard ng;
    CHECK(!gs::sum(x).requires_grad());
  }
  CHECK(gs::sum(x).requires_grad());
}

// Was a bug: ops/reduce_sum.cpp sum_kernel(): the dtype dispatch is always named "sum", so mean() on an i64
// or bool tensor reports "sum: expected a floating or complex dtype ...".
TEST_CASE("mean: dtype errors name mean, not sum") {
  std::string msg = error_of([&] { gs::mean(gs::arange(4)); });
  CHECK(contains(msg, "mean"));
  CHECK(contains(msg, "i64"));
}
