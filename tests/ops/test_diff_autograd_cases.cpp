// Cases found by the differential testing against PyTorch (tools/diff_autograd.py), one per
// finding: gradsphere's fix where it was wrong, or the semantics it defines where the two differ on
// purpose (engine/README.md, "Differences from PyTorch").
#include <doctest/doctest.h>

#include <vector>

#include "engine/autograd/engine.h"
#include "engine/autograd/gradcheck.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/reduce.h"
#include "ops/view.h"

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

TEST_CASE("diff_autograd: logsumexp and var keep no reference to their input (a later write does not stop backward)") {
  // torch saves the input of both and refuses backward once it is written; gradsphere's rules
  // need only what they computed, so the gradient is the one of the values the forward saw.
  for (int which = 0; which < 2; ++which) {
    CAPTURE(which);
    Tensor x = from_vector(std::vector<double>{0.5, -1, 2, 0.25}, {2, 2}).set_requires_grad();
    Tensor t = mul(x, 1.0);
    Tensor y = which == 0 ? logsumexp(t, {1}) : var(t, {1});
    Tensor want = which == 0 ? logsumexp(x, {1}) : var(x, {1});
    add_(t, 100.0);  // after the forward op ran
    Tensor g = grad({sum(y)}, {x})[0];
    Tensor g_want = grad({sum(want)}, {x})[0];
    CHECK(v(g) == v(g_want));
  }
}
