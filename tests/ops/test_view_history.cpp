// Views whose base changes after they were taken (ops/view_history.cpp and the regeneration in
// engine/autograd/record.cpp): PyTorch's semantics, checked against the same computation written
// without in-place ops, for every view kind and add_, mul_, copy_ on the base.
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/tensor_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using gs_test::error_of;
using gs_test::max_abs_diff;

namespace {

struct ViewKind {
  std::string name;
  DType base_dtype;
  Shape base_shape;
  std::function<Tensor(const Tensor&)> view;
};

const std::vector<ViewKind>& view_kinds() {
  static const std::vector<ViewKind> kinds = {
      {"select", DType::f64, {3, 4}, [](const Tensor& b) { return select(b, 0, 0); }},
      {"slice with step", DType::f64, {3, 4}, [](const Tensor& b) { return slice(b, 1, 0, 4, 2); }},
      {"narrow", DType::f64, {3, 4}, [](const Tensor& b) { return narrow(b, 0, 1, 2); }},
      {"transpose", DType::f64, {3, 4}, [](const Tensor& b) { return transpose(b, 0, 1); }},
      {"permute", DType::f64, {2, 3, 2}, [](const Tensor& b) { return permute(b, {2, 0, 1}); }},
      {"expand", DType::f64, {1, 4}, [](const Tensor& b) { return expand(b, {3, 4}); }},
      {"reshape", DType::f64, {3, 4}, [](const Tensor& b) { return reshape(b, {2, 6}); }},
      {"flatten", DType::f64, {3, 4}, [](const Tensor& b) { return flatten(b); }},
      {"squeeze", DType::f64, {1, 4}, [](const Tensor& b) { return squeeze(b, 0); }},
      {"unsqueeze", DType::f64, {3, 4}, [](const Tensor& b) { return unsqueeze(b, 1); }},
      {"split piece", DType::f64, {4, 3}, [](const Tensor& b) { return split(b, 2, 0)[1]; }},
      {"real", DType::c128, {3, 2}, [](const Tensor& b) { return real(b); }},
      {"imag", DType::c128, {3, 2}, [](const Tensor& b) { return imag(b); }},
      {"view_as_real", DType::c128, {3, 2}, [](const Tensor& b) { return view_as_real(b); }},
      {"view_as_complex", DType::f64, {3, 2}, [](const Tensor& b) { return view_as_complex(b); }},
  };
  return kinds;
}

struct InplaceKind {
  std::string name;
  std::function<void(Tensor&, const Tensor&)> write;         // in place on the base
  std::function<Tensor(const Tensor&, const Tensor&)> same;  // the same, out of place
};

const std::vector<InplaceKind>& inplace_kinds() {
  static const std::vector<InplaceKind> kinds = {
      {"add_", [](Tensor& b, const Tensor& x) { add_(b, x); }, [](const Tensor& b, const Tensor& x) { return add(b, x); }},
      {"mul_", [](Tensor& b, const Tensor& x) { mul_(b, x); }, [](const Tensor& b, const Tensor& x) { return mul(b, x); }},
      {"copy_", [](Tensor& b, const Tensor& x) { copy_(b, x); }, [](const Tensor& b, const Tensor&) {
         return Tensor();  // replaced by x itself below
       }},
  };
  return kinds;
}

// A real scalar loss of a view (complex views through their real and imaginary parts).
Tensor loss_of(const Tensor& v, const Tensor& w) {
  Tensor r = is_complex(v.dtype()) ? add(real(v), mul(imag(v), 2.0)) : v;
  return sum(mul(r, w));
}

}  // namespace

TEST_CASE("view history: a view taken while its base was a plain tensor sees history gained later") {
  // The case of the issue: v = select(buf, 0, 0); add_(buf, x); loss = sum(v * 3 + x).
  Tensor buf = zeros({3, 4}, DType::f64);
  Tensor x = ones({3, 4}, DType::f64).set_requires_grad();
  Tensor v = select(buf, 0, 0);
  add_(buf, x);
  sum(add(mul(v, 3.0), x)).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{10, 10, 10, 10, 1, 1, 1, 1, 1, 1, 1, 1});

  for (const auto& vk : view_kinds())
    for (const auto& ik : inplace_kinds())
      for (bool base_has_history : {false, true}) {
        CAPTURE(vk.name);
        CAPTURE(ik.name);
        CAPTURE(base_has_history);
        const DType dt = vk.base_dtype;
        Tensor init = cast_copy(randn(vk.base_shape, {3, 1}, DType::f64), dt);
        Tensor xv = cast_copy(randn(vk.base_shape, {3, 2}, DType::f64), dt);
        Tensor b0 = contiguous_copy(init, true).set_requires_grad();
        // In place: the view is taken before the write.
        Tensor x1 = contiguous_copy(xv, true).set_requires_grad();
        Tensor leaf1 = contiguous_copy(b0.detach(), true).set_requires_grad();
        Tensor base1 = base_has_history ? mul(leaf1, 1.0) : contiguous_copy(init, true);
        Tensor v1 = vk.view(base1);
        ik.write(base1, x1);
        Tensor wv = randn(v1.sizes(), {3, 4}, DType::f64);
        loss_of(v1, wv).backward();
        // Out of place: the same values, through ordinary ops.
        Tensor x2 = contiguous_copy(xv, true).set_requires_grad();
        Tensor leaf2 = contiguous_copy(b0.detach(), true).set_requires_grad();
        Tensor base2 = base_has_history ? mul(leaf2, 1.0) : contiguous_copy(init, true);
        Tensor after = ik.name == "copy_" ? add(x2, mul(base2, 0.0)) : ik.same(base2, x2);
        Tensor v2 = vk.view(after);
        loss_of(v2, wv).backward();
        REQUIRE(x1.grad().defined());
        CHECK(max_abs_diff(x1.grad(), x2.grad()) < 1e-12);
        if (is_complex(dt)) CHECK(max_abs_diff(imag(x1.grad()), imag(x2.grad())) < 1e-12);
        if (base_has_history) {
          REQUIRE(leaf1.grad().defined() == leaf2.grad().defined());
          if (leaf2.grad().defined()) CHECK(max_abs_diff(leaf1.grad(), leaf2.grad()) < 1e-12);
        }
      }
}

TEST_CASE("view history: regenerated views are differentiable twice, and detached aliases stay constants") {
  // gradcheck of x -> view of (y = x * 2 with y += x in place), the view taken before the write.
  auto f = [](const std::vector<Tensor>& in) {
    Tensor y = mul(in[0], 2.0);
    Tensor v = transpose(y, 0, 1);
    mul_(y, in[0]);
    return std::vector<Tensor>{mul(v, v)};
  };
  Tensor x = randn({3, 2}, {8, 1}, DType::f64).set_requires_grad();
  auto r1 = gradcheck(f, {x});
  CHECK_MESSAGE(r1.ok, r1.failure);
  auto r2 = gradgradcheck(f, {x});
  CHECK_MESSAGE(r2.ok, r2.failure);
  // A detach() alias never regenerates: it is a constant, as in torch.
  Tensor buf = zeros({3}, DType::f64);
  Tensor d = buf.detach();
  Tensor xx = ones({3}, DType::f64).set_requires_grad();
  add_(buf, xx);
  CHECK_FALSE(mul(d, 2.0).requires_grad());
  // A view made under no_grad stays a constant too.
  Tensor buf2 = zeros({3}, DType::f64);
  Tensor nv;
  {
    NoGradGuard ng;
    nv = select(buf2, 0, 1);
  }
  add_(buf2, xx);
  CHECK_FALSE(mul(nv, 2.0).requires_grad());
}

TEST_CASE("view history: a view of a parameter after an optimizer step follows the parameter") {
  Tensor p = from_vector(std::vector<double>{1, 2, 3}).set_requires_grad();
  Tensor v = slice(p, 0, 1, 3);
  {
    NoGradGuard ng;
    mul_(p, 2.0);  // a step
  }
  sum(mul(v, 3.0)).backward();  // torch: the view regenerates from p
  CHECK(p.grad().to_vector<double>() == std::vector<double>{0, 3, 3});
  CHECK(v.to_vector<double>() == std::vector<double>{4, 6});
}
