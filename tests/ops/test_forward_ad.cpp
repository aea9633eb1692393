// Forward-mode AD (engine/autograd/forward_ad.h) and the function transforms (ops/functional.h):
// tangents against closed forms, PyTorch's view and in-place semantics, levels, grad modes, the
// kinds of rule, errors, and Jacobians / Hessians against each other and against closed forms.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "ops/ops.h"
#include "tests/test_util.h"

namespace {

using gs::Tensor;
namespace fad = gs::forward_ad;

Tensor vec(std::vector<double> v) { return gs::from_vector(v, {static_cast<int64_t>(v.size())}); }

void check_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-12) {
  REQUIRE(t.defined());
  auto got = gs::contiguous_copy(t, true).to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol));
  }
}

using gs_test::error_of;

}  // namespace

TEST_CASE("forward AD: jvp of a composite equals its closed form, with and without reverse mode") {
  const std::vector<double> xs = {0.3, -1.2, 2.0}, vs = {1.0, 0.5, -2.0};
  auto f = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gs::add(gs::mul(gs::sin(in[0]), in[0]), gs::div(gs::exp(in[0]), 2.0))};
  };
  std::vector<double> want;
  for (size_t i = 0; i < xs.size(); ++i)
    want.push_back((std::cos(xs[i]) * xs[i] + std::sin(xs[i]) + std::exp(xs[i]) / 2) * vs[i]);
  for (bool requires_grad : {false, true}) {
    CAPTURE(requires_grad);
    Tensor x = vec(xs);
    if (requires_grad) x.set_requires_grad(true);
    auto r = gs::jvp(f, {x}, {vec(vs)});
    check_values(r.tangents[0], want);
    CHECK(r.outputs[0].to_vector<double>()[1] == doctest::Approx(std::sin(-1.2) * -1.2 + std::exp(-1.2) / 2));
  }
  // Under no_grad and inference mode too (as torch: they do not stop forward AD).
  {
    gs::NoGradGuard ng;
    check_values(gs::jvp(f, {vec(xs)}, {vec(vs)}).tangents[0], want);
  }
  {
    gs::InferenceModeGuard im;
    check_values(gs::jvp(f, {vec(xs)}, {vec(vs)}).tangents[0], want);
  }
}

TEST_CASE("forward AD: complex tangents follow the complex derivative") {
  using gs::c128;
  Tensor z = gs::from_vector(std::vector<c128>{{1, 2}, {-0.5, 0.25}}, {2});
  Tensor w = gs::from_vector(std::vector<c128>{{0.5, -1}, {2, 1}}, {2});
  Tensor tz = gs::from_vector(std::vector<c128>{{1, 0}, {0, 1}}, {2});
  Tensor tw = gs::from_vector(std::vector<c128>{{0, -1}, {3, 0}}, {2});
  // d(z * w) = tz w + z tw; d(exp(z)) = exp(z) tz (holomorphic)
  auto r = gs::jvp([](const std::vector<Tensor>& in) { return std::vector<Tensor>{gs::mul(in[0], in[1]), gs::exp(in[0])}; },
                   {z, w}, {tz, tw});
  auto prod = r.tangents[0].to_vector<c128>(), ex = r.tangents[1].to_vector<c128>();
  auto zv = z.to_vector<c128>(), wv = w.to_vector<c128>(), tzv = tz.to_vector<c128>(), twv = tw.to_vector<c128>();
  for (size_t i = 0; i < 2; ++i) {
    c128 want = tzv[i] * wv[i] + zv[i] * twv[i], want_exp = std::exp(zv[i]) * tzv[i];
    CHECK(std::abs(prod[i] - want) < 1e-12);
    CHECK(std::abs(ex[i] - want_exp) < 1e-12);
  }
}

TEST_CASE("forward AD: a view's tangent is the view of its base's, and in-place writes update it in place") {
  fad::DualLevel level;
  Tensor t = gs::from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor x = fad::make_dual(gs::zeros({2, 3}, gs::DType::f64), t);
  Tensor row = gs::select(x, 0, 1);
  check_values(fad::tangent_of(row), {4, 5, 6});
  Tensor col = gs::transpose(x, 0, 1);
  check_values(fad::tangent_of(col), {1, 4, 2, 5, 3, 6});
  // A write into the view doubles the base's tangent at the view's positions only.
  gs::mul_(row, 2.0);
  check_values(fad::tangent_of(x), {1, 2, 3, 8, 10, 12});
  // Adding a dual into the base adds its tangent; the earlier view sees it.
  Tensor y = fad::make_dual(gs::ones({2, 3}, gs::DType::f64), gs::full({2, 3}, 0.5, gs::DType::f64));
  gs::add_(x, y);
  check_values(fad::tangent_of(row), {8.5, 10.5, 12.5});
  // unpack_dual's primal has no tangent, not even its base's.
  auto d = fad::unpack_dual(x);
  CHECK_FALSE(fad::tangent_of(d.primal).defined());
  check_values(d.tangent, {1.5, 2.5, 3.5, 8.5, 10.5, 12.5});
}

TEST_CASE("forward AD: a view of a plain tensor written with a dual gives its base a tangent") {
  fad::DualLevel level;
  Tensor base = gs::zeros({4}, gs::DType::f64);
  Tensor part = gs::slice(base, 0, 1, 3);
  Tensor src = fad::make_dual(vec({7, 8}), vec({1, -1}));
  gs::copy_(part, src);
  check_values(fad::tangent_of(base), {0, 1, -1, 0});
  check_values(fad::tangent_of(part), {1, -1});
}

TEST_CASE("forward AD: tangents vanish with their level; levels do not nest; bad tangents are refused") {
  Tensor x = vec({1, 2});
  Tensor kept;
  {
    fad::DualLevel level;
    kept = gs::mul(fad::make_dual(x, vec({1, 1})), 3.0);
    CHECK(fad::tangent_of(kept).defined());
    CHECK(error_of([] { fad::DualLevel inner; }).find("levels do not nest") != std::string::npos);
    CHECK(error_of([&] { fad::make_dual(x, vec({1, 2, 3})); }).find("must match its primal") != std::string::npos);
    CHECK(error_of([&] { fad::make_dual(x, gs::ones({2}, gs::DType::f32)); }).find("f32 (2,)") != std::string::npos);
  }
  CHECK_FALSE(fad::tangent_of(kept).defined());
  CHECK(error_of([&] { fad::make_dual(x, x); }).find("no dual level is open") != std::string::npos);
  auto id = [](const std::vector<Tensor>& in) { return in; };
  CHECK(error_of([&] { gs::jvp(id, {x}, {}); }).find("one tangent per primal") != std::string::npos);
  CHECK(error_of([&] { gs::jvp(id, {x}, {vec({1, 2, 3})}); }).find("tangent 0 must have the shape") != std::string::npos);
}

TEST_CASE("forward AD: an output that does not depend on the tangent's input gets a zero tangent (as torch)") {
  Tensor x = vec({1, 2}), c = vec({3, 4});
  auto r = gs::jvp([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{gs::mul(c, 2.0), gs::sign(in[0])}; },
                   {x}, {vec({1, 1})});
  check_values(r.tangents[0], {0, 0});
  check_values(r.tangents[1], {0, 0});
}

TEST_CASE("forward AD: each op's tangent comes from a view, written, diagonal or derived rule") {
  fad::DualLevel level;
  Tensor x = fad::make_dual(gs::from_vector(std::vector<double>{0.1, 0.2, 0.3, 0.4}, {2, 2}), gs::ones({2, 2}, gs::DType::f64));
  fad::reset_rule_counts();
  gs::reshape(x, {4});
  gs::mul(x, x);
  gs::exp(x);
  gs::softmax(x, 1);
  auto c = fad::rule_counts();
  CHECK(c.view == 1);
  CHECK(c.written == 1);
  CHECK(c.diagonal == 1);
  CHECK(c.derived == 1);
  CHECK(fad::rule_kind("mul") == "written");
  CHECK(fad::rule_kind("exp") == "diagonal");
  CHECK(fad::rule_kind("softmax") == "derived");
  // softmax's derived tangent: s * (t - sum(s * t)) row by row, here t = 1 everywhere: zero.
  check_values(fad::tangent_of(gs::softmax(x, 1)), {0, 0, 0, 0}, 1e-12);
}

namespace {
struct OnceDifferentiableSquare {
  static std::vector<Tensor> forward(gs::FunctionCtx& ctx, const std::vector<Tensor>& in) {
    ctx.save_for_backward({in[0]});
    ctx.set_once_differentiable();
    return {gs::mul(in[0], in[0])};
  }
  static std::vector<Tensor> backward(gs::FunctionCtx& ctx, const std::vector<Tensor>& g) {
    return {gs::mul(gs::mul(g[0], ctx.saved_tensors()[0]), 2.0)};
  }
};
struct Cube {
  static std::vector<Tensor> forward(gs::FunctionCtx& ctx, const std::vector<Tensor>& in) {
    ctx.save_for_backward({in[0]});
    return {gs::mul(gs::mul(in[0], in[0]), in[0])};
  }
  static std::vector<Tensor> backward(gs::FunctionCtx& ctx, const std::vector<Tensor>& g) {
    Tensor x = ctx.saved_tensors()[0];
    return {gs::mul(gs::mul(g[0], gs::mul(x, x)), 3.0)};
  }
};
}  // namespace

TEST_CASE("forward AD: custom functions get a derived JVP; a once_differentiable one is an error naming it") {
  auto cube = [](const std::vector<Tensor>& in) { return gs::apply_function<Cube>("cube", in); };
  check_values(gs::jvp(cube, {vec({2, -1})}, {vec({1, 0.5})}).tangents[0], {12, 1.5});
  auto once = [](const std::vector<Tensor>& in) { return gs::apply_function<OnceDifferentiableSquare>("once_square", in); };
  const std::string e = error_of([&] { gs::jvp(once, {vec({2})}, {vec({1})}); });
  CHECK(e.find("'once_square'") != std::string::npos);
  CHECK(e.find("has no JVP rule") != std::string::npos);
}

TEST_CASE("function transforms: jacfwd equals jacrev and the closed form") {
  // f(a, b) = (a * b, sum(a)^2): d/da (a*b) = diag(b), d/db = diag(a); d/da sum(a)^2 = 2 sum(a)
  auto f = [](const std::vector<Tensor>& in) {
    Tensor s = gs::sum(in[0]);
    return std::vector<Tensor>{gs::mul(in[0], in[1]), gs::mul(s, s)};
  };
  Tensor a = vec({1, 2, 3}), b = vec({-1, 0.5, 2});
  auto fwd = gs::jacfwd(f, {a, b});
  auto rev = gs::jacrev(f, {a, b});
  REQUIRE(fwd.size() == 2);
  CHECK(fwd[0][0].sizes() == gs::Shape{3, 3});
  CHECK(fwd[1][0].sizes() == gs::Shape{3});
  check_values(fwd[0][0], {-1, 0, 0, 0, 0.5, 0, 0, 0, 2});
  check_values(fwd[0][1], {1, 0, 0, 0, 2, 0, 0, 0, 3});
  check_values(fwd[1][0], {12, 12, 12});
  check_values(fwd[1][1], {0, 0, 0});
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 2; ++j) check_values(rev[i][j], gs::contiguous_copy(fwd[i][j], true).to_vector<double>());
}

TEST_CASE("function transforms: hessian and hvp (forward-over-reverse) equal the closed form and reverse-over-reverse") {
  // f(x) = sum(exp(x) * x) + x0 * x1: H = diag(exp(x) (x + 2)) + [[0,1],[1,0]] on the first two.
  auto f = [](const Tensor& x) {
    return gs::add(gs::sum(gs::mul(gs::exp(x), x)), gs::mul(gs::select(x, 0, 0), gs::select(x, 0, 1)));
  };
  const std::vector<double> xs = {0.5, -0.25, 1.5};
  Tensor x = vec(xs);
  std::vector<double> want(9, 0.0);
  for (int i = 0; i < 3; ++i) want[i * 3 + i] = std::exp(xs[i]) * (xs[i] + 2);
  want[1] = want[3] = 1.0;
  Tensor h = gs::hessian(f, x);
  CHECK(h.sizes() == gs::Shape{3, 3});
  check_values(h, want, 1e-12);
  Tensor v = vec({1, -2, 0.5});
  Tensor hv = gs::hvp(f, x, v);
  // reverse-over-reverse: grad(<grad f, v>)
  Tensor leaf = x.detach().set_requires_grad(true);
  Tensor g = gs::grad({f(leaf)}, {leaf}, {}, {.create_graph = true})[0];
  Tensor hv_rr = gs::grad({gs::sum(gs::mul(g, v))}, {leaf})[0];
  check_values(hv, hv_rr.to_vector<double>(), 1e-12);
  // A function that does not depend on x: zeros (as torch.func).
  check_values(gs::hvp([](const Tensor&) { return gs::full({}, 2.0, gs::DType::f64); }, x, v), {0, 0, 0});
}

TEST_CASE("forward AD: tangents are differentiable (reverse-over-forward)") {
  // tangent of sin(x) along v is cos(x) v; its gradient with respect to x is -sin(x) v.
  Tensor x = vec({0.3, 1.1}).set_requires_grad(true);
  Tensor v = vec({2, -1});
  Tensor tangent;
  {
    fad::DualLevel level;
    tangent = fad::tangent_of(gs::sin(fad::make_dual(x, v)));
  }
  REQUIRE(tangent.requires_grad());
  Tensor g = gs::grad({gs::sum(tangent)}, {x})[0];
  check_values(g, {-std::sin(0.3) * 2, -std::sin(1.1) * -1});
}

TEST_CASE("forward AD: an in-place write after saving is still the version error in backward") {
  fad::DualLevel level;
  Tensor a = vec({1, 2}).set_requires_grad(true);
  Tensor d = fad::make_dual(a, vec({1, 1}));
  Tensor b = gs::mul(d, 2.0);
  Tensor c = gs::mul(b, b);
  gs::add_(b, 1.0);
  CHECK(error_of([&] { gs::sum(c).backward(); }).find("modified by an in-place operation") != std::string::npos);
}

namespace {
// x^2 with a correct backward; its written JVP (registered below under its node name) is wrong.
struct SquareWithWrongJvp {
  static std::vector<Tensor> forward(gs::FunctionCtx& ctx, const std::vector<Tensor>& in) {
    ctx.save_for_backward({in[0]});
    return {gs::mul(in[0], in[0])};
  }
  static std::vector<Tensor> backward(gs::FunctionCtx& ctx, const std::vector<Tensor>& g) {
    return {gs::mul(gs::mul(g[0], ctx.saved_tensors()[0]), 2.0)};
  }
};
}  // namespace

TEST_CASE("jvpcheck: fails on a wrong JVP rule, and passes the derived one") {
  auto right = [](const std::vector<Tensor>& in) { return gs::apply_function<SquareWithWrongJvp>("square_derived", in); };
  Tensor x = vec({0.5, -1.5, 2.0}).set_requires_grad(true);
  CHECK(gs::jvpcheck(right, {x}).ok);
  fad::register_jvp_rule("square_wrong_jvp", [](const std::vector<Tensor>& in, const std::vector<Tensor>&,
                                                const std::vector<Tensor>& t) {
    return std::vector<Tensor>{gs::mul(gs::mul(t[0], in[0]), 3.0)};  // 3 x t instead of 2 x t
  });
  auto wrong = [](const std::vector<Tensor>& in) { return gs::apply_function<SquareWithWrongJvp>("square_wrong_jvp", in); };
  const auto rep = gs::jvpcheck(wrong, {x});
  CHECK_FALSE(rep.ok);
  CHECK(rep.failure.find("JVP mismatch at output value 0") != std::string::npos);
  CHECK(rep.detail == "view 0, written 1, diagonal 0, derived 0");
}

TEST_CASE("forward AD: regressions found by diff_autograd --jvp against torch.func") {
  {
    // add with one tangent gives the output its own tangent: an in-place write on the output
    // must not change the input's.
    fad::DualLevel level;
    Tensor x = fad::make_dual(vec({-0.5}), vec({1}));
    Tensor y = gs::sigmoid(x);
    Tensor z = gs::add(y, 0.25);
    const double dy = fad::tangent_of(y).to_vector<double>()[0];
    gs::mul_(z, 2.0);
    CHECK(fad::tangent_of(y).to_vector<double>()[0] == dy);
    CHECK(fad::tangent_of(z).to_vector<double>()[0] == doctest::Approx(2 * dy));
  }
  {
    // std of a constant line: tangent 0 (torch's), not 0 / 0.
    auto r = gs::jvp([](const std::vector<Tensor>& in) { return std::vector<Tensor>{gs::std(in[0], {0}, 1, false)}; },
                     {vec({0.5, 0.5})}, {vec({0.25, -1})});
    CHECK(r.tangents[0].to_vector<double>()[0] == 0.0);
  }
  {
    // H v through an in-place write into a view (forward-over-reverse: the tangents carry history,
    // and the view's tangent must still alias its base's). y = atan(x); y[None] += w;
    // loss = sum(y * y); v = (0 for x, 1 for w): H v = (2 / (1 + x^2), 2), torch: (1.6, 2).
    Tensor x = vec({0.5}).set_requires_grad(true), w = gs::from_vector(std::vector<double>{0.25}, {1, 1}).set_requires_grad(true);
    fad::DualLevel level;
    Tensor xd = fad::make_dual(x, vec({0})), wd = fad::make_dual(w, gs::ones({1, 1}, gs::DType::f64));
    Tensor y = gs::atan(xd);
    Tensor yv = gs::unsqueeze(y, 0);
    gs::add_(yv, wd);
    Tensor loss = gs::sum(gs::mul(y, y));
    auto g = gs::grad({loss}, {x, w}, {}, {.create_graph = true});
    CHECK(fad::tangent_of(g[0]).to_vector<double>()[0] == doctest::Approx(2.0 / (1 + 0.25)));
    CHECK(fad::tangent_of(g[1]).to_vector<double>()[0] == doctest::Approx(2.0));
  }
}
