// SFNO grid-space blocks (ops/sphere/sfno_blocks.h): norms, conv1x1, the pole-aware 3x3 conv and
// the area-weighted mean / MSE against naive loops; gradcheck and gradgradcheck in f64; the
// continuity of the 3x3 conv across the poles; error messages.
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/sfno_blocks.h"
#include "tests/test_util.h"

namespace {

using gs::DType;
using gs::Shape;
using gs::Tensor;
namespace sp = gs::sphere;

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

Tensor random_real(const Shape& s, uint64_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(numel(s));
  for (auto& x : v) x = u(rng);
  return gs::from_vector(v, s);
}

Tensor leaf(const Shape& s, uint64_t seed) { return random_real(s, seed).set_requires_grad(true); }

using gs_test::error_of;

using gs_test::contains;

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

void check_grads(const Fn& f, const std::vector<Tensor>& inputs) {
  auto r1 = gs::gradcheck(f, inputs);
  CHECK_MESSAGE(r1.ok, r1.failure);
  auto r2 = gs::gradgradcheck(f, inputs);
  CHECK_MESSAGE(r2.ok, r2.failure);
}

// Normalises x (B, C, H, W) over channels (per pixel) or over the grid (per (b, c), with optional row
// weights q), then applies per-channel weight and bias (empty vectors: none). Naive loops.
std::vector<double> naive_norm(const Tensor& xt, bool over_channels, const std::vector<double>& weight,
                               const std::vector<double>& bias, double eps, std::vector<double> q = {}) {
  auto x = xt.to_vector<double>();
  const int64_t B = xt.size(0), C = xt.size(1), H = xt.size(2), W = xt.size(3);
  auto at = [&](int64_t b, int64_t c, int64_t h, int64_t w) { return ((b * C + c) * H + h) * W + w; };
  std::vector<double> y(x.size());
  auto finish = [&](int64_t c, int64_t i, double mu, double var) {
    double v = (x[i] - mu) / std::sqrt(var + eps);
    if (!weight.empty()) v *= weight[c];
    if (!bias.empty()) v += bias[c];
    y[i] = v;
  };
  if (over_channels) {
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          double mu = 0, var = 0;
          for (int64_t c = 0; c < C; ++c) mu += x[at(b, c, h, w)] / C;
          for (int64_t c = 0; c < C; ++c) var += std::pow(x[at(b, c, h, w)] - mu, 2) / C;
          for (int64_t c = 0; c < C; ++c) finish(c, at(b, c, h, w), mu, var);
        }
    return y;
  }
  if (q.empty()) q.assign(H, 1.0);
  double qs = 0;
  for (double v : q) qs += v;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      double mu = 0, var = 0;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) mu += q[h] / qs * x[at(b, c, h, w)] / W;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) var += q[h] / qs * std::pow(x[at(b, c, h, w)] - mu, 2) / W;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) finish(c, at(b, c, h, w), mu, var);
    }
  return y;
}

// The 3x3 conv on an explicitly built (H+2, W+2) halo: rows -1 and H are rows 0 and H-1 rotated by
// W/2, columns wrap.
std::vector<double> naive_conv3x3(const Tensor& xt, const Tensor& wt, const std::vector<double>& bias) {
  auto x = xt.to_vector<double>(), wv = wt.to_vector<double>();
  const int64_t B = xt.size(0), Ci = xt.size(1), H = xt.size(2), W = xt.size(3), Co = wt.size(0);
  auto padded = [&](int64_t b, int64_t i, int64_t r, int64_t c) {  // r in [-1, H], c in [-1, W]
    int64_t shift = 0;
    if (r == -1) r = 0, shift = W / 2;
    if (r == H) r = H - 1, shift = W / 2;
    c = (c + shift + W) % W;
    return x[((b * Ci + i) * H + r) * W + c];
  };
  std::vector<double> y(B * Co * H * W);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t o = 0; o < Co; ++o)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t w = 0; w < W; ++w) {
          double acc = bias.empty() ? 0.0 : bias[o];
          for (int64_t i = 0; i < Ci; ++i)
            for (int64_t dh = 0; dh < 3; ++dh)
              for (int64_t dw = 0; dw < 3; ++dw)
                acc += wv[((o * Ci + i) * 3 + dh) * 3 + dw] * padded(b, i, h + dh - 1, w + dw - 1);
          y[((b * Co + o) * H + h) * W + w] = acc;
        }
  return y;
}

}  // namespace

TEST_CASE("layer_norm_channels: naive loops, no-affine, f32, gradients") {
  Tensor x = random_real({2, 3, 3, 5}, 1, -2, 2), w = random_real({3}, 2), b = random_real({3}, 3);
  auto ref = naive_norm(x, true, w.to_vector<double>(), b.to_vector<double>(), 1e-5);
  CHECK(max_diff(sp::layer_norm_channels(x, w, b, 1e-5).to_vector<double>(), ref) < 1e-13);
  CHECK(max_diff(sp::layer_norm_channels(x).to_vector<double>(), naive_norm(x, true, {}, {}, 1e-5)) < 1e-13);
  Tensor y32 = sp::layer_norm_channels(gs::to(x, DType::f32), gs::to(w, DType::f32), gs::to(b, DType::f32), 1e-5);
  CHECK(y32.dtype() == DType::f32);
  CHECK(max_diff(y32.to_vector<double>(), ref) < 1e-5);
  check_grads([](const std::vector<Tensor>& in) { return std::vector<Tensor>{sp::layer_norm_channels(in[0], in[1], in[2], 1e-3)}; },
              {leaf({2, 3, 2, 3}, 4), leaf({3}, 5), leaf({3}, 6)});
}

TEST_CASE("instance_norm_sphere: uniform and quadrature-weighted, naive loops, gradients") {
  Tensor x = random_real({2, 3, 4, 5}, 7, -2, 2), w = random_real({3}, 8), b = random_real({3}, 9);
  auto wv = w.to_vector<double>(), bv = b.to_vector<double>();
  CHECK(max_diff(sp::instance_norm_sphere(x, w, b, 1e-5).to_vector<double>(), naive_norm(x, false, wv, bv, 1e-5)) < 1e-13);
  // Gauss-Legendre weights (sum 2; normalised inside).
  auto quad = sp::make_quadrature(sp::GridKind::legendre_gauss, 4).weights;
  Tensor q = gs::from_vector(quad);
  CHECK(max_diff(sp::instance_norm_sphere(x, w, b, 1e-5, q).to_vector<double>(), naive_norm(x, false, wv, bv, 1e-5, quad)) <
        1e-13);
  // no affine
  CHECK(max_diff(sp::instance_norm_sphere(x, {}, {}, 1e-5, q).to_vector<double>(), naive_norm(x, false, {}, {}, 1e-5, quad)) <
        1e-13);
  // the scale of the weights does not matter
  CHECK(max_diff(sp::instance_norm_sphere(x, w, b, 1e-5, gs::mul(q, 7.0)).to_vector<double>(),
                 sp::instance_norm_sphere(x, w, b, 1e-5, q).to_vector<double>()) < 1e-13);
  check_grads([](const std::vector<Tensor>& in) { return std::vector<Tensor>{sp::instance_norm_sphere(in[0], in[1], in[2], 1e-3)}; },
              {leaf({2, 2, 2, 3}, 10), leaf({2}, 11), leaf({2}, 12)});
  Tensor q3 = gs::from_vector(sp::make_quadrature(sp::GridKind::legendre_gauss, 3).weights);
  check_grads(
      [q3](const std::vector<Tensor>& in) { return std::vector<Tensor>{sp::instance_norm_sphere(in[0], in[1], in[2], 1e-3, q3)}; },
      {leaf({2, 2, 3, 2}, 13), leaf({2}, 14), leaf({2}, 15)});
}

TEST_CASE("norms: the fused backward kernel and the differentiable backward agree (f64 and f32)") {
  Tensor q = gs::from_vector(sp::make_quadrature(sp::GridKind::legendre_gauss, 5).weights);
  Tensor q32 = gs::from_vector(sp::make_quadrature(sp::GridKind::legendre_gauss, 32).weights);
  for (DType dt : {DType::f64, DType::f32}) {
    for (int which = 0; which < 6; ++which) {
      CAPTURE(which);
      // The second size runs the kernels multithreaded, over several 256-pixel chunks.
      const Shape xs = which < 3 ? Shape{2, 3, 5, 4} : Shape{2, 8, 32, 64};
      const int64_t C = xs[1];
      Tensor x = gs::to(random_real(xs, 50 + which, -2, 2), dt).set_requires_grad(true);
      Tensor w = gs::to(random_real({C}, 60 + which), dt).set_requires_grad(true);
      Tensor b = gs::to(random_real({C}, 70 + which), dt).set_requires_grad(true);
      Tensor g = gs::to(random_real(xs, 80 + which), dt);
      auto run = [&] {
        if (which % 3 == 0) return sp::layer_norm_channels(x, w, b, 1e-5);
        if (which % 3 == 1) return sp::instance_norm_sphere(x, w, b, 1e-5);
        return sp::instance_norm_sphere(x, w, b, 1e-5, gs::to(which < 3 ? q : q32, dt));
      };
      if (dt == DType::f64) {  // the forward against naive loops too
        Tensor xv = x.detach();
        auto wv = w.to_vector<double>(), bv = b.to_vector<double>();
        auto ref = which % 3 == 0 ? naive_norm(xv, true, wv, bv, 1e-5)
                   : which % 3 == 1 ? naive_norm(xv, false, wv, bv, 1e-5)
                                    : naive_norm(xv, false, wv, bv, 1e-5, (which < 3 ? q : q32).to_vector<double>());
        CHECK(max_diff(run().to_vector<double>(), ref) < 1e-12);
      }
      auto fused = gs::grad({run()}, {x, w, b}, {g});
      gs::GradOptions graph;
      graph.create_graph = true;
      auto ops = gs::grad({run()}, {x, w, b}, {g}, graph);
      const double tol = dt == DType::f64 ? 1e-12 : 2e-5;
      for (int i = 0; i < 3; ++i) {
        CAPTURE(i);
        if (i < 2) CHECK(ops[i].requires_grad());  // grad_bias = sum(g) does not depend on x or w
        CHECK(max_diff(fused[i].to_vector<double>(), ops[i].to_vector<double>()) < tol);
      }
    }
  }
}

TEST_CASE("conditional_layer_norm: (B, C) and (B, C, H, W) modulation, naive loops, gradients") {
  Tensor x = random_real({2, 3, 3, 4}, 16, -2, 2);
  auto xhat = naive_norm(x, true, {}, {}, 1e-5);
  for (bool per_pixel : {false, true}) {
    CAPTURE(per_pixel);
    Shape ms = per_pixel ? Shape{2, 3, 3, 4} : Shape{2, 3};
    Tensor s = random_real(ms, 17), b = random_real(ms, 18);
    auto sv = s.to_vector<double>(), bv = b.to_vector<double>();
    std::vector<double> ref(xhat.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      size_t j = per_pixel ? i : i / 12;  // (b, c) of element i
      ref[i] = xhat[i] * (1 + sv[j]) + bv[j];
    }
    CHECK(max_diff(sp::conditional_layer_norm(x, s, b, 1e-5).to_vector<double>(), ref) < 1e-13);
    check_grads([](const std::vector<Tensor>& in) { return std::vector<Tensor>{sp::conditional_layer_norm(in[0], in[1], in[2], 1e-3)}; },
                {leaf({2, 2, 2, 3}, 19), leaf(per_pixel ? Shape{2, 2, 2, 3} : Shape{2, 2}, 20),
                 leaf(per_pixel ? Shape{2, 2, 2, 3} : Shape{2, 2}, 21)});
  }
  // zero scale and bias: plain layer norm
  CHECK(max_diff(sp::conditional_layer_norm(x, gs::zeros({2, 3}, DType::f64), gs::zeros({2, 3}, DType::f64)).to_vector<double>(),
                 xhat) < 1e-13);
}

TEST_CASE("conv1x1: naive loops, gradients") {
  Tensor x = random_real({2, 3, 3, 5}, 22), w = random_real({2, 3}, 23), b = random_real({2}, 24);
  auto xv = x.to_vector<double>(), wv = w.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> ref(2 * 2 * 15);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t p = 0; p < 15; ++p) {
        double acc = bv[o];
        for (int64_t i = 0; i < 3; ++i) acc += wv[o * 3 + i] * xv[(n * 3 + i) * 15 + p];
        ref[(n * 2 + o) * 15 + p] = acc;
      }
  Tensor y = sp::conv1x1(x, w, b);
  CHECK(y.sizes() == Shape{2, 2, 3, 5});
  CHECK(max_diff(y.to_vector<double>(), ref) < 1e-14);
  check_grads([](const std::vector<Tensor>& in) { return std::vector<Tensor>{sp::conv1x1(in[0], in[1], in[2])}; },
              {leaf({2, 3, 2, 3}, 25), leaf({2, 3}, 26), leaf({2}, 27)});
}

TEST_CASE("local_conv3x3: naive loops with an explicit pole-aware halo, gradients") {
  Tensor x = random_real({2, 3, 5, 6}, 28), w = random_real({2, 3, 3, 3}, 29), b = random_real({2}, 30);
  Tensor y = sp::local_conv3x3(x, w, b);
  CHECK(y.sizes() == Shape{2, 2, 5, 6});
  CHECK(max_diff(y.to_vector<double>(), naive_conv3x3(x, w, b.to_vector<double>())) < 1e-13);
  CHECK(max_diff(sp::local_conv3x3(x, w).to_vector<double>(), naive_conv3x3(x, w, {})) < 1e-13);
  // a single latitude row: both halo rows are that row, rotated
  Tensor x1 = random_real({1, 2, 1, 4}, 31), w1 = random_real({3, 2, 3, 3}, 32);
  CHECK(max_diff(sp::local_conv3x3(x1, w1).to_vector<double>(), naive_conv3x3(x1, w1, {})) < 1e-13);
  // big enough for the multithreaded gather
  Tensor xb = random_real({2, 4, 16, 32}, 44), wb = random_real({3, 4, 3, 3}, 45);
  CHECK(max_diff(sp::local_conv3x3(xb, wb).to_vector<double>(), naive_conv3x3(xb, wb, {})) < 1e-12);
  // the gather alone
  Tensor nb = sp::sphere_neighbours3x3(x);
  CHECK(nb.sizes() == Shape{2, 3, 3, 3, 5, 6});
  auto nv = nb.to_vector<double>(), xv = x.to_vector<double>();
  CHECK(nv[((((0 * 3 + 1) * 3 + 0) * 3 + 1) * 5 + 0) * 6 + 2] == xv[((0 * 3 + 1) * 5 + 0) * 6 + 5]);  // over the north pole
  CHECK(nv[((((1 * 3 + 2) * 3 + 2) * 3 + 0) * 5 + 4) * 6 + 0] == xv[((1 * 3 + 2) * 5 + 4) * 6 + 2]);  // south pole, col -1+3
  check_grads([](const std::vector<Tensor>& in) { return std::vector<Tensor>{sp::local_conv3x3(in[0], in[1], in[2])}; },
              {leaf({1, 2, 3, 4}, 33), leaf({2, 2, 3, 3}, 34), leaf({2}, 35)});
  check_grads([](const std::vector<Tensor>& in) { return std::vector<Tensor>{sp::sphere_neighbours3x3(in[0])}; },
              {leaf({1, 2, 2, 4}, 36)});
}

TEST_CASE("local_conv3x3: continuous across the poles for a field smooth on the sphere") {
  // Colatitudes (j + 1/2) pi / H: reflecting row 0 through the pole lands on row 0 rotated by pi.
  const int64_t H = 16, W = 32;
  const double pi = std::numbers::pi;
  auto theta = [&](int64_t j) { return (j + 0.5) * pi / H; };
  auto phi = [&](int64_t k) { return 2 * pi * k / W; };
  // A smooth function of the 3-D position, not symmetric about the polar axis.
  auto field = [](double t, double p) {
    double X = std::sin(t) * std::cos(p), Y = std::sin(t) * std::sin(p), Z = std::cos(t);
    return X + 0.7 * Y * Z + Z * Z + 0.4 * X * Y - 0.3 * Z;
  };
  std::vector<double> f(H * W);
  for (int64_t j = 0; j < H; ++j)
    for (int64_t k = 0; k < W; ++k) f[j * W + k] = field(theta(j), phi(k));
  Tensor x = gs::from_vector(f, {1, 1, H, W});
  // A symmetric stencil (invariant under dh -> 2-dh and dw -> 2-dw).
  std::vector<double> st = {0.05, 0.1, 0.05, 0.1, 0.4, 0.1, 0.05, 0.1, 0.05};
  Tensor y = sp::local_conv3x3(x, gs::from_vector(st, {1, 1, 3, 3}));
  auto yv = y.to_vector<double>();
  // 1. Exactly the stencil applied to the field evaluated at the extended colatitudes -pi/(2H) and
  //    pi + pi/(2H): the halo is the field itself continued over the pole.
  double exact_err = 0.0;
  for (int64_t j : {int64_t{0}, H - 1})
    for (int64_t k = 0; k < W; ++k) {
      double acc = 0.0;
      for (int64_t dh = 0; dh < 3; ++dh)
        for (int64_t dw = 0; dw < 3; ++dw) acc += st[dh * 3 + dw] * field(theta(j + dh - 1), phi(k + dw - 1));
      exact_err = std::max(exact_err, std::abs(acc - yv[j * W + k]));
    }
  CHECK(exact_err < 1e-13);
  // 2. Row-to-row changes at the pole rows are no larger than in the interior (no seam).
  auto row_jump = [&](int64_t j) {
    double m = 0.0;
    for (int64_t k = 0; k < W; ++k) m = std::max(m, std::abs(yv[j * W + k] - yv[(j + 1) * W + k]));
    return m;
  };
  double interior = 0.0;
  for (int64_t j = 1; j < H - 2; ++j) interior = std::max(interior, row_jump(j));
  CHECK(row_jump(0) <= 1.05 * interior);
  CHECK(row_jump(H - 2) <= 1.05 * interior);
  // And the two pole rows read across the pole: the value at the pole row averaged around the
  // circle equals the field's own circle average there, smoothed by the stencil (no zero padding).
  double mean0 = 0.0;
  for (int64_t k = 0; k < W; ++k) mean0 += yv[k] / W;
  double fmean0 = 0.0;
  for (int64_t k = 0; k < W; ++k) fmean0 += f[k] / W;
  CHECK(std::abs(mean0 - fmean0) < 0.05);
}

TEST_CASE("area_weighted_mean and area_weighted_mse: ACE's definitions with cos-lat weights") {
  const int64_t H = 5, W = 4;
  auto a = sp::area_weights_coslat(sp::GridKind::legendre_gauss, H);
  Tensor x = random_real({2, 3, H, W}, 37), t = random_real({2, 3, H, W}, 38);
  auto xv = x.to_vector<double>(), tv = t.to_vector<double>();
  double asum = 0;
  for (double v : a) asum += v;
  // ACE: (x * w).sum((-2, -1)) / w.expand(x.shape).sum((-2, -1)) with w = cos(lat) over (H, W)
  std::vector<double> ref(6);
  double mse = 0;
  for (int64_t p = 0; p < 6; ++p) {
    double num = 0, den = 0, se = 0;
    for (int64_t h = 0; h < H; ++h)
      for (int64_t w = 0; w < W; ++w) {
        num += a[h] * xv[p * H * W + h * W + w];
        den += a[h];
        se += a[h] * std::pow(xv[p * H * W + h * W + w] - tv[p * H * W + h * W + w], 2);
      }
    ref[p] = num / den;
    mse += se / den / 6;
  }
  Tensor m = sp::area_weighted_mean(x, a);
  CHECK(m.sizes() == Shape{2, 3});
  CHECK(max_diff(m.to_vector<double>(), ref) < 1e-14);
  CHECK(max_diff(sp::area_weighted_mean(x, gs::mul(gs::from_vector(a), 3.0)).to_vector<double>(), ref) < 1e-14);
  Tensor l = sp::area_weighted_mse(x, t, a);
  CHECK(l.dim() == 0);
  CHECK(std::abs(l.item<double>() - mse) < 1e-14);
  // f32
  Tensor l32 = sp::area_weighted_mse(gs::to(x, DType::f32), gs::to(t, DType::f32), a);
  CHECK(l32.dtype() == DType::f32);
  CHECK(std::abs(l32.item<float>() - mse) < 1e-5);
  // 2-D input: one field
  Tensor x2 = random_real({H, W}, 39);
  CHECK(sp::area_weighted_mean(x2, a).dim() == 0);
  Tensor aw = gs::from_vector(a);
  check_grads([aw](const std::vector<Tensor>& in) { return std::vector<Tensor>{sp::area_weighted_mean(in[0], aw)}; },
              {leaf({2, 2, 5, 3}, 40)});
  check_grads([aw](const std::vector<Tensor>& in) { return std::vector<Tensor>{sp::area_weighted_mse(in[0], in[1], aw)}; },
              {leaf({2, 1, 5, 2}, 41), leaf({2, 1, 5, 2}, 42)});
}

TEST_CASE("sfno blocks: errors say what was expected and what was given") {
  Tensor x = random_real({2, 3, 4, 6}, 43);
  auto e = error_of([&] { sp::layer_norm_channels(gs::reshape(x, {6, 4, 6})); });
  CHECK(contains(e, "layer_norm_channels"));
  CHECK(contains(e, "4 dims"));
  CHECK(contains(e, "(6, 4, 6)"));
  e = error_of([&] { sp::layer_norm_channels(x, random_real({4}, 1)); });
  CHECK(contains(e, "expected the weight (C) of shape (3,)"));
  CHECK(contains(e, "f64 (4,)"));
  e = error_of([&] { sp::layer_norm_channels(x, {}, {}, -1.0); });
  CHECK(contains(e, "eps"));
  e = error_of([&] { sp::layer_norm_channels(gs::to(x, DType::c128)); });
  CHECK(contains(e, "f32 or f64"));
  CHECK(contains(e, "c128"));
  e = error_of([&] { sp::instance_norm_sphere(x, {}, {}, 1e-5, random_real({5}, 2, 0.1, 1.0)); });
  CHECK(contains(e, "quadrature weights (H) of shape (4,)"));
  CHECK(contains(e, "f64 (5,)"));
  e = error_of([&] { sp::instance_norm_sphere(x, {}, {}, 1e-5, gs::from_vector(std::vector<double>{1, -1, 1, 1})); });
  CHECK(contains(e, "non-negative"));
  e = error_of([&] { sp::instance_norm_sphere(x, {}, {}, 1e-5, random_real({4}, 2, 0.1, 1.0).set_requires_grad(true)); });
  CHECK(contains(e, "constants"));
  e = error_of([&] { sp::conditional_layer_norm(x, random_real({2, 4}, 3), random_real({2, 3}, 4)); });
  CHECK(contains(e, "expected the scale of shape (2, 3) (B, C) or (2, 3, 4, 6)"));
  CHECK(contains(e, "(2, 4)"));
  e = error_of([&] { sp::conv1x1(x, random_real({2, 4}, 5)); });
  CHECK(contains(e, "expected a weight (Cout, Cin) = (Cout, 3)"));
  CHECK(contains(e, "(2, 4)"));
  e = error_of([&] { sp::conv1x1(x, random_real({2, 3}, 5), random_real({3}, 6)); });
  CHECK(contains(e, "bias (2,)"));
  CHECK(contains(e, "f64 (3,)"));
  e = error_of([&] { sp::local_conv3x3(random_real({1, 3, 4, 5}, 7), random_real({2, 3, 3, 3}, 8)); });
  CHECK(contains(e, "even number of longitudes"));
  CHECK(contains(e, "W = 5"));
  e = error_of([&] { sp::local_conv3x3(x, random_real({2, 3, 5, 5}, 9)); });
  CHECK(contains(e, "expected a weight (Cout, Cin, 3, 3) = (Cout, 3, 3, 3)"));
  CHECK(contains(e, "(2, 3, 5, 5)"));
  e = error_of([&] { sp::local_conv3x3(x, gs::to(random_real({2, 3, 3, 3}, 10), DType::f32)); });
  CHECK(contains(e, "dtype f64"));
  e = error_of([&] { sp::area_weighted_mean(x, std::vector<double>{1, 1, 1}); });
  CHECK(contains(e, "area weights (H) of shape (4,)"));
  CHECK(contains(e, "f64 (3,)"));
  e = error_of([&] { sp::area_weighted_mean(x, std::vector<double>{0, 0, 0, 0}); });
  CHECK(contains(e, "positive sum"));
  e = error_of([&] { sp::area_weighted_mse(x, random_real({2, 3, 4, 5}, 11), std::vector<double>{1, 1, 1, 1}); });
  CHECK(contains(e, "expected target with pred's shape (2, 3, 4, 6)"));
  CHECK(contains(e, "(2, 3, 4, 5)"));
  e = error_of([] { sp::sphere_neighbour_index(0, 0, 0, 0, 4, 5); });
  CHECK(contains(e, "even number of longitudes"));
}
