// Spectral convolution (ops/sphere/spectral_conv.h): forward and backward against naive loops
// (odd sizes, the parallel and blocked paths too), c64 against c128, non-contiguous operands,
// gradcheck and gradgradcheck in c128, and the error messages.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <random>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "ops/sphere/spectral_conv.h"
#include "tests/test_util.h"

namespace {

using gs::c128;
using gs::DType;
using gs::Shape;
using gs::Tensor;
using gs::sphere::SpectralOperator;

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

Tensor random_complex(const Shape& s, uint64_t seed, DType dtype = DType::c128) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<c128> v(numel(s));
  for (auto& x : v) x = c128(u(rng), u(rng));
  Tensor t = gs::from_vector(v, s);
  return dtype == DType::c128 ? t : gs::cast_copy(t, dtype);
}

using gs_test::error_of;

using gs_test::contains;

double max_diff(const std::vector<c128>& a, const std::vector<c128>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// y[b,o,l,m] = sum_i x[b,i,l,m] w[i,o,l(,m)]
std::vector<c128> naive_forward(const Tensor& xt, const Tensor& wt, SpectralOperator op) {
  auto x = xt.to_vector<c128>(), w = wt.to_vector<c128>();
  const int64_t B = xt.size(0), Ci = xt.size(1), L = xt.size(2), M = xt.size(3), Co = wt.size(1);
  std::vector<c128> y(B * Co * L * M);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t o = 0; o < Co; ++o)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t m = 0; m < M; ++m) {
          c128 acc = 0;
          for (int64_t i = 0; i < Ci; ++i) {
            c128 wv = op == SpectralOperator::driscoll_healy ? w[(i * Co + o) * L + l] : w[((i * Co + o) * L + l) * M + m];
            acc += x[((b * Ci + i) * L + l) * M + m] * wv;
          }
          y[((b * Co + o) * L + l) * M + m] = acc;
        }
  return y;
}

// gw[i,o,l(,m)] = sum_{b(,m)} conj(x[b,i,l,m]) g[b,o,l,m]
std::vector<c128> naive_weight_grad(const Tensor& xt, const Tensor& gt, SpectralOperator op) {
  auto x = xt.to_vector<c128>(), g = gt.to_vector<c128>();
  const int64_t B = xt.size(0), Ci = xt.size(1), L = xt.size(2), M = xt.size(3), Co = gt.size(1);
  const bool dh = op == SpectralOperator::driscoll_healy;
  std::vector<c128> gw(Ci * Co * L * (dh ? 1 : M));
  for (int64_t i = 0; i < Ci; ++i)
    for (int64_t o = 0; o < Co; ++o)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t m = 0; m < M; ++m)
          for (int64_t b = 0; b < B; ++b) {
            c128 term = std::conj(x[((b * Ci + i) * L + l) * M + m]) * g[((b * Co + o) * L + l) * M + m];
            gw[dh ? (i * Co + o) * L + l : ((i * Co + o) * L + l) * M + m] += term;
          }
  return gw;
}

Shape weight_shape(int64_t ci, int64_t co, int64_t L, int64_t M, SpectralOperator op) {
  return op == SpectralOperator::driscoll_healy ? Shape{ci, co, L} : Shape{ci, co, L, M};
}

const SpectralOperator kOps[] = {SpectralOperator::driscoll_healy, SpectralOperator::diagonal};

}  // namespace

TEST_CASE("spectral_conv: forward matches naive loops (odd sizes, B=2, Cin=3, Cout=2)") {
  for (auto op : kOps) {
    CAPTURE(static_cast<int>(op));
    Tensor x = random_complex({2, 3, 5, 3}, 1), w = random_complex(weight_shape(3, 2, 5, 3, op), 2);
    Tensor y = gs::sphere::spectral_conv(x, w, op);
    CHECK(y.sizes() == Shape{2, 2, 5, 3});
    CHECK(y.dtype() == DType::c128);
    CHECK(max_diff(y.to_vector<c128>(), naive_forward(x, w, op)) < 1e-14);
    // the named entry points agree with the dispatching one
    Tensor y2 = op == SpectralOperator::driscoll_healy ? gs::sphere::spectral_conv_dh(x, w)
                                                       : gs::sphere::spectral_conv_diagonal(x, w);
    CHECK(max_diff(y2.to_vector<c128>(), y.to_vector<c128>()) == 0.0);
  }
}

TEST_CASE("spectral_conv: the parallel and plane-blocked paths match naive loops") {
  // Big enough to run multithreaded (B Cin Cout L M >= 2^16); L*M = 420 spans two 256-element plane
  // blocks, the second one ragged.
  for (auto op : kOps) {
    CAPTURE(static_cast<int>(op));
    Tensor x = random_complex({2, 12, 21, 20}, 3), w = random_complex(weight_shape(12, 7, 21, 20, op), 4);
    Tensor y = gs::sphere::spectral_conv(x, w, op);
    CHECK(max_diff(y.to_vector<c128>(), naive_forward(x, w, op)) < 1e-13);
    Tensor g = random_complex({2, 7, 21, 20}, 5);
    CHECK(max_diff(gs::sphere::spectral_conv_adjoint(g, w, op).to_vector<c128>(),
                   naive_forward(g, gs::contiguous(gs::conj(gs::transpose(w, 0, 1))), op)) < 1e-13);
    Tensor gw = gs::sphere::spectral_conv_weight_grad(x, g, op);
    CHECK(gw.sizes() == weight_shape(12, 7, 21, 20, op));
    CHECK(max_diff(gw.to_vector<c128>(), naive_weight_grad(x, g, op)) < 1e-13);
  }
}

TEST_CASE("spectral_conv: backward gives conj-transposed contractions") {
  for (auto op : kOps) {
    CAPTURE(static_cast<int>(op));
    Tensor x = random_complex({2, 3, 5, 3}, 6).set_requires_grad(true);
    Tensor w = random_complex(weight_shape(3, 2, 5, 3, op), 7).set_requires_grad(true);
    Tensor g = random_complex({2, 2, 5, 3}, 8);
    Tensor y = gs::sphere::spectral_conv(x, w, op);
    auto grads = gs::grad({y}, {x, w}, {g});
    // grad_w = sum conj(x) g;  grad_x[b,i,l,m] = sum_o g[b,o,l,m] conj(w[i,o,l(,m)])
    CHECK(max_diff(grads[1].to_vector<c128>(), naive_weight_grad(x, g, op)) < 1e-14);
    Tensor wh = gs::contiguous(gs::conj(gs::transpose(w.detach(), 0, 1)));
    CHECK(max_diff(grads[0].to_vector<c128>(), naive_forward(g, wh, op)) < 1e-14);
    // the adjoint op alone is that contraction
    CHECK(max_diff(gs::sphere::spectral_conv_adjoint(g, w.detach(), op).to_vector<c128>(), naive_forward(g, wh, op)) < 1e-14);
  }
}

TEST_CASE("spectral_conv: c64 agrees with c128, and non-contiguous operands with contiguous ones") {
  for (auto op : kOps) {
    CAPTURE(static_cast<int>(op));
    Tensor x = random_complex({2, 3, 5, 3}, 9), w = random_complex(weight_shape(3, 2, 5, 3, op), 10);
    auto ref = naive_forward(x, w, op);
    Tensor y32 = gs::sphere::spectral_conv(gs::cast_copy(x, DType::c64), gs::cast_copy(w, DType::c64), op);
    CHECK(y32.dtype() == DType::c64);
    CHECK(max_diff(y32.to_vector<c128>(), ref) < 1e-5);
    // x as a (B, Cin, L, M) view of a (B, Cin, M, L) tensor; w as a channel-swapped view.
    Tensor xt = gs::transpose(gs::contiguous(gs::transpose(x, 2, 3)), 2, 3);
    Tensor wt = gs::transpose(gs::contiguous(gs::transpose(w, 0, 1)), 0, 1);
    REQUIRE(!xt.is_contiguous());
    REQUIRE(!wt.is_contiguous());
    CHECK(max_diff(gs::sphere::spectral_conv(xt, wt, op).to_vector<c128>(), ref) < 1e-14);
  }
}

TEST_CASE("spectral_conv: gradcheck and gradgradcheck in c128") {
  for (auto op : kOps) {
    CAPTURE(static_cast<int>(op));
    Tensor x = random_complex({2, 3, 3, 2}, 11).set_requires_grad(true);
    Tensor w = random_complex(weight_shape(3, 2, 3, 2, op), 12).set_requires_grad(true);
    auto f = [op](const std::vector<Tensor>& in) { return std::vector<Tensor>{gs::sphere::spectral_conv(in[0], in[1], op)}; };
    auto r1 = gs::gradcheck(f, {x, w});
    CHECK_MESSAGE(r1.ok, r1.failure);
    auto r2 = gs::gradgradcheck(f, {x, w});
    CHECK_MESSAGE(r2.ok, r2.failure);
    // the weight-gradient contraction is an op of its own, differentiable twice too
    Tensor g = random_complex({2, 2, 3, 2}, 13).set_requires_grad(true);
    auto fw = [op](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{gs::sphere::spectral_conv_weight_grad(in[0], in[1], op)};
    };
    auto r3 = gs::gradcheck(fw, {x, g});
    CHECK_MESSAGE(r3.ok, r3.failure);
    auto r4 = gs::gradgradcheck(fw, {x, g});
    CHECK_MESSAGE(r4.ok, r4.failure);
    auto fa = [op](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{gs::sphere::spectral_conv_adjoint(in[0], in[1], op)};
    };
    auto r5 = gs::gradcheck(fa, {g, w});
    CHECK_MESSAGE(r5.ok, r5.failure);
    auto r6 = gs::gradgradcheck(fa, {g, w});
    CHECK_MESSAGE(r6.ok, r6.failure);
  }
}

TEST_CASE("spectral_conv: operator names") {
  CHECK(gs::sphere::parse_spectral_operator("driscoll-healy") == SpectralOperator::driscoll_healy);
  CHECK(gs::sphere::parse_spectral_operator("dhconv") == SpectralOperator::driscoll_healy);
  CHECK(gs::sphere::parse_spectral_operator("diagonal") == SpectralOperator::diagonal);
  auto e = error_of([] { gs::sphere::parse_spectral_operator("block-diagonal"); });
  CHECK(contains(e, "expected"));
  CHECK(contains(e, "block-diagonal"));
}

TEST_CASE("spectral_conv: errors say what was expected and what was given") {
  Tensor x = random_complex({2, 3, 5, 3}, 14);
  Tensor w = random_complex({3, 2, 5}, 15);
  // real coefficients
  auto e = error_of([&] { gs::sphere::spectral_conv_dh(gs::real(x), w); });
  CHECK(contains(e, "spectral_conv_dh"));
  CHECK(contains(e, "expected complex"));
  CHECK(contains(e, "f64 (2, 3, 5, 3)"));
  // x of the wrong rank
  e = error_of([&] { gs::sphere::spectral_conv_dh(gs::reshape(x, {6, 5, 3}), w); });
  CHECK(contains(e, "4 dims"));
  CHECK(contains(e, "(6, 5, 3)"));
  // Cin mismatch
  e = error_of([&] { gs::sphere::spectral_conv_dh(x, random_complex({4, 2, 5}, 16)); });
  CHECK(contains(e, "expected a weight (Cin, Cout, lmax) = (3, Cout, 5)"));
  CHECK(contains(e, "(4, 2, 5)"));
  // lmax mismatch
  e = error_of([&] { gs::sphere::spectral_conv_dh(x, random_complex({3, 2, 4}, 17)); });
  CHECK(contains(e, "(3, 2, 4)"));
  // diagonal needs the mmax dim
  e = error_of([&] { gs::sphere::spectral_conv_diagonal(x, w); });
  CHECK(contains(e, "spectral_conv_diagonal"));
  CHECK(contains(e, "(Cin, Cout, lmax, mmax) = (3, Cout, 5, 3)"));
  e = error_of([&] { gs::sphere::spectral_conv_diagonal(x, random_complex({3, 2, 5, 4}, 18)); });
  CHECK(contains(e, "(3, 2, 5, 4)"));
  // dtype mismatch
  e = error_of([&] { gs::sphere::spectral_conv_dh(x, gs::cast_copy(w, DType::c64)); });
  CHECK(contains(e, "dtype c128"));
  CHECK(contains(e, "c64"));
  // undefined weight
  e = error_of([&] { gs::sphere::spectral_conv_dh(x, Tensor()); });
  CHECK(contains(e, "undefined"));
  // the adjoint takes x with w's second channel dim
  e = error_of([&] { gs::sphere::spectral_conv_adjoint(x, w, SpectralOperator::driscoll_healy); });
  CHECK(contains(e, "spectral_conv_dh_adjoint"));
  CHECK(contains(e, "(Cin, 3, 5)"));
  // weight-gradient operands that do not match
  e = error_of([&] { gs::sphere::spectral_conv_weight_grad(x, random_complex({2, 2, 5, 4}, 19), SpectralOperator::diagonal); });
  CHECK(contains(e, "expected g"));
  CHECK(contains(e, "(2, 2, 5, 4)"));
}
