// In-place ops: values against naive loops, version bumps in every grad mode, the leaf / view /
// read-only refusals, the saved-tensor version error at backward, and rebased histories that give
// the same gradients as the out-of-place computation.
#include <doctest/doctest.h>

#include <functional>
#include <string>

#include "engine/autograd/engine.h"
#include "engine/autograd/gradcheck.h"
#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/view.h"
#include "tests/test_util.h"

using namespace gs;

namespace {

Tensor rnd(const Shape& s, uint64_t stream, DType dt = DType::f64) { return randn(s, {777, stream}, dt); }

using gs_test::error_of;

using gs_test::contains;

// A fresh (non-view) tensor whose geometry is transposed: non-contiguous, not a view.
Tensor transposed_fresh(const Shape& s, uint64_t stream, DType dt = DType::f64) {
  Shape sw = s;
  std::swap(sw[0], sw[1]);
  Tensor base = rnd(sw, stream, dt);
  Shape st = base.strides();
  std::swap(st[0], st[1]);
  return Tensor(std::make_shared<TensorImpl>(base.storage(), s, st, 0, dt));
}

void check_close(const std::vector<c128>& got, const std::vector<c128>& want, double tol = 1e-12) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i])));
  }
}

// All in-place ops, each applied to `t` with a compatible operand.
struct NamedOp {
  const char* name;
  std::function<void(Tensor&)> apply;
};
// The operand is 0-dim so that it broadcasts to any target (views included).
std::vector<NamedOp> all_ops(DType dt) {
  Tensor other = rnd({}, 99, dt);
  return {
      {"add_", [other](Tensor& t) { add_(t, other, 2.0); }},
      {"add_", [](Tensor& t) { add_(t, 1.0); }},
      {"mul_", [other](Tensor& t) { mul_(t, other); }},
      {"mul_", [](Tensor& t) { mul_(t, 3.0); }},
      {"copy_", [other](Tensor& t) { copy_(t, other); }},
      {"fill_", [](Tensor& t) { fill_(t, 0.5); }},
      {"zero_", [](Tensor& t) { zero_(t); }},
  };
}

void run_registry_checks(const std::string& name) {
  const OpInfo* info = OpRegistry::find(name);
  REQUIRE(info != nullptr);
  for (const auto& s : info->samples({11, 5})) {
    CAPTURE(name);
    CAPTURE(s.label);
    auto r = gradcheck(info->fn, s.inputs, info->tolerances);
    CHECK_MESSAGE(r.ok, r.failure);
    auto rr = gradgradcheck(info->fn, s.inputs, info->tolerances);
    CHECK_MESSAGE(rr.ok, rr.failure);
  }
}

}  // namespace

TEST_CASE("add_ and mul_: values, broadcast operands, alpha, complex, strided targets") {
  for (DType dt : {DType::f32, DType::f64, DType::c64, DType::c128}) {
    CAPTURE(dtype_name(dt));
    const double tol = dt == DType::f32 || dt == DType::c64 ? 1e-6 : 1e-14;
    Tensor x = rnd({3, 4}, 1, dt), o = rnd({4}, 2, dt);
    auto vx = x.to_vector<c128>(), vo = o.to_vector<c128>();
    Tensor y = clone(x);
    add_(y, o, -0.5);
    std::vector<c128> want;
    for (int64_t i = 0; i < 12; ++i) want.push_back(vx[i] - 0.5 * vo[i % 4]);
    check_close(y.to_vector<c128>(), want, tol);

    y = clone(x);
    mul_(y, reshape(o, {1, 4}));
    for (int64_t i = 0; i < 12; ++i) want[i] = vx[i] * vo[i % 4];
    check_close(y.to_vector<c128>(), want, tol);

    y = clone(x);
    add_(y, 2.5);
    mul_(y, -2.0);
    for (int64_t i = 0; i < 12; ++i) want[i] = (vx[i] + 2.5) * -2.0;
    check_close(y.to_vector<c128>(), want, tol);

    // A transposed (column-major) target and a transposed operand.
    Tensor t = transposed_fresh({4, 3}, 3, dt), u = transposed_fresh({4, 3}, 4, dt);
    auto vt = t.to_vector<c128>(), vu = u.to_vector<c128>();
    add_(t, u);
    for (int64_t i = 0; i < 12; ++i) want[i] = vt[i] + vu[i];
    check_close(t.to_vector<c128>(), want, tol);
    CHECK(t.strides() == Shape{1, 4});  // the target keeps its geometry
  }
  // A write through a strided view (no autograd involved) lands in the base.
  Tensor base = zeros({3, 6}, DType::f64);
  Tensor v = slice(base, 1, 1, 6, 2);  // columns 1, 3, 5
  add_(v, from_vector<double>({1, 2, 3}));
  CHECK(base.to_vector<double>() == std::vector<double>{0, 1, 0, 2, 0, 3, 0, 1, 0, 2, 0, 3, 0, 1, 0, 2, 0, 3});
  // i64 counters.
  Tensor counter = arange(4);
  add_(counter, 1.0);
  mul_(counter, arange(4));
  CHECK(counter.to_vector<int64_t>() == std::vector<int64_t>{0, 2, 6, 12});
  CHECK(contains(error_of([&] { add_(counter, 0.5); }), "not an integer"));
}

TEST_CASE("add_ and mul_ read an operand that shares the target's storage before writing") {
  Tensor x = from_vector<double>({1, 2, 3, 4}, {2, 2});
  Tensor y = clone(x);
  add_(y, transpose(y, 0, 1));  // y + y^T, not a half-updated mixture
  CHECK(y.to_vector<double>() == std::vector<double>{2, 5, 5, 8});
  y = clone(x);
  mul_(y, y);
  CHECK(y.to_vector<double>() == std::vector<double>{1, 4, 9, 16});
  y = clone(x);
  mul_(y, select(y, 0, 1));  // every row times the old row 1, which is itself overwritten
  CHECK(y.to_vector<double>() == std::vector<double>{3, 8, 9, 16});
}

TEST_CASE("copy_: broadcast and dtype casts; fill_ and zero_ on every dtype") {
  Tensor y = zeros({2, 3}, DType::c128);
  copy_(y, from_vector<double>({1, 2, 3}));  // real -> complex, broadcast over rows
  check_close(y.to_vector<c128>(), {1, 2, 3, 1, 2, 3});
  Tensor r = zeros({3}, DType::f32);
  copy_(r, from_vector<c128>({{1, 9}, {2, 9}, {3, 9}}));  // complex -> real keeps the real part
  CHECK(r.to_vector<float>() == std::vector<float>{1, 2, 3});
  Tensor d = transposed_fresh({2, 2}, 5);
  copy_(d, reshape(arange(4), {2, 2}));  // i64 -> f64 into a column-major target
  CHECK(d.to_vector<double>() == std::vector<double>{0, 1, 2, 3});
  Tensor sq = from_vector<double>({1, 2, 3, 4}, {2, 2});
  copy_(sq, transpose(sq, 0, 1));  // source aliases the target
  CHECK(sq.to_vector<double>() == std::vector<double>{1, 3, 2, 4});

  for (DType dt : {DType::f32, DType::f64, DType::c64, DType::c128, DType::i64, DType::b8}) {
    CAPTURE(dtype_name(dt));
    Tensor t = ones({2, 3}, dt);
    fill_(t, 3.0);
    for (c128 v : t.to_vector<c128>()) CHECK(v == (dt == DType::b8 ? c128(1) : c128(3)));
    Tensor col = slice(t, 1, 1, 2);  // a strided column
    zero_(col);
    auto v = t.to_vector<c128>();
    CHECK(v[1] == c128(0));
    CHECK(v[4] == c128(0));
    CHECK(v[0] != c128(0));
  }
}

TEST_CASE("in-place ops check shapes, dtypes and targets with clear messages") {
  Tensor x = zeros({3}, DType::f64);
  std::string e = error_of([&] { add_(x, rnd({2, 3}, 1)); });
  CHECK(contains(e, "add_"));
  CHECK(contains(e, "(2, 3)"));
  CHECK(contains(e, "(3,)"));
  CHECK(contains(e, "never changes the shape"));
  e = error_of([&] { mul_(x, rnd({4}, 1)); });
  CHECK(contains(e, "mul_"));
  CHECK(contains(e, "cannot be broadcast"));
  e = error_of([&] { copy_(x, rnd({2, 3}, 1)); });
  CHECK(contains(e, "copy_"));
  CHECK(contains(e, "(2, 3)"));
  e = error_of([&] { add_(x, rnd({3}, 1, DType::f32)); });
  CHECK(contains(e, "dtype f64"));
  CHECK(contains(e, "got f32"));
  e = error_of([&] { mul_(x, rnd({3}, 1, DType::c128)); });
  CHECK(contains(e, "c128"));
  Tensor expanded = expand(zeros({1, 3}, DType::f64), {4, 3});
  e = error_of([&] { add_(expanded, 1.0); });
  CHECK(contains(e, "share one memory location"));
  Tensor undefined;
  CHECK_THROWS_AS(fill_(undefined, 1.0), Error);
  CHECK_THROWS_AS(add_(x, Tensor()), Error);
}

TEST_CASE("every in-place op bumps the version once, in every grad mode") {
  enum class Mode { grad, no_grad, inference };
  for (Mode mode : {Mode::grad, Mode::no_grad, Mode::inference}) {
    CAPTURE(static_cast<int>(mode));
    for (auto& op : all_ops(DType::f64)) {
      CAPTURE(std::string(op.name));
      Tensor leaf = rnd({2, 3}, 10);
      Tensor view = select(leaf, 0, 1);
      Tensor x = mul(rnd({2, 3}, 11).set_requires_grad(true), 2.0);  // a non-leaf in the graph
      uint64_t v_leaf = leaf.version(), v_x = x.version();
      {
        NoGradGuard ng_off;  // restore grad mode after the block
        GradMode::set_enabled(mode != Mode::no_grad);
        InferenceModeGuard* inf = mode == Mode::inference ? new InferenceModeGuard() : nullptr;
        op.apply(leaf);
        op.apply(x);
        delete inf;
      }
      CHECK(leaf.version() == v_leaf + 1);
      CHECK(view.version() == v_leaf + 1);  // views share the counter
      CHECK(x.version() == v_x + 1);
      // A write through the view is a write to the base's storage.
      NoGradGuard ng;
      Tensor view2 = select(leaf, 1, 0);
      uint64_t before = leaf.version();
      op.apply(view2);
      CHECK(leaf.version() == before + 1);
    }
  }
}

TEST_CASE("in-place on a leaf that requires grad: refused while recording, allowed under no_grad") {
  for (auto& op : all_ops(DType::f64)) {
    CAPTURE(std::string(op.name));
    Tensor w = rnd({2, 2}, 20).set_requires_grad(true);
    auto before = w.to_vector<double>();
    std::string e = error_of([&] { op.apply(w); });
    CHECK(contains(e, "leaf"));
    CHECK(contains(e, op.name));
    CHECK(w.version() == 0);  // refused before writing
    CHECK(w.to_vector<double>() == before);
    {
      NoGradGuard ng;  // an optimizer step
      op.apply(w);
    }
    CHECK(w.version() == 1);
    CHECK(w.is_leaf());
    CHECK(w.requires_grad());
  }
  // The classic SGD update.
  Tensor w = from_vector<double>({1, 2}).set_requires_grad(true);
  sum(mul(w, w)).backward();
  {
    NoGradGuard ng;
    add_(w, w.grad(), -0.25);
  }
  CHECK(w.to_vector<double>() == std::vector<double>{0.5, 1.0});
}

TEST_CASE("read-only storage refuses every in-place write, in every grad mode") {
  for (auto& op : all_ops(DType::f64)) {
    CAPTURE(std::string(op.name));
    Tensor table = rnd({2, 2}, 30);
    table.storage()->set_read_only("Legendre table");
    auto before = table.to_vector<double>();
    for (bool grad_on : {true, false}) {
      GradModeGuard g(grad_on);
      std::string e = error_of([&] { op.apply(table); });
      CHECK(contains(e, "Legendre table"));
      CHECK(contains(e, "read-only"));
      CHECK(contains(e, op.name));
      Tensor v = select(table, 0, 0);
      CHECK(contains(error_of([&] { op.apply(v); }), "Legendre table"));
    }
    CHECK(table.version() == 0);
    CHECK(table.to_vector<double>() == before);
  }
}

TEST_CASE("in-place on a view of a tensor in the graph rebases the base's history (PyTorch's CopySlices)") {
  // Against finite differences: x -> y = 2x; a write into a view of y; the whole y is the output.
  auto check = [](const char* what, std::function<void(Tensor&, const Tensor&)> write) {
    CAPTURE(what);
    Tensor x0 = rnd({3, 4}, 40).set_requires_grad(true);
    Tensor s0 = rnd({4}, 42).set_requires_grad(true);
    auto f = [&](const std::vector<Tensor>& in) {
      Tensor y = mul(in[0], 2.0);
      write(y, in[1]);
      return std::vector<Tensor>{y};
    };
    auto r = gradcheck(f, {x0, s0});
    CHECK_MESSAGE(r.ok, r.failure);
    auto r2 = gradgradcheck(f, {x0, s0});
    CHECK_MESSAGE(r2.ok, r2.failure);
  };
  check("add_ on a row", [](Tensor& y, const Tensor& s) { Tensor row = select(y, 0, 1); add_(row, s); });
  check("mul_ on a row", [](Tensor& y, const Tensor& s) { Tensor row = select(y, 0, 2); mul_(row, s); });
  check("copy_ into a row", [](Tensor& y, const Tensor& s) { Tensor row = select(y, 0, 0); copy_(row, s); });
  check("mul_ on a strided column slice", [](Tensor& y, const Tensor& s) {
    Tensor cols = slice(y, 1, 0, 4, 2);
    mul_(cols, reshape(slice(s, 0, 0, 3), {3, 1}));
  });
  check("add_ through a transposed view", [](Tensor& y, const Tensor& s) {
    Tensor t = transpose(y, 0, 1);
    add_(t, reshape(s, {4, 1}));
  });
  // A view of a plain tensor written with an operand that requires grad: the base gains history.
  Tensor plain = zeros({3, 4}, DType::f64);
  Tensor prow = select(plain, 0, 0);
  Tensor src = rnd({4}, 41).set_requires_grad(true);
  copy_(prow, src);
  CHECK(plain.requires_grad());
  sum(mul(plain, 3.0)).backward();
  CHECK(src.grad().to_vector<double>() == std::vector<double>(4, 3.0));
}

TEST_CASE("in-place on a saved tensor: backward names the op and both versions") {
  Tensor x = rnd({3}, 50).set_requires_grad(true);
  Tensor y = mul(x, 2.0);
  Tensor z = mul(y, y);  // saves y at version 0
  add_(y, 1.0);          // recorded: y's history is rebased, but mul's saved copy is stale
  std::string e = error_of([&] { sum(z).backward(); });
  CHECK(contains(e, "modified by an in-place operation"));
  CHECK(contains(e, "'mul'"));
  CHECK(contains(e, "saved at version 0"));
  CHECK(contains(e, "now at version 1"));
  CHECK(contains(e, "f64"));
  CHECK(contains(e, "(3,)"));

  // Also when the write happens under no_grad (the seed bug: a buffer overwritten between
  // forward and backward).
  Tensor buffer = rnd({3}, 51);
  Tensor w = rnd({3}, 52).set_requires_grad(true);
  Tensor out = mul(w, buffer);
  {
    NoGradGuard ng;
    copy_(buffer, rnd({3}, 53));
    mul_(buffer, 2.0);
  }
  e = error_of([&] { sum(out).backward(); });
  CHECK(contains(e, "'mul'"));
  CHECK(contains(e, "saved at version 0"));
  CHECK(contains(e, "now at version 2"));
}

TEST_CASE("rebased histories give the gradients of the out-of-place computation") {
  for (DType dt : {DType::f64, DType::c128}) {
    CAPTURE(dtype_name(dt));
    Tensor x = rnd({3, 4}, 60, dt).set_requires_grad(true), w = rnd({4}, 61, dt).set_requires_grad(true);
    Tensor c = rnd({3, 4}, 62, dt);
    auto loss_of = [&](bool in_place) {
      Tensor y = mul(x, 2.0);
      if (in_place) {
        mul_(y, w);
        add_(y, c, 0.5);
        mul_(y, y);
        add_(y, 1.0);
      } else {
        y = mul(y, w);
        y = add(y, mul(c, 0.5));
        y = mul(y, y);
        y = add(y, 1.0);
      }
      Tensor l = sum(mul(y, conj(y)));
      return real(l);
    };
    auto grads = [&](bool in_place) {
      auto g = grad({loss_of(in_place)}, {x, w});
      return std::make_pair(g[0].to_vector<c128>(), g[1].to_vector<c128>());
    };
    auto [gx_ref, gw_ref] = grads(false);
    auto [gx, gw] = grads(true);
    check_close(gx, gx_ref, 1e-12);
    check_close(gw, gw_ref, 1e-12);
  }
  // A plain tensor becomes part of the graph when it is written with a tensor that requires grad.
  Tensor acc = zeros({3}, DType::f64);
  Tensor p = from_vector<double>({1, 2, 3}).set_requires_grad(true);
  add_(acc, p);
  mul_(acc, p);
  CHECK(acc.requires_grad());
  CHECK_FALSE(acc.is_leaf());
  sum(acc).backward();
  CHECK(p.grad().to_vector<double>() == std::vector<double>{2, 4, 6});  // d(p^2)/dp
  // copy_ cuts the old history; fill_ and zero_ cut all of it.
  Tensor a = from_vector<double>({1, 2}).set_requires_grad(true), b = from_vector<double>({5, 7}).set_requires_grad(true);
  Tensor t = mul(a, a);
  copy_(t, b);
  Tensor f = mul(a, 3.0);
  fill_(f, 2.0);
  sum(add(mul(t, b), mul(f, a))).backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{2, 2});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{10, 14});
}

TEST_CASE("a write under no_grad to a non-leaf makes later use of its history an error") {
  Tensor x = rnd({3}, 70).set_requires_grad(true);
  Tensor y = mul(x, 2.0);
  {
    NoGradGuard ng;
    add_(y, 1.0);
  }
  std::string e = error_of([&] { mul(y, 3.0); });
  CHECK(contains(e, "modified in place outside autograd"));
}

TEST_CASE("in-place ops: gradcheck and gradgradcheck through clone() wrappers (f64 and c128)") {
  for (const char* name : {"add_", "mul_", "mul_self_aliased", "copy_", "fill_zero_"}) run_registry_checks(name);
}

// ---- cases found by outside checks against PyTorch

TEST_CASE("in-place: an operand that is a view of the written tensor (add_(y, select(y)), y.add_(y.T), mul_, copy_)") {
  // y = x * 1 (2, 2); y[i][j] += y_old[0][j]; loss = sum(y * w): d/dx[i][j] = w[i][j] + (i == 0) * sum_i' w[i'][j].
  Tensor x = from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}).set_requires_grad();
  Tensor w = from_vector(std::vector<double>{1, 10, 100, 1000}, {2, 2});
  Tensor y = mul(x, 1.0);
  add_(y, select(y, 0, 0));
  CHECK(y.to_vector<double>() == std::vector<double>{2, 4, 4, 6});
  sum(mul(y, w)).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{102, 1020, 100, 1000});
  // y.add_(y.T): d/dx[i][j] = w[i][j] + w[j][i].
  Tensor x2 = from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2}).set_requires_grad();
  Tensor y2 = mul(x2, 1.0);
  add_(y2, transpose(y2, 0, 1));
  CHECK(y2.to_vector<double>() == std::vector<double>{2, 5, 5, 8});
  sum(mul(y2, w)).backward();
  CHECK(x2.grad().to_vector<double>() == std::vector<double>{2, 110, 110, 2000});
  // Against finite differences, for add_, mul_ and copy_ with aliased operands.
  auto check = [](const char* what, std::function<void(Tensor&)> write) {
    CAPTURE(what);
    Tensor x0 = randn({3, 3}, {4, 4}, DType::f64).set_requires_grad();
    auto f = [&](const std::vector<Tensor>& in) {
      Tensor t = mul(in[0], 1.5);
      write(t);
      return std::vector<Tensor>{t};
    };
    auto r = gradcheck(f, {x0});
    CHECK_MESSAGE(r.ok, r.failure);
    auto r2 = gradgradcheck(f, {x0});
    CHECK_MESSAGE(r2.ok, r2.failure);
  };
  check("add_(t, select(t))", [](Tensor& t) { add_(t, select(t, 0, 1), 2.0); });
  check("add_(t, t.T)", [](Tensor& t) { add_(t, transpose(t, 0, 1)); });
  check("mul_(t, select(t))", [](Tensor& t) { mul_(t, select(t, 1, 2)); });
  check("mul_(t, t.T)", [](Tensor& t) { mul_(t, transpose(t, 0, 1)); });
  check("mul_(t, t)", [](Tensor& t) { mul_(t, t); });
  check("copy_(t, t.T)", [](Tensor& t) { copy_(t, transpose(t, 0, 1)); });
}

TEST_CASE("in-place: results of matmul, linear, logsumexp, sum_to and flatten are not views") {
  // The user took no view, so an in-place write on these results is an ordinary in-place op.
  Tensor a = randn({2, 3, 4}, {5, 1}, DType::f64).set_requires_grad();
  Tensor v = randn({4}, {5, 2}, DType::f64).set_requires_grad();
  Tensor w = randn({5, 4}, {5, 3}, DType::f64).set_requires_grad();
  Tensor m = randn({4, 4}, {5, 4}, DType::f64).set_requires_grad();
  std::vector<std::pair<std::string, Tensor>> results = {
      {"matmul (.., k) @ (k)", matmul(a, v)},
      {"matmul (k) @ (k, m)", matmul(v, m)},
      {"matmul (k) @ (k)", matmul(v, v)},
      {"linear 3-D, no bias", linear(a, w)},
      {"sum_to", sum_to(mul(a, 1.0), {3, 1})},
      {"flatten of one dim", flatten(mul(v, 1.0))},
  };
  for (auto& [name, r] : results) {
    CAPTURE(name);
    CHECK_FALSE(r.is_view());
    CHECK(error_of([&] { add_(r, 1.0); }) == "(no error)");
    CHECK(error_of([&] { sum(r).backward(); }) == "(no error)");
  }
  // logsumexp saves its result for backward (torch's rule), so the write is fine and backward
  // then names the saved tensor, as torch does.
  Tensor l = logsumexp(a, {1});
  CHECK_FALSE(l.is_view());
  CHECK(error_of([&] { add_(l, 1.0); }) == "(no error)");
  CHECK(contains(error_of([&] { sum(l).backward(); }), "output 0 of 'logsumexp'"));
  // flatten over one dim is the tensor itself (torch.flatten)
  Tensor y = mul(v, 1.0);
  CHECK(flatten(y).is_same(y));
}

TEST_CASE("in-place: writing into the result of complex abs leaves its backward intact") {
  Tensor z = from_vector(std::vector<c128>{{3, 4}, {0, 2}}).set_requires_grad();
  Tensor r = abs(z);
  mul_(r, 2.0);  // torch saves only z for abs, so this is fine there too
  sum(r).backward();
  auto g = z.grad().to_vector<c128>();
  CHECK(std::abs(g[0] - c128(1.2, 1.6)) < 1e-15);  // 2 z / |z|
  CHECK(std::abs(g[1] - c128(0, 2)) < 1e-15);
}
