// Forward-mode AD's rules for the ops of this folder (engine/autograd/forward_ad.h says how a
// tangent is produced). Every op gets a JVP: views alias their input's tangent, the ops listed here
// have a written or a diagonal rule, and every other op's is derived from its VJP rule. Which ops
// are which: ops/NOTES.md "Forward-mode AD"; `gradsphere gradcheck` prints each op's kind.
#include "engine/autograd/forward_ad.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/view.h"

namespace gs {
namespace {

using V = std::vector<Tensor>;

// Re(sum(conj(a) * b)): the real pairing under which a VJP is the adjoint of its JVP.
Tensor real_dot(const Tensor& a, const Tensor& b) {
  Tensor p = is_complex(a.dtype()) || is_complex(b.dtype()) ? real(mul(conj(a), b)) : mul(a, b);
  return sum(p);
}

// t, or nothing when undefined: the term of an input without a tangent drops out.
Tensor plus(const Tensor& acc, const Tensor& term) {
  if (!term.defined()) return acc;
  return acc.defined() ? add(acc, term) : term;
}

// A broadcast op's tangent has the output's shape even when only a smaller input carries one.
Tensor fit(const Tensor& t, const Tensor& out) {
  return t.defined() && t.sizes() != out.sizes() ? expand(t, out.sizes()) : t;
}

// The output's own tangent for a sum of tangent terms: where one input alone carries a tangent, `plus`
// returns that input's tangent itself (or `fit` a broadcast view of it), and an in-place write on the
// output (its tangent updated in place) would change the input's tangent too.
Tensor owned_sum(const Tensor& a, const Tensor& b, const Tensor& out) {
  if (a.defined() && b.defined()) return fit(add(a, b), out);
  const Tensor& only = a.defined() ? a : b;
  return only.defined() ? clone(fit(only, out)) : Tensor();
}

// Element-wise maps with a real diagonal Jacobian: on real tensors the VJP rule is the JVP.
const char* const kDiagonal[] = {
    "neg",   "exp",   "log",   "sqrt",  "rsqrt",      "sign",    "abs",        "sin",     "cos",   "tan",
    "asin",  "acos",  "atan",  "sinh",  "cosh",       "tanh",    "asinh",      "acosh",   "atanh", "sigmoid",
    "relu",  "silu",  "erf",   "gelu",  "gelu_tanh",  "softplus", "elu",       "leaky_relu", "hardtanh",
    "clamp", "floor", "ceil",  "round", "trunc",      "log1p",   "expm1",      "log2",    "log10", "exp2",
    "pow_scalar", "dropout", "feature_dropout", "drop_path",
    // std's own node is sqrt of var's output, 0 where std = 0 (torch's, forward and backward): derived
    // from that rule, u / (2 std) differentiated in u is 0 / 0 there.
    "std"};

const bool registered = [] {
  forward_ad::register_real_dot(&real_dot);
  for (const char* name : kDiagonal) forward_ad::register_diagonal_jvp(name);

  // Written rules: the product and quotient rules, and bilinearity of matmul. Broadcasting is
  // the op's own (the tangent of a broadcast input is broadcast by the same op).
  forward_ad::register_jvp_rule("add", [](const V&, const V& out, const V& t) { return V{owned_sum(t[0], t[1], out[0])}; });
  forward_ad::register_jvp_rule("sub", [](const V&, const V& out, const V& t) {
    return V{owned_sum(t[0], t[1].defined() ? neg(t[1]) : Tensor(), out[0])};
  });
  forward_ad::register_jvp_rule("mul", [](const V& in, const V& out, const V& t) {
    return V{fit(plus(t[0].defined() ? mul(t[0], in[1]) : Tensor(), t[1].defined() ? mul(in[0], t[1]) : Tensor()),
                 out[0])};
  });
  // d(a / b) = (da - (a / b) db) / b
  forward_ad::register_jvp_rule("div", [](const V& in, const V& out, const V& t) {
    Tensor num = plus(t[0], t[1].defined() ? neg(mul(out[0], t[1])) : Tensor());
    return V{fit(div(num, in[1]), out[0])};
  });
  // matmul and bmm: the node's inputs are the 2-D (or batched) operands matmul_nd multiplies.
  const auto bilinear = [](const V& in, const V&, const V& t) {
    return V{plus(t[0].defined() ? matmul(t[0], in[1]) : Tensor(), t[1].defined() ? matmul(in[0], t[1]) : Tensor())};
  };
  forward_ad::register_jvp_rule("matmul", bilinear);
  forward_ad::register_jvp_rule("bmm", bilinear);
  return true;
}();

}  // namespace
}  // namespace gs
