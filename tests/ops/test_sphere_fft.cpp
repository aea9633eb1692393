// The longitude FFT (ops/sphere/fft.h): values against a naive O(n^2) DFT, scaling, batch dims and
// layouts, round trips, truncation and zero-padding, gradients (first and second order), the
// parallel path, and error messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <numbers>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ops/ops.h"
#include "ops/sphere/fft.h"
#include "ops/sphere/lane_fft.h"
#include "tests/test_util.h"

namespace {

using gs::c128;
using gs::DType;
using gs::Shape;
using gs::Tensor;
using gs::sphere::irfft_lon;
using gs::sphere::rfft_lon;
using LC = std::complex<long double>;

constexpr double kTwoPi = 2.0 * std::numbers::pi;

// e^{sign 2πi mk/n}, with mk reduced mod n first so the angle is exact for any m, k.
LC twiddle(int64_t m, int64_t k, int64_t n, int sign) {
  const long double a = sign * 2.0L * std::numbers::pi_v<long double> * static_cast<long double>((m * k) % n) / n;
  return {std::cos(a), std::sin(a)};
}

// X[m] = (2π/n) Σ_k x[k] e^{-2πi mk/n}, row by row over a (rows, n) row-major buffer.
std::vector<c128> naive_rfft(const std::vector<double>& x, int64_t n, int64_t M) {
  const int64_t rows = static_cast<int64_t>(x.size()) / n;
  std::vector<c128> X;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t m = 0; m < M; ++m) {
      LC s = 0;
      for (int64_t k = 0; k < n; ++k) s += static_cast<long double>(x[r * n + k]) * twiddle(m, k, n, -1);
      s *= 2.0L * std::numbers::pi_v<long double> / n;
      X.emplace_back(static_cast<double>(s.real()), static_cast<double>(s.imag()));
    }
  return X;
}

// x[k] = Re Σ_{m<M} c_m X[m] e^{2πi mk/n}, c_0 = c_{n/2} = 1, c_m = 2 otherwise.
std::vector<double> naive_irfft(const std::vector<c128>& X, int64_t M, int64_t n) {
  const int64_t rows = static_cast<int64_t>(X.size()) / M;
  std::vector<double> x;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < n; ++k) {
      long double s = 0;
      for (int64_t m = 0; m < M; ++m) {
        const long double c = (m == 0 || 2 * m == n) ? 1.0L : 2.0L;
        s += c * (LC(X[r * M + m].real(), X[r * M + m].imag()) * twiddle(m, k, n, +1)).real();
      }
      x.push_back(static_cast<double>(s));
    }
  return x;
}

double max_abs(const std::vector<double>& v) {
  double a = 0;
  for (double x : v) a = std::max(a, std::abs(x));
  return a;
}
double max_abs(const std::vector<c128>& v) {
  double a = 0;
  for (auto x : v) a = std::max(a, std::abs(x));
  return a;
}

// max |got - ref| relative to max |ref| (element-wise relative error is meaningless near zeros).
template <typename T>
double rel_err(const std::vector<T>& got, const std::vector<T>& ref) {
  REQUIRE(got.size() == ref.size());
  double e = 0;
  for (size_t i = 0; i < got.size(); ++i) e = std::max(e, std::abs(got[i] - ref[i]));
  const double scale = max_abs(ref);
  return scale > 0 ? e / scale : e;
}

Tensor randn_real(const Shape& s, uint64_t stream, DType dtype = DType::f64) {
  return gs::cast_copy(gs::randn(s, {4242, stream}, DType::f64), dtype);
}
Tensor randn_complex(const Shape& s, uint64_t stream, DType dtype = DType::c128) {
  return gs::cast_copy(gs::randn(s, {4343, stream}, DType::c128), dtype);
}

// Values of an f32/c64 tensor as f64/c128, for comparisons.
std::vector<double> reals(const Tensor& t) { return t.to_vector<double>(); }
std::vector<c128> complexes(const Tensor& t) { return t.to_vector<c128>(); }

using gs_test::error_of;
using gs_test::contains;

// Lengths of both kernels: the lane FFT (n/2 for even n, n for odd n, with prime factors up to 61:
// 2 ... 360 with 38 = 2 x 19, 58 = 2 x 29, 122 = 2 x 61, and odd 3, 5, 15, 29, 43, 57 = 3 x 19,
// 61, 85 = 5 x 17, 161 = 7 x 23) and FFTW (1, or a prime factor above 61: 67, 134).
const std::vector<int64_t> kSizes = {1,  2,  3,  4,  5,  8,   12,  14,  15,  29,  34,  38, 43,
                                     57, 58, 61, 64, 67, 85,  90,  122, 134, 161, 286, 360};

}  // namespace

TEST_CASE("fft: rfft_lon matches a naive DFT in f64 and f32") {
  for (DType dtype : {DType::f64, DType::f32}) {
    const double tol = dtype == DType::f64 ? 1e-12 : 1e-5;
    for (int64_t n : kSizes) {
      Tensor x = randn_real({2, 3, n}, static_cast<uint64_t>(n), dtype);
      const auto xv = reals(x);  // the f32 values themselves: only the transform's error is measured
      for (int64_t M : {int64_t{1}, (n / 2 + 2) / 2, n / 2 + 1}) {
        CAPTURE(gs::dtype_name(dtype));
        CAPTURE(n);
        CAPTURE(M);
        Tensor X = rfft_lon(x, M);
        CHECK(X.dtype() == gs::complex_dtype(dtype));
        CHECK(X.sizes() == Shape{2, 3, M});
        CHECK(rel_err(complexes(X), naive_rfft(xv, n, M)) <= tol);
      }
    }
  }
}

TEST_CASE("fft: irfft_lon matches a naive synthesis in f64 and f32") {
  for (DType dtype : {DType::c128, DType::c64}) {
    const double tol = dtype == DType::c128 ? 1e-12 : 1e-5;
    for (int64_t n : kSizes) {
      for (int64_t M : {int64_t{1}, (n / 2 + 2) / 2, n / 2 + 1}) {
        CAPTURE(gs::dtype_name(dtype));
        CAPTURE(n);
        CAPTURE(M);
        // Random imaginary parts at DC and Nyquist too: the reference (Re of the sum) ignores them.
        Tensor X = randn_complex({3, 2, M}, static_cast<uint64_t>(100 * n + M), dtype);
        Tensor x = irfft_lon(X, n);
        CHECK(x.dtype() == gs::real_dtype(dtype));
        CHECK(x.sizes() == Shape{3, 2, n});
        CHECK(rel_err(reals(x), naive_irfft(complexes(X), M, n)) <= tol);
      }
    }
  }
}

TEST_CASE("fft: scaling is torch-harmonics' (2π rfft norm=forward, irfft norm=forward)") {
  const int64_t n = 12;
  std::vector<double> ones(n, 1.0), cosine(n);
  for (int64_t k = 0; k < n; ++k) cosine[k] = std::cos(kTwoPi * k / n);
  // A constant field: X[0] = 2π (the integral over longitude), nothing else.
  auto X1 = complexes(rfft_lon(gs::from_vector(ones), 3));
  CHECK(std::abs(X1[0] - c128(kTwoPi, 0)) < 1e-14);
  CHECK(std::abs(X1[1]) < 1e-14);
  // cos(phi): X[1] = π (half the amplitude, the other half sits at m = -1).
  auto X2 = complexes(rfft_lon(gs::from_vector(cosine), 3));
  CHECK(std::abs(X2[1] - c128(std::numbers::pi, 0)) < 1e-14);
  // Synthesis: X[0] = 1 gives 1; X[1] = 1 gives 2 cos(phi); the Nyquist X[6] = 1 gives (-1)^k.
  std::vector<c128> spec(n / 2 + 1, c128(0));
  spec[0] = 1;
  spec[1] = 1;
  spec[n / 2] = 1;
  auto x = reals(irfft_lon(gs::from_vector(spec), n));
  for (int64_t k = 0; k < n; ++k) CHECK(x[k] == doctest::Approx(1 + 2 * cosine[k] + (k % 2 ? -1 : 1)).epsilon(1e-14));
}

TEST_CASE("fft: batch dims, 1-D input and empty batches") {
  const int64_t n = 10;
  Tensor x1 = randn_real({n}, 1);
  Tensor X1 = rfft_lon(x1, 4);
  CHECK(X1.sizes() == Shape{4});
  CHECK(rel_err(complexes(X1), naive_rfft(reals(x1), n, 4)) <= 1e-12);
  CHECK(irfft_lon(X1, n).sizes() == Shape{n});

  Tensor x4 = randn_real({2, 1, 3, n}, 2);
  Tensor X4 = rfft_lon(x4, n / 2 + 1);
  CHECK(X4.sizes() == Shape{2, 1, 3, n / 2 + 1});
  CHECK(rel_err(complexes(X4), naive_rfft(reals(x4), n, n / 2 + 1)) <= 1e-12);
  CHECK(irfft_lon(X4, n).sizes() == Shape{2, 1, 3, n});

  Tensor e = gs::zeros({0, n}, DType::f64);
  CHECK(rfft_lon(e, 3).sizes() == Shape{0, 3});
  CHECK(irfft_lon(gs::zeros({2, 0, 3}, DType::c64), 7).sizes() == Shape{2, 0, 7});
}

TEST_CASE("fft: non-contiguous inputs give the same values as contiguous copies") {
  for (int64_t n : {int64_t{9}, int64_t{16}}) {
    CAPTURE(n);
    // Transposed: the longitude dim has stride 4.
    Tensor xt = gs::transpose(randn_real({n, 4}, 3), 0, 1);
    REQUIRE(!xt.is_contiguous());
    CHECK(complexes(rfft_lon(xt, n / 2 + 1)) == complexes(rfft_lon(gs::contiguous_copy(xt, true), n / 2 + 1)));
    // Every other column of a wider field, with a storage offset.
    Tensor xs = gs::slice(randn_real({3, 2 * n + 1}, 4), -1, 1, 2 * n + 1, 2);
    REQUIRE(!xs.is_contiguous());
    CHECK(xs.size(-1) == n);
    CHECK(complexes(rfft_lon(xs, 3)) == complexes(rfft_lon(gs::contiguous_copy(xs, true), 3)));
    // Complex input to the synthesis, transposed.
    Tensor Xt = gs::transpose(randn_complex({n / 2 + 1, 3}, 5), 0, 1);
    REQUIRE(!Xt.is_contiguous());
    CHECK(reals(irfft_lon(Xt, n)) == reals(irfft_lon(gs::contiguous_copy(Xt, true), n)));
  }
}

TEST_CASE("fft: round trips multiply by exactly 2π") {
  for (DType dtype : {DType::f64, DType::f32}) {
    const double tol = dtype == DType::f64 ? 1e-13 : 1e-6;
    for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{8}, int64_t{33}, int64_t{360}}) {
      CAPTURE(gs::dtype_name(dtype));
      CAPTURE(n);
      // Any real field is band-limited to nlon/2 + 1 modes: irfft(rfft(x)) = 2π x.
      Tensor x = randn_real({3, n}, 6, dtype);
      auto back = reals(irfft_lon(rfft_lon(x, n / 2 + 1), n));
      auto want = reals(x);
      for (auto& v : want) v *= kTwoPi;
      CHECK(rel_err(back, want) <= tol);
      // A spectrum with real DC and Nyquist and M <= nlon/2 + 1 modes: rfft(irfft(X), M) = 2π X.
      for (int64_t M : {std::max<int64_t>(1, n / 3), n / 2 + 1}) {
        CAPTURE(M);
        auto spec = complexes(randn_complex({3, M}, 7));
        for (int64_t r = 0; r < 3; ++r) {
          spec[r * M] = spec[r * M].real();
          if (n % 2 == 0 && M == n / 2 + 1) spec[r * M + M - 1] = spec[r * M + M - 1].real();
        }
        Tensor X = gs::cast_copy(gs::from_vector(spec, {3, M}), gs::complex_dtype(dtype));
        Tensor xb = irfft_lon(X, n);
        auto again = complexes(rfft_lon(xb, M));
        auto want_spec = complexes(X);
        for (auto& v : want_spec) v *= kTwoPi;
        CHECK(rel_err(again, want_spec) <= tol);
        // The band-limited field has nothing above M.
        if (M < n / 2 + 1) {
          auto full = complexes(rfft_lon(xb, n / 2 + 1));
          for (int64_t r = 0; r < 3; ++r)
            for (int64_t m = M; m < n / 2 + 1; ++m) CHECK(std::abs(full[r * (n / 2 + 1) + m]) <= tol * max_abs(want_spec));
        }
      }
    }
  }
}

TEST_CASE("fft: truncation keeps the first modes, zero-padding adds none, edge imaginary parts are ignored") {
  for (int64_t n : {int64_t{11}, int64_t{12}}) {
    CAPTURE(n);
    const int64_t h = n / 2 + 1;
    Tensor x = randn_real({2, n}, 8);
    auto full = complexes(rfft_lon(x, h));
    const int64_t M = 3;
    auto trunc = complexes(rfft_lon(x, M));
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t m = 0; m < M; ++m) CHECK(trunc[r * M + m] == full[r * h + m]);
    // irfft of M modes == irfft of those modes padded with zeros to nlon/2 + 1.
    auto spec = complexes(randn_complex({2, M}, 9));
    std::vector<c128> padded(2 * h, c128(0));
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t m = 0; m < M; ++m) padded[r * h + m] = spec[r * M + m];
    auto a = reals(irfft_lon(gs::from_vector(spec, {2, M}), n));
    auto b = reals(irfft_lon(gs::from_vector(padded, {2, h}), n));
    CHECK(rel_err(a, b) <= 1e-14);
    // Truncating a field with high modes low-passes it: irfft(rfft(x, M)) = 2π · (x without m >= M).
    std::vector<c128> low(2 * h, c128(0));
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t m = 0; m < M; ++m) low[r * h + m] = full[r * h + m];
    auto lowpassed = reals(irfft_lon(gs::from_vector(low, {2, h}), n));
    CHECK(rel_err(reals(irfft_lon(rfft_lon(x, M), n)), lowpassed) <= 1e-14);
    // Imaginary parts of X[0] and (even nlon) of the Nyquist term change nothing.
    std::vector<c128> shifted = padded;
    for (int64_t r = 0; r < 2; ++r) {
      shifted[r * h] += c128(0, 3.0);
      if (n % 2 == 0) shifted[r * h + h - 1] += c128(0, -5.0);
    }
    CHECK(reals(irfft_lon(gs::from_vector(shifted, {2, h}), n)) == b);
    // For odd nlon the last mode is interior (weight 2) and its imaginary part counts.
    if (n % 2 == 1) {
      std::vector<c128> last(h, c128(0));
      last[h - 1] = c128(0, 1);
      auto s = reals(irfft_lon(gs::from_vector(last, {h}), n));
      for (int64_t k = 0; k < n; ++k) CHECK(s[k] == doctest::Approx(-2 * std::sin(kTwoPi * (h - 1) * k / n)).epsilon(1e-13));
    }
  }
}

TEST_CASE("fft: gradcheck and gradgradcheck in f64") {
  // Both engines: the lane FFT (5 to 8, and 29 and 58: a direct 29-point stage) and FFTW (n = 1,
  // and 67 and 134, whose prime factor 67 is above the lane FFT's largest radix).
  CHECK(gs::sphere::detail::lane_fft_supports(8));
  CHECK(gs::sphere::detail::lane_fft_supports(29));
  CHECK(gs::sphere::detail::lane_fft_supports(122));
  CHECK_FALSE(gs::sphere::detail::lane_fft_supports(67));
  CHECK_FALSE(gs::sphere::detail::lane_fft_supports(134));
  for (int64_t n : {int64_t{1}, int64_t{5}, int64_t{6}, int64_t{7}, int64_t{8}, int64_t{29}, int64_t{58}, int64_t{67},
                    int64_t{134}}) {
    for (int64_t M : {std::min<int64_t>(2, n / 2 + 1), n / 2 + 1}) {
      CAPTURE(n);
      CAPTURE(M);
      Tensor x = randn_real({2, n}, 10).set_requires_grad(true);
      auto f = [M](const std::vector<Tensor>& in) { return std::vector<Tensor>{rfft_lon(in[0], M)}; };
      auto r1 = gs::gradcheck(f, {x});
      CHECK_MESSAGE(r1.ok, r1.failure);
      auto r2 = gs::gradgradcheck(f, {x});
      CHECK_MESSAGE(r2.ok, r2.failure);

      Tensor X = randn_complex({2, M}, 11).set_requires_grad(true);
      auto g = [n](const std::vector<Tensor>& in) { return std::vector<Tensor>{irfft_lon(in[0], n)}; };
      auto r3 = gs::gradcheck(g, {X});
      CHECK_MESSAGE(r3.ok, r3.failure);
      auto r4 = gs::gradgradcheck(g, {X});
      CHECK_MESSAGE(r4.ok, r4.failure);

      // The composition (a band-limiting filter times 2π).
      auto h = [n, M](const std::vector<Tensor>& in) { return std::vector<Tensor>{irfft_lon(rfft_lon(in[0], M), n)}; };
      auto r5 = gs::gradgradcheck(h, {x});
      CHECK_MESSAGE(r5.ok, r5.failure);
    }
  }
}

TEST_CASE("fft: backward nodes are dedicated ops, and f32 gradients stay f32") {
  Tensor x = randn_real({3, 8}, 12, DType::f32).set_requires_grad(true);
  Tensor X = rfft_lon(x, 5);
  REQUIRE(X.grad_fn() != nullptr);
  CHECK(X.grad_fn()->name() == "rfft_lon");
  Tensor y = irfft_lon(X, 8);
  CHECK(y.grad_fn()->name() == "irfft_lon");
  // go requires grad: the gradient is linear in go alone (the ops are linear), so only then is
  // there a graph to record.
  Tensor go = randn_real({3, 8}, 13, DType::f32).set_requires_grad(true);
  auto gx = gs::grad({y}, {x}, {go}, {.create_graph = true});
  CHECK(gx[0].dtype() == DType::f32);
  REQUIRE(gx[0].grad_fn() != nullptr);
  CHECK(gx[0].grad_fn()->name() == "rfft_lon_backward");
  // y = 2π x here (full spectrum), so dy/dx^T go = 2π go.
  auto want = reals(go);
  for (auto& v : want) v *= kTwoPi;
  CHECK(rel_err(reals(gx[0]), want) <= 1e-5);
}

TEST_CASE("fft: many rows run in parallel and agree bitwise with row-by-row transforms") {
  // Above the parallel threshold (8192 elements), several lane groups and a partial last one; an
  // even length and an odd one (the whole-row complex FFT).
  for (auto [n, rows] : {std::pair<int64_t, int64_t>{256, 64}, {85, 101}}) {
    CAPTURE(n);
    const int64_t M = std::min<int64_t>(100, n / 2 + 1);
    Tensor x = randn_real({rows, n}, 14);
    auto all = complexes(rfft_lon(x, M));
    Tensor X = randn_complex({rows, M}, 15);
    auto xs = reals(irfft_lon(X, n));
    bool same_fwd = true, same_inv = true;
    for (int64_t r = 0; r < rows; r += 9) {
      auto one = complexes(rfft_lon(gs::select(x, 0, r), M));
      for (int64_t m = 0; m < M; ++m) same_fwd = same_fwd && one[m] == all[r * M + m];
      auto inv = reals(irfft_lon(gs::select(X, 0, r), n));
      for (int64_t k = 0; k < n; ++k) same_inv = same_inv && inv[k] == xs[r * n + k];
    }
    CHECK(same_fwd);
    CHECK(same_inv);
    // And against the naive DFT: a full group (lanes past the first) is checked, not only row 0.
    CHECK(rel_err(all, naive_rfft(reals(x), n, M)) <= 1e-12);
    CHECK(rel_err(xs, naive_irfft(complexes(X), M, n)) <= 1e-12);
  }
}

TEST_CASE("fft: first use from several threads at once (the plan cache is locked)") {
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t, &failures] {
      try {
        for (int64_t n : {int64_t{37}, int64_t{41}, int64_t{44}}) {
          Tensor x = randn_real({2, n}, 20 + t, t % 2 ? DType::f32 : DType::f64);
          auto back = reals(irfft_lon(rfft_lon(x, n / 2 + 1), n));
          auto want = reals(x);
          for (auto& v : want) v *= kTwoPi;
          if (rel_err(back, want) > 1e-5) failures[t] = "round trip off for n = " + std::to_string(n);
        }
      } catch (const std::exception& e) {
        failures[t] = e.what();
      }
    });
  for (auto& th : threads) th.join();
  for (const auto& f : failures) CHECK_MESSAGE(f.empty(), f);
}

TEST_CASE("fft: errors say what was expected and what was given") {
  std::string e = error_of([] { irfft_lon(randn_real({2, 5}, 1), 8); });
  CHECK(contains(e, "irfft_lon"));
  CHECK(contains(e, "expected a complex input"));
  CHECK(contains(e, "f64 (2, 5)"));

  e = error_of([] { rfft_lon(randn_complex({2, 8}, 1), 3); });
  CHECK(contains(e, "rfft_lon"));
  CHECK(contains(e, "expected a real input"));
  CHECK(contains(e, "c128"));

  e = error_of([] { rfft_lon(randn_real({2, 10}, 1), 7); });
  CHECK(contains(e, "mmax = 7"));
  CHECK(contains(e, "nlon = 10"));
  CHECK(contains(e, "6"));

  e = error_of([] { rfft_lon(randn_real({2, 10}, 1), 0); });
  CHECK(contains(e, "mmax = 0"));

  e = error_of([] { irfft_lon(randn_complex({2, 6}, 1), 9); });
  CHECK(contains(e, "irfft_lon"));
  CHECK(contains(e, "mmax = 6"));
  CHECK(contains(e, "nlon = 9"));

  e = error_of([] { irfft_lon(randn_complex({2, 1}, 1), 0); });
  CHECK(contains(e, "nlon must be"));

  e = error_of([] { rfft_lon(gs::zeros({3, 0}, DType::f64), 1); });
  CHECK(contains(e, "nlon"));

  e = error_of([] { rfft_lon(gs::scalar_tensor(1.0, DType::f64), 1); });
  CHECK(contains(e, "(..., nlon)"));

  e = error_of([] { rfft_lon(gs::arange(4), 1); });
  CHECK(contains(e, "i64"));

  e = error_of([] { rfft_lon(Tensor(), 1); });
  CHECK(contains(e, "rfft_lon"));
}
