// The counter-based generator: values depend only on (seed, stream, global element index), so a
// block drawn on a decomposed grid equals the same block of the field drawn whole.
#include <cmath>

#include "tests/engine/engine_test_util.h"

using namespace gs;
using namespace gs_test;

namespace {

const DType kAllDtypes[] = {DType::f32, DType::f64, DType::c64, DType::c128};

// All values as (re, im) pairs of doubles, so every dtype compares the same way.
std::vector<c128> as_c128(const Tensor& t) { return t.to_vector<c128>(); }

size_t count_equal(const Tensor& a, const Tensor& b) {
  auto va = as_c128(a), vb = as_c128(b);
  size_t n = 0;
  for (size_t i = 0; i < va.size(); ++i) n += va[i] == vb[i];
  return n;
}

Tensor draw(bool normal, const Shape& sizes, RandomKey key, DType dtype, const RandomWindow* w = nullptr) {
  return normal ? randn(sizes, key, dtype, w) : rand(sizes, key, dtype, w);
}

}  // namespace

TEST_CASE("random: philox4x32-10 matches the Random123 known-answer vectors") {
  // Counter words = (index lo, index hi, stream lo, stream hi), key words = (seed lo, seed hi).
  CHECK(philox4x32({0, 0}, 0) == std::array<uint32_t, 4>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  CHECK(philox4x32({~0ull, ~0ull}, ~0ull) ==
        std::array<uint32_t, 4>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  CHECK(philox4x32({0x299f31d0a4093822ull, 0x0370734413198a2eull}, 0x85a308d3243f6a88ull) ==
        std::array<uint32_t, 4>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("random: the same (seed, stream) gives the same values; another stream or seed does not") {
  for (bool normal : {false, true}) {
    for (DType dtype : kAllDtypes) {
      CAPTURE(normal);
      CAPTURE(dtype_name(dtype));
      Tensor a = draw(normal, {8, 16}, {42, 3}, dtype);
      Tensor b = draw(normal, {8, 16}, {42, 3}, dtype);
      CHECK(a.dtype() == dtype);
      CHECK(a.sizes() == Shape{8, 16});
      CHECK(count_equal(a, b) == 128);
      CHECK(count_equal(a, draw(normal, {8, 16}, {42, 4}, dtype)) == 0);
      CHECK(count_equal(a, draw(normal, {8, 16}, {43, 3}, dtype)) == 0);
      // The value of an element depends on its index, not on the shape it was drawn in.
      Tensor flat = draw(normal, {128}, {42, 3}, dtype);
      CHECK(count_equal(reshape(a, {128}), flat) == 128);
      // Neighbouring elements differ (the counter really advances).
      auto v = as_c128(a);
      size_t repeats = 0;
      for (size_t i = 1; i < v.size(); ++i) repeats += v[i] == v[i - 1];
      CHECK(repeats == 0);
    }
  }
  // Stream 0 and seed 0 are ordinary keys.
  CHECK(count_equal(rand({64}, {0, 0}, DType::f64), rand({64}, {0, 1}, DType::f64)) == 0);
  CHECK(count_equal(rand({64}, {0, 0}, DType::f64), rand({64}, {1, 0}, DType::f64)) == 0);
  // Non-differentiable dtypes are refused with the expected list.
  CHECK(has(error_of([] { rand({2}, {1, 1}, DType::i64); }), "expected a floating or complex dtype (f32, f64, c64, c128), got i64"));
}

TEST_CASE("random: a decomposed field equals the field drawn whole (every block, every dtype)") {
  const Shape global{7, 10};
  // An uneven 3 x 4 decomposition: the first rows/cols get one more (as ProcessGrid splits).
  const std::vector<int64_t> row_starts{0, 3, 5, 7}, col_starts{0, 3, 6, 8, 10};
  for (bool normal : {false, true}) {
    for (DType dtype : kAllDtypes) {
      CAPTURE(normal);
      CAPTURE(dtype_name(dtype));
      RandomKey key{2026, 11};
      Tensor whole = draw(normal, global, key, dtype);
      for (size_t i = 0; i + 1 < row_starts.size(); ++i) {
        for (size_t j = 0; j + 1 < col_starts.size(); ++j) {
          int64_t r0 = row_starts[i], r1 = row_starts[i + 1], c0 = col_starts[j], c1 = col_starts[j + 1];
          RandomWindow w{global, {r0, c0}};
          Tensor block = draw(normal, {r1 - r0, c1 - c0}, key, dtype, &w);
          Tensor expected = slice(slice(whole, 0, r0, r1), 1, c0, c1);
          CHECK(count_equal(block, expected) == static_cast<size_t>(block.numel()));
        }
      }
    }
  }
  // Three dims (batch, lat, lon) with a window in the middle of every dim.
  const Shape g3{3, 5, 8};
  Tensor whole = randn(g3, {5, 9}, DType::c64);
  RandomWindow w{g3, {1, 2, 3}};
  Tensor block = randn({2, 2, 4}, {5, 9}, DType::c64, &w);
  Tensor expected = slice(slice(slice(whole, 0, 1, 3), 1, 2, 4), 2, 3, 7);
  CHECK(count_equal(block, expected) == 16);
  // A window at the origin covering everything is the plain draw.
  RandomWindow all{g3, {0, 0, 0}};
  CHECK(count_equal(randn(g3, {5, 9}, DType::c64, &all), whole) == 120);
}

TEST_CASE("random: windows that do not fit are refused") {
  RandomWindow off_edge{{4, 4}, {2, 3}};
  std::string msg = error_of([&] { rand({2, 2}, {1, 1}, DType::f64, &off_edge); });
  CHECK(has(msg, "block start (2, 3) with sizes (2, 2) does not fit in the global shape (4, 4)"));
  RandomWindow wrong_rank{{4, 4, 4}, {0, 0, 0}};
  msg = error_of([&] { randn({2, 2}, {1, 1}, DType::f32, &wrong_rank); });
  CHECK(has(msg, "expected global sizes and start with 2 dims, got (4, 4, 4) and (0, 0, 0)"));
  RandomWindow negative{{4}, {-1}};
  CHECK(has(error_of([&] { rand({2}, {1, 1}, DType::f64, &negative); }), "does not fit"));
}

TEST_CASE("random: rand is uniform in [0, 1) and randn is standard normal") {
  // 1e5 samples. Tolerances are about 6 standard errors of each estimate, so they hold for any
  // key with overwhelming probability; the fixed keys make the run reproducible.
  const int64_t n = 100000;
  for (DType dtype : {DType::f32, DType::f64}) {
    CAPTURE(dtype_name(dtype));
    auto u = vals(rand({n}, {7, 1}, dtype));
    double lo = 1, hi = 0, sum = 0, sum2 = 0;
    for (double v : u) lo = std::min(lo, v), hi = std::max(hi, v), sum += v, sum2 += v * v;
    double mean = sum / n, var = sum2 / n - mean * mean;
    CHECK(lo >= 0.0);
    CHECK(hi < 1.0);
    CHECK(lo < 1e-3);   // the range is covered
    CHECK(hi > 0.999);
    CHECK(std::abs(mean - 0.5) < 6e-3);       // standard error 9.1e-4
    CHECK(std::abs(var - 1.0 / 12) < 1.5e-3);  // standard error 2.4e-4

    auto z = vals(randn({n}, {7, 2}, dtype));
    sum = sum2 = 0;
    double sum4 = 0;
    for (double v : z) sum += v, sum2 += v * v, sum4 += v * v * v * v;
    mean = sum / n;
    var = sum2 / n - mean * mean;
    CHECK(std::abs(mean) < 0.02);        // standard error 3.2e-3
    CHECK(std::abs(var - 1.0) < 0.03);   // standard error 4.5e-3
    CHECK(std::abs(sum4 / n - 3.0) < 0.2);  // kurtosis of a normal; standard error 3.1e-2
  }
  // Complex: each part uniform; randn parts have variance 1/2 each and are uncorrelated.
  for (DType dtype : {DType::c64, DType::c128}) {
    CAPTURE(dtype_name(dtype));
    auto u = rand({n}, {8, 1}, dtype).to_vector<c128>();
    double re_lo = 1, re_hi = 0, im_lo = 1, im_hi = 0, re_sum = 0, im_sum = 0;
    for (auto v : u) {
      re_lo = std::min(re_lo, v.real()), re_hi = std::max(re_hi, v.real()), re_sum += v.real();
      im_lo = std::min(im_lo, v.imag()), im_hi = std::max(im_hi, v.imag()), im_sum += v.imag();
    }
    CHECK(re_lo >= 0);
    CHECK(re_hi < 1);
    CHECK(im_lo >= 0);
    CHECK(im_hi < 1);
    CHECK(std::abs(re_sum / n - 0.5) < 6e-3);
    CHECK(std::abs(im_sum / n - 0.5) < 6e-3);

    auto z = randn({n}, {8, 2}, dtype).to_vector<c128>();
    double rr = 0, ii = 0, ri = 0, mr = 0, mi = 0;
    for (auto v : z) rr += v.real() * v.real(), ii += v.imag() * v.imag(), ri += v.real() * v.imag(),
                     mr += v.real(), mi += v.imag();
    CHECK(std::abs(mr / n) < 0.015);            // standard error 2.2e-3
    CHECK(std::abs(mi / n) < 0.015);
    CHECK(std::abs(rr / n - 0.5) < 0.02);       // standard error 2.2e-3
    CHECK(std::abs(ii / n - 0.5) < 0.02);
    CHECK(std::abs(ri / n) < 0.015);            // standard error 1.6e-3
    CHECK(std::abs((rr + ii) / n - 1.0) < 0.03);  // E|z|^2 = 1
  }
}
