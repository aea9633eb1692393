// gradcheck and gradgradcheck must catch what they promise to catch: a wrong backward rule, a
// non-reentrant backward, a non-zero gradient from zero output gradients, and bad inputs.
#include "tests/engine/engine_test_util.h"

using namespace gs;
using namespace gs_test;

namespace {

using V = std::vector<Tensor>;

// x^2 * y with a selectable (right or wrong) backward.
enum class Rule { right, wrong_factor, nondeterministic, nonzero_for_zero, not_twice_differentiable };
Rule g_rule = Rule::right;
int g_calls = 0;

struct SquareTimes {
  static V forward(FunctionCtx& ctx, const V& in) {
    ctx.save_for_backward({in[0], in[1]});
    return {mul(mul(in[0], in[0]), in[1])};
  }
  static V backward(FunctionCtx& ctx, const V& g) {
    auto s = ctx.saved_tensors();
    Tensor x = s[0], y = s[1];
    Tensor gx = mul(g[0], mul(mul(x, y), 2.0));
    Tensor gy = mul(g[0], mul(x, x));
    switch (g_rule) {
      case Rule::right: break;
      case Rule::wrong_factor: gx = mul(g[0], mul(mul(x, y), 3.0)); break;
      case Rule::nondeterministic: gx = add(gx, mul(g[0], 1e-9 * ++g_calls)); break;  // zero for zero g
      case Rule::nonzero_for_zero: {
        NoGradGuard ng;
        if (sum(abs(g[0])).item<double>() == 0.0) gy = ones_like(gy);  // (2, 3): summed to 2 per y
        break;
      }
      case Rule::not_twice_differentiable: {
        // Computes the right numbers from detached values: first order is right, second is not.
        gx = mul(g[0], mul(mul(x.detach(), y.detach()), 2.0));
        gy = mul(g[0], mul(x.detach(), x.detach()));
        break;
      }
    }
    return {gx, gy};
  }
};

V square_times(const V& in) { return apply_function<SquareTimes>("square_times", in); }

// For complex z: f(z) = z * z, whose gradient is g * conj(2z). The wrong rule forgets the conj.
bool g_forget_conj = false;
struct ComplexSquare {
  static V forward(FunctionCtx& ctx, const V& in) {
    ctx.save_for_backward({in[0]});
    return {mul(in[0], in[0])};
  }
  static V backward(FunctionCtx& ctx, const V& g) {
    Tensor z = ctx.saved_tensors()[0];
    Tensor two_z = mul(z, scalar_like(z, 2.0));
    return {mul(g[0], g_forget_conj ? two_z : conj(two_z))};
  }
};

struct RuleGuard {
  explicit RuleGuard(Rule r) { g_rule = r; }
  ~RuleGuard() { g_rule = Rule::right; }
};

V inputs_xy() { return {leaf({0.5, -1.2, 0.8, 1.5, -0.3, 2.0}, {2, 3}), leaf({1.1, -0.7, 0.9})}; }

}  // namespace

TEST_CASE("gradcheck: a correct rule passes, first and second order") {
  auto in = inputs_xy();
  auto rep = gradcheck(square_times, in);
  CHECK_MESSAGE(rep.ok, rep.failure);
  CHECK(rep.failure.empty());
  CHECK(rep.max_abs_error < 1e-7);
  CHECK(rep.max_rel_error < 1e-6);
  auto rep2 = gradgradcheck(square_times, in);
  CHECK_MESSAGE(rep2.ok, rep2.failure);
  // The inputs are not modified and their .grad is not touched.
  CHECK_FALSE(in[0].grad().defined());
  CHECK(in[0].version() == 0);
}

TEST_CASE("gradcheck: a wrong rule fails with a message that locates the mismatch") {
  RuleGuard wrong(Rule::wrong_factor);
  auto rep = gradcheck(square_times, inputs_xy());
  CHECK_FALSE(rep.ok);
  CAPTURE(rep.failure);
  CHECK(has(rep.failure, "Jacobian mismatch for input 0 element 0"));
  CHECK(has(rep.failure, "analytical"));
  CHECK(has(rep.failure, "numerical"));
  CHECK(has(rep.failure, "atol 1e-05 + rtol 0.001"));
  CHECK(rep.max_abs_error > 0.1);
  // The rule is wrong only for x: y alone checks fine.
  auto in = inputs_xy();
  Tensor x_const = in[0].detach();
  auto only_y = gradcheck(square_times, {x_const, in[1]});
  CHECK_MESSAGE(only_y.ok, only_y.failure);
}

TEST_CASE("gradcheck: a backward that is not reentrant is detected") {
  RuleGuard nondet(Rule::nondeterministic);
  auto rep = gradcheck(square_times, inputs_xy());
  CHECK_FALSE(rep.ok);
  CHECK(has(rep.failure, "backward is not reentrant: two runs gave"));
  // A tolerance for nondeterminism admits it.
  GradcheckOptions tolerant;
  tolerant.nondet_tol = 1e-3;
  auto rep2 = gradcheck(square_times, inputs_xy(), tolerant);
  CHECK_MESSAGE(rep2.ok, rep2.failure);
}

TEST_CASE("gradcheck: zero output gradients must give zero input gradients") {
  RuleGuard bad(Rule::nonzero_for_zero);
  auto rep = gradcheck(square_times, inputs_xy());
  CHECK_FALSE(rep.ok);
  CAPTURE(rep.failure);
  CHECK(has(rep.failure, "zero output gradients gave a non-zero gradient (2) for differentiable input 1"));
}

TEST_CASE("gradgradcheck: a backward that is right once but not differentiable again fails") {
  RuleGuard bad(Rule::not_twice_differentiable);
  auto in = inputs_xy();
  auto first = gradcheck(square_times, in);
  CHECK_MESSAGE(first.ok, first.failure);
  auto second = gradgradcheck(square_times, in);
  CHECK_FALSE(second.ok);
  CHECK(has(second.failure, "Jacobian mismatch"));
}

TEST_CASE("gradcheck: inputs must be f64 or c128, and something must require grad") {
  Tensor x = randn({3}, {31, 3}, DType::f32);
  x.set_requires_grad(true);
  std::string msg = error_of([&] { gradcheck([](const V& in) { return V{mul(in[0], in[0])}; }, {x}); });
  CHECK(has(msg, "gradcheck: input 0 is f32 (3,) on cpu; finite differences need f64 or c128 inputs"));
  Tensor c = randn({3}, {31, 4}, DType::c64);
  c.set_requires_grad(true);
  CHECK(has(error_of([&] { gradcheck([](const V& in) { return V{mul(in[0], in[0])}; }, {c}); }),
            "input 0 is c64 (3,) on cpu"));
  // f32 inputs that do not require grad are fine (they are constants).
  Tensor y = randn({3}, {31, 5}, DType::f64);
  y.set_requires_grad(true);
  Tensor k = randn({3}, {31, 6}, DType::f32);
  auto rep = gradcheck([](const V& in) { return V{mul(in[0], to(in[1], DType::f64))}; }, {y, k});
  CHECK_MESSAGE(rep.ok, rep.failure);
  Tensor plain = f64({1, 2});
  CHECK(has(error_of([&] { gradcheck([](const V& in) { return V{mul(in[0], 2.0)}; }, {plain}); }),
            "no input requires grad, so there is nothing to check"));
}

TEST_CASE("gradcheck: complex inputs are checked as pairs of reals") {
  Tensor z = randn({4}, {31, 7}, DType::c128);
  z.set_requires_grad(true);
  auto f = [](const V& in) { return apply_function<ComplexSquare>("complex_square", in); };
  auto rep = gradcheck(f, {z});
  CHECK_MESSAGE(rep.ok, rep.failure);
  auto rep2 = gradgradcheck(f, {z});
  CHECK_MESSAGE(rep2.ok, rep2.failure);
  g_forget_conj = true;
  auto bad = gradcheck(f, {z});
  g_forget_conj = false;
  CHECK_FALSE(bad.ok);
  // d Im(y0) / d Re(z0) = 2 Im z0: the sign of the forgotten conjugate.
  CHECK(has(bad.failure, "Jacobian mismatch for input 0 element 0 (real) and output value 1"));
  // Ops mixing real and complex: |z|, real/imag views, complex(), exp.
  Tensor r = randn({4}, {31, 8}, DType::f64);
  r.set_requires_grad(true);
  auto mixed = [](const V& in) {
    Tensor w = complex(in[1], mul(in[1], in[1]));
    return V{abs(mul(in[0], w)), exp(mul(in[0], w)), imag(in[0])};
  };
  auto rep3 = gradcheck(mixed, {z, r});
  CHECK_MESSAGE(rep3.ok, rep3.failure);
}

TEST_CASE("gradcheck: multiple outputs, non-differentiable outputs, unused inputs") {
  Tensor x = randn({3}, {31, 9}, DType::f64);
  Tensor unused = randn({2}, {31, 10}, DType::f64);
  x.set_requires_grad(true);
  unused.set_requires_grad(true);
  auto f = [](const V& in) { return V{tanh(in[0]), gt(in[0], 0.0), sum(mul(in[0], in[0]))}; };
  auto rep = gradcheck(f, {x, unused});
  CHECK_MESSAGE(rep.ok, rep.failure);
  auto rep2 = gradgradcheck(f, {x, unused});
  CHECK_MESSAGE(rep2.ok, rep2.failure);
}

TEST_CASE("fresh_leaves: new leaves with the inputs' values and flags, in the input's layout or row-major") {
  const Tensor a = sample_leaf_transposed({3, 2}, {31, 11});  // non-contiguous, requires grad
  const Tensor b = randn({2}, {31, 12}, DType::f64);  // a constant
  for (LeafLayout layout : {LeafLayout::as_input, LeafLayout::contiguous}) {
    const V fresh = fresh_leaves({a, Tensor(), b}, layout);
    REQUIRE(fresh.size() == 3);
    CHECK(!fresh[1].defined());
    CHECK(fresh[0].is_leaf());
    CHECK(fresh[0].requires_grad());
    CHECK(!fresh[2].requires_grad());
    CHECK(fresh[0].storage() != a.storage());
    CHECK(fresh[0].is_contiguous() == (layout == LeafLayout::contiguous));
    CHECK(vals(fresh[0]) == vals(a));
    CHECK(vals(fresh[2]) == vals(b));
  }
}
