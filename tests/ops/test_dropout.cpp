// Dropout, feature dropout and drop path (ops/dropout.h): the kept fraction against binomial
// bounds, the scale, the mask against gs::rand of the same key (an independent draw of the same
// rule), a tile's mask against the slice of the whole tensor's, the identity and p = 1 cases,
// gradients (mask times scale, twice differentiable) and the errors.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/autograd/engine.h"
#include "engine/autograd/gradcheck.h"
#include "engine/factory.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/view.h"
#include "tests/tensor_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using gs_test::contains;
using gs_test::error_of;
using gs_test::exactly_equal;
using gs_test::values_f64;

namespace {

constexpr RandomKey kKey{2024, 11};

// A (rows, cols) block of x (B, C, H, W) from (r0, c0), batch samples [b0, b0 + nb).
Tensor block(const Tensor& x, int64_t b0, int64_t nb, int64_t r0, int64_t rows, int64_t c0, int64_t cols) {
  return contiguous(narrow(narrow(narrow(x, 0, b0, nb), 2, r0, rows), 3, c0, cols));
}

}  // namespace

TEST_CASE("dropout: kept fraction within binomial bounds, kept values scaled by 1 / (1 - p), mask = rand >= p") {
  const int64_t n = 100000;
  for (double p : {0.1, 0.5, 0.9}) {
    CAPTURE(p);
    const Tensor out = dropout(ones({n}, DType::f64), p, kKey);
    const std::vector<double> v = values_f64(out);
    // The rule's independent form: element i is kept when gs::rand(f64) of the key at i is >= p.
    const std::vector<double> u = values_f64(rand({n}, kKey, DType::f64));
    int64_t kept = 0;
    bool values_ok = true, rule_ok = true;
    for (int64_t i = 0; i < n; ++i) {
      const bool k = v[i] != 0.0;
      kept += k;
      values_ok = values_ok && (!k || std::abs(v[i] - 1.0 / (1.0 - p)) <= 1e-15 * v[i]);
      rule_ok = rule_ok && (k == (u[i] >= p));
    }
    CHECK(values_ok);
    CHECK(rule_ok);
    // Binomial(n, 1 - p): 5 standard deviations (the key is fixed, so this is a fixed draw that a
    // wrong rule, e.g. keeping with probability p, misses by hundreds of deviations).
    const double mean = n * (1 - p), sd = std::sqrt(n * p * (1 - p));
    CHECK(std::abs(static_cast<double>(kept) - mean) < 5 * sd);
    // The mean of the output is 1 within the same bound (scaled).
    CHECK(std::abs(values_f64(gs::mean(out))[0] - 1.0) < 5 * sd / (n * (1 - p)));
    // f32 draws the same mask.
    const std::vector<double> v32 = values_f64(dropout(ones({n}, DType::f32), p, kKey));
    bool same = true;
    for (int64_t i = 0; i < n; ++i) same = same && ((v32[i] != 0) == (v[i] != 0));
    CHECK(same);
  }
}

TEST_CASE("feature_dropout and drop_path share one decision per (sample, channel) and per sample") {
  const Tensor x = rand({40, 6, 3, 4}, {5, 5}, DType::f64);
  const double p = 0.3, scale = 1 / (1 - p);
  const std::vector<double> xv = values_f64(x);
  const std::vector<double> fd = values_f64(feature_dropout(x, p, kKey));
  const std::vector<double> dp = values_f64(drop_path(x, p, kKey));
  const std::vector<double> u_channel = values_f64(rand({40 * 6}, kKey, DType::f64));
  const std::vector<double> u_sample = values_f64(rand({40}, kKey, DType::f64));
  bool fd_ok = true, dp_ok = true;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t sample = i / 72, channel = i / 12;  // 6 * 3 * 4 and 3 * 4 elements
    const double want_fd = u_channel[channel] >= p ? xv[i] * scale : 0.0;
    const double want_dp = u_sample[sample] >= p ? xv[i] * scale : 0.0;
    fd_ok = fd_ok && std::abs(fd[i] - want_fd) <= 1e-15 * std::abs(want_fd);
    dp_ok = dp_ok && std::abs(dp[i] - want_dp) <= 1e-15 * std::abs(want_dp);
  }
  CHECK(fd_ok);
  CHECK(dp_ok);
  // Stochastic depth's statistics: 100k samples keep 1 - p of them within binomial bounds.
  const int64_t n = 100000;
  const std::vector<double> kept = values_f64(drop_path(ones({n, 2}, DType::f64), 0.25, kKey));
  int64_t k = 0;
  for (int64_t i = 0; i < n; ++i) k += kept[2 * i] != 0.0;
  CHECK(std::abs(static_cast<double>(k) - 0.75 * n) < 5 * std::sqrt(n * 0.25 * 0.75));
}

TEST_CASE("dropout: a tile or batch shard with its window draws the slice of the whole tensor's mask") {
  const Tensor whole = rand({5, 3, 10, 12}, {9, 1}, DType::f64);
  const Shape global = whole.sizes();
  // Tiles of a 2 x 3 split of (lat, lon) with uneven blocks, and batch shards.
  const int64_t b0 = 2, nb = 2, r0 = 4, rows = 3, c0 = 8, cols = 4;
  const Tensor tile = block(whole, b0, nb, r0, rows, c0, cols);
  const RandomWindow w{global, {b0, 0, r0, c0}};
  for (int kind = 0; kind < 3; ++kind) {
    CAPTURE(kind);
    auto run = [&](const Tensor& t, const RandomWindow* win) {
      return kind == 0 ? dropout(t, 0.5, kKey, true, win)
                       : kind == 1 ? feature_dropout(t, 0.5, kKey, true, win) : drop_path(t, 0.5, kKey, true, win);
    };
    const Tensor from_whole = block(run(whole, nullptr), b0, nb, r0, rows, c0, cols);
    CHECK(exactly_equal(run(tile, &w), from_whole));
    // The samples after the shard do not matter: a larger global batch gives the same mask.
    const RandomWindow longer{{9, 3, 10, 12}, {b0, 0, r0, c0}};
    CHECK(exactly_equal(run(tile, &longer), from_whole));
    // Without the window the tile draws another mask (its own indices).
    if (kind == 0) CHECK_FALSE(exactly_equal(run(tile, nullptr), from_whole));
  }
  // A non-contiguous x draws the mask of its logical indices.
  const Tensor t = transpose(rand({7, 9}, {3, 3}, DType::f64), 0, 1);
  CHECK(exactly_equal(dropout(t, 0.4, kKey), dropout(contiguous(t), 0.4, kKey)));
}

TEST_CASE("dropout: p = 0 and eval return x itself, p = 1 gives zeros (NaN stays NaN) with a zero gradient") {
  Tensor x = rand({4, 5}, {1, 2}, DType::f64);
  x.set_requires_grad(true);
  for (int kind = 0; kind < 3; ++kind) {
    auto run = [&](double p, bool training) {
      return kind == 0 ? dropout(x, p, kKey, training)
                       : kind == 1 ? feature_dropout(x, p, kKey, training) : drop_path(x, p, kKey, training);
    };
    CHECK(run(0.0, true).impl() == x.impl());
    CHECK(run(0.7, false).impl() == x.impl());
    CHECK(run(1.0, false).impl() == x.impl());
    const Tensor zero = run(1.0, true);
    CHECK(values_f64(sum(abs(zero)))[0] == 0.0);
    const Tensor g = grad({sum(mul(zero, 3.0))}, {x})[0];
    CHECK(values_f64(sum(abs(g)))[0] == 0.0);
  }
  const Tensor nan = from_vector(std::vector<double>{std::numeric_limits<double>::quiet_NaN(), 1.0});
  const std::vector<double> v = values_f64(dropout(nan, 1.0, kKey));
  CHECK(std::isnan(v[0]));
  CHECK(v[1] == 0.0);
}

TEST_CASE("dropout: the gradient is g * mask / (1 - p), and it differentiates again") {
  const double p = 0.35;
  Tensor x = rand({6, 7}, {4, 4}, DType::f64);
  x.set_requires_grad(true);
  const Tensor w = rand({6, 7}, {4, 5}, DType::f64);
  const Tensor mask = dropout(ones({6, 7}, DType::f64), p, kKey);  // 0 or 1 / (1 - p)
  for (int kind = 0; kind < 3; ++kind) {
    CAPTURE(kind);
    auto run = [&](const Tensor& t) {
      return kind == 0 ? dropout(t, p, kKey) : kind == 1 ? feature_dropout(t, p, kKey) : drop_path(t, p, kKey);
    };
    const Tensor m = run(ones({6, 7}, DType::f64));
    const Tensor g = grad({sum(mul(run(x), w))}, {x})[0];
    CHECK(gs_test::max_abs_diff(g, mul(w, m)) <= 1e-15);
    const DifferentiableFn fn = [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{run(in[0])}; };
    CHECK(gradcheck(fn, {x}).ok);
    CHECK(gradgradcheck(fn, {x}).ok);
  }
  // The element mask has both kinds of entries (the checks above are not vacuous).
  const std::vector<double> mv = values_f64(mask);
  int zeros_seen = 0;
  for (double m : mv) zeros_seen += m == 0.0;
  CHECK(zeros_seen > 0);
  CHECK(zeros_seen < static_cast<int>(mv.size()));
}

TEST_CASE("dropout: errors say what was expected") {
  const Tensor x = ones({2, 3}, DType::f64);
  for (double p : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()})
    CHECK(contains(error_of([&] { dropout(x, p, kKey); }), "dropout: expected a drop probability p in [0, 1]"));
  CHECK(contains(error_of([&] { drop_path(x, 2.0, kKey, false); }), "drop_path: expected a drop probability"));
  CHECK(contains(error_of([&] { dropout(ones({3}, DType::i64), 0.5, kKey); }), "expected a real floating dtype"));
  CHECK(contains(error_of([&] { feature_dropout(ones({3}, DType::f64), 0.5, kKey); }),
                 "feature_dropout: expected a tensor with at least 2 dims (samples, channels, ...)"));
  const RandomWindow short_window{{4}, {0}};
  CHECK(contains(error_of([&] { dropout(x, 0.5, kKey, true, &short_window); }),
                 "dropout: expected a window with global sizes and start of 2 dims"));
  const RandomWindow outside{{4, 3}, {3, 0}};
  CHECK(contains(error_of([&] { dropout(x, 0.5, kKey, true, &outside); }),
                 "starting at (3, 0) does not fit in the global shape (4, 3)"));
}
