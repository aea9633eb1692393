// Cases found by the differential testing against PyTorch (tools/diff_autograd.py), one per
// finding: gradsphere's fix where it was wrong, or the semantics it defines where the two differ on
// purpose (engine/README.md, "Differences from PyTorch").
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/autograd/engine.h"
#include "engine/autograd/gradcheck.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/reduce.h"
#include "ops/view.h"
#include "tests/test_util.h"

using namespace gs;

namespace {
std::vector<double> v(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("diff_autograd: view_as_complex ignores the stride of a dim of size 1 (a transposed (2, 1) leaf)") {
  // x.T has sizes (1, 2) and strides (1, 1): torch views it; gradsphere refused the odd stride.
  Tensor x = from_vector(std::vector<double>{3, -4}, {2, 1}).set_requires_grad();
  Tensor z = view_as_complex(transpose(x, 0, 1));
  REQUIRE(z.sizes() == Shape{1});
  CHECK(z.to_vector<c128>() == std::vector<c128>{{3, -4}});
  CHECK(z.is_view());
  sum(abs(z)).backward();  // d|z|/dx = x / |x|
  CHECK(v(x.grad())[0] == doctest::Approx(0.6).epsilon(1e-15));
  CHECK(v(x.grad())[1] == doctest::Approx(-0.8).epsilon(1e-15));
  auto r = gradcheck([](const std::vector<Tensor>& in) { return std::vector<Tensor>{abs(view_as_complex(transpose(in[0], 0, 1)))}; },
                     {randn({2, 1}, {5, 1}, DType::f64).set_requires_grad()});
  CHECK_MESSAGE(r.ok, r.failure);
}

TEST_CASE("diff_autograd: an operand broadcast from part of the written tensor is read before the write") {
  // t += -0.5 * t[:, :1]: torch reads column 0 while it writes it, so its later columns see the new
  // value; gradsphere adds the column's value from before the write to every column.
  Tensor x = from_vector(std::vector<double>{2, 4, 6, 8, 10, 12}, {2, 3}).set_requires_grad();
  Tensor t = mul(x, 1.0);
  add_(t, narrow(t, 1, 0, 1), -0.5);
  CHECK(v(t) == std::vector<double>{1, 3, 5, 4, 6, 8});
  // loss = sum(t * w): d/dx[i][j] = w[i][j] - 0.5 * (j == 0) * sum_j' w[i][j'].
  Tensor w = from_vector(std::vector<double>{1, 10, 100, 1000, 10000, 100000}, {2, 3});
  sum(mul(t, w)).backward();
  CHECK(v(x.grad()) == std::vector<double>{1 - 55.5, 10, 100, 1000 - 55500, 10000, 100000});
}

TEST_CASE("diff_autograd: a view taken before its base gained history can be written in place") {
  // a is a constant when v = flatten(a) is taken; a *= x gives it history; v += y rebases a again.
  // torch 2.14 refuses the write ("a leaf Variable that requires grad") unless v.grad_fn is read
  // first; gradsphere regenerates the view's history as torch documents.
  Tensor a = from_vector(std::vector<double>{1, 2, 3, 4}, {2, 2});
  Tensor va = flatten(a, 0, 1);
  Tensor x = from_vector(std::vector<double>{5, 6, 7, 8}, {2, 2}).set_requires_grad();
  Tensor y = from_vector(std::vector<double>{1, 1, 1, 1}, {4}).set_requires_grad();
  mul_(a, x);
  add_(va, y);
  CHECK(v(a) == std::vector<double>{6, 13, 22, 33});
  Tensor w = from_vector(std::vector<double>{1, 10, 100, 1000}, {2, 2});
  sum(mul(a, w)).backward();
  CHECK(v(x.grad()) == std::vector<double>{1, 20, 300, 4000});  // w * a_before
  CHECK(v(y.grad()) == std::vector<double>{1, 10, 100, 1000});
}

TEST_CASE("diff_autograd: elementwise results are contiguous, so a later flatten is a view (torch keeps the layout)") {
  // sigmoid of a permuted tensor: torch returns the permuted layout (flatten then copies), gradsphere
  // a contiguous tensor (flatten is a view and sees a later write). torch leaves the choice open.
  Tensor p = permute(randn({4, 1, 4}, {6, 1}, DType::f64), {2, 0, 1});
  Tensor s = sigmoid(p);
  CHECK(s.is_contiguous());
  Tensor f = flatten(s, 0, 2);
  CHECK(f.is_view());
  add_(s, 1.0);
  CHECK(v(f) == v(reshape(s, {16})));
}

TEST_CASE("diff_autograd: conj returns a new tensor (torch.conj_physical), not a conjugate-bit view") {
  Tensor z = complex(from_vector(std::vector<double>{1, 2}, {2}), from_vector(std::vector<double>{3, 4}, {2}));
  Tensor c = conj(z);
  CHECK_FALSE(c.is_view());
  mul_(c, 2.0);  // torch: the write would reach z through the view
  CHECK(z.to_vector<c128>() == std::vector<c128>{{1, 3}, {2, 4}});
  CHECK(c.to_vector<c128>() == std::vector<c128>{{2, -6}, {4, -8}});
}

TEST_CASE("diff_autograd: gradients at the edges of the domain follow torch (NaN, infinities, subnormals, signed zeros)") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  auto grad_of = [](std::vector<double> x, const std::function<Tensor(const Tensor&)>& f) {
    Tensor t = from_vector(x, {static_cast<int64_t>(x.size())}).set_requires_grad();
    return v(grad({sum(f(t))}, {t})[0]);
  };
  auto same = [](const std::vector<double>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      CAPTURE(i);
      if (std::isnan(want[i])) CHECK(std::isnan(got[i]));
      else CHECK((got[i] == want[i] && std::signbit(got[i]) == std::signbit(want[i])));
    }
  };
  // relu(NaN) is NaN (it was 0: a NaN hidden), and passes its gradient (threshold_backward).
  CHECK(std::isnan(v(relu(from_vector(std::vector<double>{nan}, {1})))[0]));
  same(grad_of({nan, -1, 2}, [](const Tensor& t) { return relu(t); }), {1, 0, 1});
  // max / min of a slice holding NaN: every gradient of the slice is NaN (torch.amax), not 0.
  same(grad_of({1, nan}, [](const Tensor& t) { return max(t); }), {nan, nan});
  same(grad_of({1, nan}, [](const Tensor& t) { return min(t); }), {nan, nan});
  // logsumexp: g exp(x - lse), so a finite element beside +inf gets 0 (it was NaN).
  same(grad_of({inf, 1e300}, [](const Tensor& t) { return logsumexp(t); }), {nan, 0});
  same(grad_of({-inf, 0}, [](const Tensor& t) { return logsumexp(t); }), {0, 1});
  // var: 2 (x - mean) / dof without the mean's (zero) term: -inf beside +inf (it was NaN).
  same(grad_of({0, inf}, [](const Tensor& t) { return var(t); }), {-inf, nan});
  // var of equal huge values is 0, and so is its gradient (the mean of six copies of 3.9e299
  // rounds; squaring that one-ulp error overflowed to inf).
  same(v(var(from_vector(std::vector<double>(6, 3.9e299), {6}))), {0});
  same(grad_of(std::vector<double>(6, 3.9e299), [](const Tensor& t) { return var(t); }), std::vector<double>(6, 0.0));
  // d(a/b)/db = -(a / b) / b: 0 at a = 0 for a subnormal b (b^2 underflowed to 0 / 0 = NaN).
  Tensor a = from_vector(std::vector<double>{0.0}, {1});
  Tensor b = from_vector(std::vector<double>{1e-310}, {1}).set_requires_grad();
  same(v(grad({sum(div(a, b))}, {b})[0]), {-0.0});
  // pow(x, 0.5) is sqrt(x) and pow(x, -0.5) is 1 / sqrt(x), as torch's kernel: sqrt(-0) = -0,
  // sqrt(-inf) = NaN (std::pow gives +0 and +inf), and the gradient at -0 is -inf.
  same(v(pow(from_vector(std::vector<double>{-0.0, -inf, 4}, {3}), 0.5)), {-0.0, nan, 2});
  same(grad_of({-0.0}, [](const Tensor& t) { return pow(t, 0.5); }), {-inf});
}

TEST_CASE("diff_autograd: logsumexp and var save their input as torch does (a later write is refused at backward)") {
  for (int which = 0; which < 2; ++which) {
    CAPTURE(which);
    Tensor x = from_vector(std::vector<double>{0.5, -1, 2, 0.25}, {2, 2}).set_requires_grad();
    Tensor t = mul(x, 1.0);
    Tensor y = which == 0 ? logsumexp(t, {1}) : var(t, {1});
    add_(t, 100.0);
    const std::string err = gs_test::error_of([&] { sum(y).backward(); });
    CHECK(gs_test::contains(err, which == 0 ? "input 0 of 'logsumexp'" : "input 0 of 'var'"));
  }
}

TEST_CASE("diff_autograd: complex() keeps no reference to its inputs (a later write does not stop backward)") {
  // torch saves both inputs of complex() and refuses backward once one is written; gradsphere's
  // needs neither (its gradient is g's real and imaginary parts), so backward runs and gives the
  // gradient of the values the forward saw.
  Tensor x = from_vector(std::vector<double>{1, 2}, {2}).set_requires_grad();
  Tensor re = mul(x, 1.0), im = mul(x, 2.0);
  Tensor z = complex(re, im);
  add_(re, 5.0);
  sum(view_as_real(z)).backward();  // d/dx (x + 2x) = 3
  CHECK(v(x.grad()) == std::vector<double>{3, 3});
}

TEST_CASE("diff_autograd: where torch gives NaN through 0 * inf, gradsphere's selecting rules give 0 (documented)") {
  const double inf = std::numeric_limits<double>::infinity();
  // An infinite gradient reaching max: the element that is not the maximum gets 0 here (torch.amax
  // multiplies its mask into g / count: 0 * inf = NaN).
  Tensor x = from_vector(std::vector<double>{1, 2}, {2}).set_requires_grad();
  Tensor g = grad({max(x, {0})}, {x}, {from_vector(std::vector<double>{inf}, {})})[0];
  CHECK(v(g) == std::vector<double>{0, inf});
  // A complex product of infinities is an infinity (C99 Annex G, std::complex); torch's is NaN + inf i.
  Tensor z = complex(from_vector(std::vector<double>{inf}, {1}), from_vector(std::vector<double>{inf}, {1}));
  const c128 sq = mul(z, z).to_vector<c128>()[0];
  CHECK((std::isinf(sq.real()) || std::isinf(sq.imag())));
}

TEST_CASE("diff_autograd: second derivatives at isolated edge points (documented differences)") {
  // pow(a, b) at a = 0: the rule's untaken branch is evaluated at log 1, so d2/da2 of a^2 at 0 is 2
  // (torch: NaN); GELU's second derivative at 1e300 is 0 (torch: NaN, phi(x) (2 - x^2) as 0 * inf).
  auto second = [](double a0, const std::function<Tensor(const Tensor&)>& f) {
    Tensor a = from_vector(std::vector<double>{a0}, {1}).set_requires_grad();
    GradOptions keep;
    keep.create_graph = true;
    Tensor g = grad({sum(f(a))}, {a}, {}, keep)[0];
    return v(grad({sum(g)}, {a})[0])[0];
  };
  const Tensor two = from_vector(std::vector<double>{2}, {1});
  CHECK(second(0.0, [&](const Tensor& a) { return pow(a, two); }) == 2.0);
  CHECK(second(1e300, [](const Tensor& a) { return gelu(a); }) == 0.0);
}
