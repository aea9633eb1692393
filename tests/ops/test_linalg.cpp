// matmul, bmm, linear: forward against naive loops (odd shapes, 1-D promotion, broadcast batches,
// complex, strided operands), gradients and second-order gradients by finite differences, and
// the shape and dtype errors.
#include <doctest/doctest.h>

#include <string>

#include "engine/autograd/engine.h"
#include "engine/autograd/gradcheck.h"
#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/view.h"
#include "tests/test_util.h"

using namespace gs;

namespace {

Tensor rnd(const Shape& s, uint64_t stream, DType dt = DType::f64) { return randn(s, {4242, stream}, dt); }

// Broadcast-aware naive matmul on promoted operands: a (..., n, k) @ b (..., k, m), in c128.
std::vector<c128> naive_matmul(const Tensor& a, const Tensor& b, Shape* out_shape) {
  Tensor A = a.dim() == 1 ? reshape(a.detach(), {1, a.size(0)}) : a.detach();
  Tensor B = b.dim() == 1 ? reshape(b.detach(), {b.size(0), 1}) : b.detach();
  const int64_t n = A.size(-2), k = A.size(-1), m = B.size(-1);
  Shape ba(A.sizes().begin(), A.sizes().end() - 2), bb(B.sizes().begin(), B.sizes().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "naive");
  auto va = A.to_vector<c128>(), vb = B.to_vector<c128>();
  auto index_in = [](const Shape& bs, const Shape& batch, int64_t flat) {
    // Flat index of the matrix in an operand with batch shape bs, for output batch entry `flat`.
    int64_t idx = 0, stride = 1;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1, e = static_cast<int64_t>(bs.size()) - 1; d >= 0; --d, --e) {
      int64_t i = flat % batch[d];
      flat /= batch[d];
      if (e >= 0) {
        idx += (bs[e] == 1 ? 0 : i) * stride;
        stride *= bs[e];
      }
    }
    return idx;
  };
  std::vector<c128> out;
  for (int64_t t = 0; t < numel_of(batch); ++t) {
    int64_t ia = index_in(ba, batch, t) * n * k, ib = index_in(bb, batch, t) * k * m;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        c128 s = 0;
        for (int64_t q = 0; q < k; ++q) s += va[ia + i * k + q] * vb[ib + q * m + j];
        out.push_back(s);
      }
  }
  Shape shape = batch;
  if (a.dim() > 1) shape.push_back(n);
  if (b.dim() > 1) shape.push_back(m);
  *out_shape = shape;
  return out;
}

double tol_for(DType dt) { return dt == DType::f32 || dt == DType::c64 ? 1e-4 : 1e-12; }

void check_matmul(const Tensor& a, const Tensor& b) {
  CAPTURE(a.meta_str());
  CAPTURE(b.meta_str());
  Shape want_shape;
  auto want = naive_matmul(a, b, &want_shape);
  Tensor out = matmul(a, b);
  CHECK(out.sizes() == want_shape);
  CHECK(out.dtype() == a.dtype());
  auto got = out.to_vector<c128>();
  REQUIRE(got.size() == want.size());
  double err = 0, scale = 1;
  for (size_t i = 0; i < got.size(); ++i) err = std::max(err, std::abs(got[i] - want[i])), scale = std::max(scale, std::abs(want[i]));
  CHECK(err <= tol_for(a.dtype()) * scale * std::max<int64_t>(a.size(-1), 1));
}

using gs_test::error_of;

void run_registry_checks(const std::string& name) {
  const OpInfo* info = OpRegistry::find(name);
  REQUIRE(info != nullptr);
  for (const auto& s : info->samples({7, 3})) {
    CAPTURE(name);
    CAPTURE(s.label);
    auto r = gradcheck(info->fn, s.inputs, info->tolerances);
    CHECK_MESSAGE(r.ok, r.failure);
    if (info->second_order) {
      auto rr = gradgradcheck(info->fn, s.inputs, info->tolerances);
      CHECK_MESSAGE(rr.ok, rr.failure);
    }
  }
}

}  // namespace

TEST_CASE("matmul: 2-D products match naive loops in every dtype") {
  for (DType dt : {DType::f32, DType::f64, DType::c64, DType::c128}) {
    CAPTURE(dtype_name(dt));
    check_matmul(rnd({3, 5}, 1, dt), rnd({5, 7}, 2, dt));
    check_matmul(rnd({1, 4}, 3, dt), rnd({4, 1}, 4, dt));
    check_matmul(rnd({6, 1}, 5, dt), rnd({1, 3}, 6, dt));
  }
}

TEST_CASE("matmul: 1-D operands are promoted and the added dim removed") {
  for (DType dt : {DType::f64, DType::c128}) {
    Tensor v = rnd({5}, 10, dt), w = rnd({5}, 11, dt);
    check_matmul(v, w);  // dot product: shape ()
    CHECK(matmul(v, w).dim() == 0);
    check_matmul(v, rnd({5, 3}, 12, dt));        // (5) @ (5, 3) -> (3)
    check_matmul(rnd({4, 5}, 13, dt), w);        // (4, 5) @ (5) -> (4)
    check_matmul(v, rnd({2, 5, 3}, 14, dt));     // (5) @ (2, 5, 3) -> (2, 3)
    check_matmul(rnd({2, 3, 4, 5}, 15, dt), w);  // (2, 3, 4, 5) @ (5) -> (2, 3, 4)
  }
  CHECK(matmul(rnd({5}, 1), rnd({5, 3}, 2)).sizes() == Shape{3});
  CHECK(matmul(rnd({4, 5}, 1), rnd({5}, 2)).sizes() == Shape{4});
  CHECK(matmul(rnd({5}, 1), rnd({2, 5, 3}, 2)).sizes() == Shape{2, 3});
}

TEST_CASE("matmul: batch dims broadcast as in NumPy") {
  for (DType dt : {DType::f32, DType::c128}) {
    check_matmul(rnd({2, 1, 3, 4}, 20, dt), rnd({3, 4, 5}, 21, dt));  // -> (2, 3, 3, 5)
    check_matmul(rnd({3, 4}, 22, dt), rnd({2, 4, 5}, 23, dt));        // 2-D @ batched
    check_matmul(rnd({2, 3, 3, 4}, 24, dt), rnd({4, 5}, 25, dt));     // batched @ 2-D (one folded GEMM)
    check_matmul(rnd({1, 3, 4}, 26, dt), rnd({4, 1, 4, 2}, 27, dt));
  }
  CHECK(matmul(rnd({2, 1, 3, 4}, 1), rnd({3, 4, 5}, 2)).sizes() == Shape{2, 3, 3, 5});
}

TEST_CASE("matmul: strided operands (transposed, sliced, expanded) give the same products") {
  for (DType dt : {DType::f64, DType::c64}) {
    CAPTURE(dtype_name(dt));
    Tensor a = rnd({7, 5}, 30, dt), b = rnd({3, 7}, 31, dt);
    check_matmul(transpose(a, 0, 1), transpose(b, 0, 1));              // column-major both
    check_matmul(rnd({3, 7}, 32, dt), a);                             // row-major both
    check_matmul(transpose(a, 0, 1), rnd({7, 2}, 33, dt));            // column-major @ row-major
    check_matmul(slice(rnd({6, 10}, 34, dt), 1, 0, 10, 2), rnd({5, 4}, 35, dt));  // column stride 2: copied
    check_matmul(slice(rnd({4, 9}, 36, dt), 1, 1, 8), rnd({7, 3}, 37, dt));       // row stride 9 > 7 columns
    Tensor batch = rnd({4, 3, 6}, 38, dt);
    check_matmul(transpose(batch, 1, 2), rnd({4, 3, 2}, 39, dt));     // batched column-major
    check_matmul(permute(rnd({3, 4, 5}, 40, dt), {1, 0, 2}), rnd({4, 5, 2}, 41, dt));  // batch stride != n*k
    check_matmul(expand(rnd({1, 3, 5}, 42, dt), {4, 3, 5}), rnd({4, 5, 2}, 43, dt));  // stride-0 batch
    check_matmul(expand(rnd({3, 1}, 44, dt), {3, 4}), rnd({4, 2}, 45, dt));            // stride-0 columns: copied
    check_matmul(select(rnd({3, 5, 6}, 46, dt), 2, 1), rnd({5, 2}, 47, dt));          // neither stride 1
  }
}

TEST_CASE("matmul: large and many-small products (both threading paths) match naive loops") {
  check_matmul(rnd({67, 130}, 50, DType::f32), rnd({130, 45}, 51, DType::f32));
  check_matmul(rnd({150, 200}, 52), rnd({200, 170}, 53));  // big enough for Eigen to use both threads
  check_matmul(rnd({64, 5, 6}, 54), rnd({64, 6, 7}, 55));  // small matrices, split over the batch
  check_matmul(rnd({65, 9, 8}, 56, DType::c128), rnd({1, 8, 3}, 57, DType::c128));
  check_matmul(rnd({3, 140, 130}, 58, DType::f32), rnd({3, 130, 90}, 59, DType::f32));  // large batched
}

TEST_CASE("matmul: empty dims") {
  Tensor out = matmul(rnd({3, 0}, 1), rnd({0, 4}, 2));
  CHECK(out.sizes() == Shape{3, 4});
  for (double v : out.to_vector<double>()) CHECK(v == 0.0);
  CHECK(matmul(rnd({0, 3}, 3), rnd({3, 4}, 4)).sizes() == Shape{0, 4});
  CHECK(matmul(rnd({2, 0, 3}, 5), rnd({3, 4}, 6)).sizes() == Shape{2, 0, 4});
  CHECK(matmul(rnd({0}, 7), rnd({0}, 8)).item<double>() == 0.0);
}

TEST_CASE("bmm: matches naive loops and checks its shapes") {
  for (DType dt : {DType::f32, DType::c128}) {
    Tensor a = rnd({3, 4, 5}, 60, dt), b = rnd({3, 5, 2}, 61, dt);
    Shape s;
    auto want = naive_matmul(a, b, &s);
    Tensor out = bmm(a, b);
    CHECK(out.sizes() == Shape{3, 4, 2});
    auto got = out.to_vector<c128>();
    for (size_t i = 0; i < got.size(); ++i) CHECK(std::abs(got[i] - want[i]) < 1e-4);
  }
  std::string e = error_of([] { bmm(rnd({3, 4}, 1), rnd({3, 4, 2}, 2)); });
  CHECK(e.find("bmm") != std::string::npos);
  CHECK(e.find("3-D") != std::string::npos);
  CHECK(e.find("(3, 4)") != std::string::npos);
  e = error_of([] { bmm(rnd({2, 4, 5}, 1), rnd({3, 5, 2}, 2)); });
  CHECK(e.find("batch sizes differ") != std::string::npos);
  CHECK(e.find("(2, 4, 5)") != std::string::npos);
  CHECK(e.find("(3, 5, 2)") != std::string::npos);
  e = error_of([] { bmm(rnd({2, 4, 5}, 1), rnd({2, 4, 2}, 2)); });
  CHECK(e.find("inner dims differ") != std::string::npos);
  CHECK_THROWS_AS(bmm(rnd({1, 4, 5}, 1), rnd({2, 5, 2}, 2)), Error);  // no broadcasting in bmm
}

TEST_CASE("linear: x W^T + b") {
  for (DType dt : {DType::f64, DType::c64}) {
    Tensor x = rnd({2, 3, 4}, 70, dt), w = rnd({5, 4}, 71, dt), b = rnd({5}, 72, dt);
    Tensor out = linear(x, w, b), plain = linear(x, w);
    CHECK(out.sizes() == Shape{2, 3, 5});
    auto vx = x.to_vector<c128>(), vw = w.to_vector<c128>(), vb = b.to_vector<c128>();
    auto vo = out.to_vector<c128>(), vp = plain.to_vector<c128>();
    for (int64_t r = 0; r < 6; ++r)
      for (int64_t o = 0; o < 5; ++o) {
        c128 s = 0;
        for (int64_t i = 0; i < 4; ++i) s += vx[r * 4 + i] * vw[o * 4 + i];
        CHECK(std::abs(vp[r * 5 + o] - s) < 1e-5);
        CHECK(std::abs(vo[r * 5 + o] - (s + vb[o])) < 1e-5);
      }
  }
  CHECK(linear(rnd({4}, 1), rnd({3, 4}, 2)).sizes() == Shape{3});
  std::string e = error_of([] { linear(rnd({2, 4}, 1), rnd({4}, 2)); });
  CHECK(e.find("2-D weight") != std::string::npos);
  e = error_of([] { linear(rnd({2, 3}, 1), rnd({5, 4}, 2)); });
  CHECK(e.find("in_features 4") != std::string::npos);
  CHECK(e.find("(2, 3)") != std::string::npos);
  e = error_of([] { linear(rnd({2, 4}, 1), rnd({5, 4}, 2), rnd({4}, 3)); });
  CHECK(e.find("bias of shape (5,)") != std::string::npos);
  CHECK_THROWS_AS(linear(rnd({2, 4}, 1), rnd({5, 4}, 2, DType::f32)), Error);
}

TEST_CASE("matmul: shape and dtype errors say what was expected and what was received") {
  std::string e = error_of([] { matmul(rnd({3, 5}, 1), rnd({4, 7}, 2)); });
  CHECK(e.find("matmul") != std::string::npos);
  CHECK(e.find("inner dims differ") != std::string::npos);
  CHECK(e.find("(3, 5)") != std::string::npos);
  CHECK(e.find("(4, 7)") != std::string::npos);
  e = error_of([] { matmul(rnd({5}, 1), rnd({4}, 2)); });
  CHECK(e.find("inner dims differ") != std::string::npos);
  e = error_of([] { matmul(rnd({2, 3, 4}, 1), rnd({3, 4, 5}, 2)); });
  CHECK(e.find("batch dims") != std::string::npos);
  CHECK(e.find("cannot be broadcast") != std::string::npos);
  CHECK(e.find("(2, 3, 4)") != std::string::npos);
  e = error_of([] { matmul(rnd({}, 1), rnd({3}, 2)); });
  CHECK(e.find("at least 1 dim") != std::string::npos);
  e = error_of([] { matmul(rnd({2, 3}, 1), rnd({3, 2}, 2, DType::f32)); });
  CHECK(e.find("same dtype") != std::string::npos);
  CHECK(e.find("f64") != std::string::npos);
  CHECK(e.find("f32") != std::string::npos);
  e = error_of([] { matmul(arange(6), arange(6)); });
  CHECK(e.find("i64") != std::string::npos);
  CHECK_THROWS_AS(matmul(Tensor(), rnd({3}, 1)), Error);
}

TEST_CASE("matmul: gradient shapes follow 1-D promotion and broadcast batches") {
  Tensor v = rnd({4}, 80).set_requires_grad(true), b = rnd({2, 4, 3}, 81).set_requires_grad(true);
  sum(matmul(v, b)).backward();
  CHECK(v.grad().sizes() == Shape{4});
  CHECK(b.grad().sizes() == Shape{2, 4, 3});
  // d/dv sum(v @ b) = sum over batch and columns of b.
  auto vb = b.to_vector<double>(), gv = v.grad().to_vector<double>();
  for (int64_t i = 0; i < 4; ++i) {
    double s = 0;
    for (int64_t t = 0; t < 2; ++t)
      for (int64_t j = 0; j < 3; ++j) s += vb[t * 12 + i * 3 + j];
    CHECK(gv[i] == doctest::Approx(s));
  }
  Tensor a = rnd({2, 1, 3, 4}, 82).set_requires_grad(true), c = rnd({3, 4, 5}, 83).set_requires_grad(true);
  sum(matmul(a, c)).backward();
  CHECK(a.grad().sizes() == Shape{2, 1, 3, 4});
  CHECK(c.grad().sizes() == Shape{3, 4, 5});
}

TEST_CASE("matmul, bmm, linear: gradcheck and gradgradcheck (f64 and c128)") {
  for (const char* name : {"matmul", "matmul_transposed_b", "bmm", "linear"}) run_registry_checks(name);
}

TEST_CASE("matmul: no tape under no_grad, and a saved operand changed in place fails at backward") {
  Tensor a = rnd({3, 4}, 90).set_requires_grad(true), b = rnd({4, 2}, 91).set_requires_grad(true);
  {
    NoGradGuard ng;
    CHECK_FALSE(matmul(a, b).requires_grad());
  }
  Tensor a2 = mul(a, 1.0);
  Tensor out = matmul(a2, b);
  {
    NoGradGuard ng;
    // Raw write + version bump, the way an in-place op or a buffer broadcast would.
    bump_version(a2);
  }
  std::string e = error_of([&] { sum(out).backward(); });
  CHECK(e.find("matmul") != std::string::npos);
  CHECK(e.find("saved at version 0") != std::string::npos);
  CHECK(e.find("now at version 1") != std::string::npos);
}
