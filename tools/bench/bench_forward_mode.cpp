// `gradsphere bench engine`'s forward-mode rows: the tape-overhead chain (16 f32 elements, one op per
// link) run three ways, per op:
//   no AD     the chain alone (nothing requires grad, no dual level): the kernels and dispatch
//   reverse   forward + backward, as the tape row: the chain and a sum recorded, then backward
//   forward   the chain's input a dual tensor (DualLevel, make_dual, tangent read at the end): each
//             op records its node and computes its output's tangent by its rule
// one chain per kind of JVP rule (engine/autograd/forward_ad.h): add/mul and mul (written rules),
// exp/log (diagonal: the VJP rule run on the tangent), softmax (derived: the VJP rule run on a zero
// output gradient that requires grad, then a reverse pass through that rule's graph).
#include <fmt/core.h>
#include <functional>
#include <string>

#include "engine/autograd/forward_ad.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/reduce_more.h"
#include "ops/softmax.h"
#include "tools/bench/benches.h"
#include "tools/bench/timing.h"

namespace gs::tools {
namespace {

struct Chain {
  std::string label;
  std::vector<std::string> ops;  // node names, for the rule kind
  std::function<Tensor(const Tensor&, int)> link;  // link i of the chain
  bool diagonal_jacobian;  // element-wise: J = J^T, so J 1 must equal the gradient of sum (checked)
};

Tensor run_chain(const Chain& c, Tensor y, int n) {
  for (int i = 0; i < n; ++i) y = c.link(y, i);
  return y;
}

void print_row(const Chain& c, int n) {
  const Tensor x = randn({16}, {1, 1}, DType::f32);
  const Tensor ones = full({16}, 1.0, DType::f32);
  const double plain = median_seconds([&] { run_chain(c, x, n); }, 5) / n;

  Tensor leaf = randn({16}, {1, 1}, DType::f32);  // x's values, as a leaf
  leaf.set_requires_grad(true);
  const double reverse = median_seconds([&] {
    sum(run_chain(c, leaf, n)).backward();
    leaf.set_grad({});
  }, 5) / (n + 1);

  forward_ad::DualLevel level;
  const double forward = median_seconds([&] { forward_ad::unpack_dual(run_chain(c, forward_ad::make_dual(x, ones), n)); },
                                        5) / n;

  // The rows measure working rules: every link got its tangent from the rule kind the label names,
  // and for element-wise chains J 1 equals the gradient of the sum.
  std::string kinds;
  for (const auto& op : c.ops) {
    if (!kinds.empty()) kinds += '/';
    kinds += forward_ad::rule_kind(op);
  }
  forward_ad::reset_rule_counts();
  const Tensor jv = forward_ad::unpack_dual(run_chain(c, forward_ad::make_dual(x, ones), n)).tangent;
  const forward_ad::RuleCounts counts = forward_ad::rule_counts();
  forward_ad::RuleCounts expected;
  for (int i = 0; i < n; ++i) {
    const std::string kind = forward_ad::rule_kind(c.ops[i % c.ops.size()]);
    ++(kind == "written" ? expected.written : kind == "diagonal" ? expected.diagonal : expected.derived);
  }
  GS_CHECK(counts.view == 0 && counts.written == expected.written && counts.diagonal == expected.diagonal &&
               counts.derived == expected.derived,
           "bench engine: the forward-mode {} chain of {} ops produced {} written, {} diagonal, {} derived and {} "
           "view tangents, expected {} written, {} diagonal, {} derived", c.label, n, counts.written, counts.diagonal,
           counts.derived, counts.view, expected.written, expected.diagonal, expected.derived);
  if (c.diagonal_jacobian) {
    sum(run_chain(c, leaf, n)).backward();
    const double diff = amax(abs(sub(jv, leaf.grad()))).item<float>();
    const double scale = amax(abs(leaf.grad())).item<float>();
    leaf.set_grad({});
    GS_CHECK(diff <= 1e-4 * scale, "bench engine: the forward-mode tangent of the {} chain differs from the reverse "
             "gradient by {:.3g} (largest gradient {:.3g})", c.label, diff, scale);
  }
  fmt::print("| {:<22} | {:<17} | {:>9.3f} | {:>16.3f} | {:>16.3f} | {:>14.2f}x |\n", c.label, kinds, plain * 1e6,
             reverse * 1e6, forward * 1e6, forward / reverse);
}

}  // namespace

void print_forward_mode_cost(bool quick) {
  const int n = quick ? 200 : 10000;
  const Tensor c = full({16}, 1.0001, DType::f32);
  const std::vector<Chain> chains = {
      {"add/mul (the tape row)", {"add", "mul"}, [&](const Tensor& y, int i) { return i % 2 ? mul(y, c) : add(y, c); },
       true},
      {"mul", {"mul"}, [&](const Tensor& y, int) { return mul(y, c); }, true},
      {"exp/log", {"exp", "log"}, [](const Tensor& y, int i) { return i % 2 ? log(y) : exp(y); }, true},
      {"softmax (dim 0)", {"softmax"}, [](const Tensor& y, int) { return softmax(y, 0); }, false},
  };
  fmt::print("\nforward-mode AD: chains of {} ops on 16 f32, us per op (reverse: forward + backward, over {} ops "
             "with the sum)\n", n, n + 1);
  fmt::print("| {:<22} | {:<17} | {:>9} | {:>16} | {:>16} | {:>14} |\n", "chain", "JVP rule", "no AD", "reverse fwd+bwd",
             "forward (dual)", "forward/reverse");
  fmt::print("|{:-<24}|{:-<19}|{:-<11}|{:-<18}|{:-<18}|{:-<17}|\n", "", "", "", "", "", "");
  for (const auto& chain : chains) print_row(chain, n);
}

}  // namespace gs::tools
