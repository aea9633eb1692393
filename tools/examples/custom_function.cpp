// A custom function: user-written forward and backward. Here a "straight-through" clamp: forward
// clamps to [-1, 1], backward passes the gradient through unchanged (a common trick that plain
// autograd would not give). gradcheck would rightly reject it, which the example shows too.
#include <algorithm>
#include <cstdio>

#include "ops/ops.h"

using namespace gs;

struct StraightThroughClamp {
  static std::vector<Tensor> forward(FunctionCtx& ctx, const std::vector<Tensor>& in) {
    Tensor out = contiguous_copy(in[0], true);
    double* p = out.data<double>();
    for (int64_t i = 0; i < out.numel(); ++i) p[i] = std::clamp(p[i], -1.0, 1.0);
    ctx.attrs["note"] = std::string("gradient passed straight through");
    return {out};
  }
  static std::vector<Tensor> backward(FunctionCtx&, const std::vector<Tensor>& grads) { return {grads[0]}; }
};

int main() {
  Tensor x = from_vector<double>({-3.0, -0.5, 0.25, 2.0}).set_requires_grad();
  Tensor y = apply_function<StraightThroughClamp>("straight_through_clamp", {x})[0];
  std::printf("forward: %s\n", y.str().c_str());
  sum(mul(y, 3.0)).backward();
  std::printf("x.grad:  %s (3 everywhere: the clamp is invisible to backward)\n", x.grad().str().c_str());
  for (double g : x.grad().to_vector<double>())
    if (g != 3.0) return 1;
  auto report = gradcheck(
      [](const std::vector<Tensor>& in) { return apply_function<StraightThroughClamp>("stc", in); }, {x});
  std::printf("gradcheck says ok=%s: %s\n", report.ok ? "true" : "false", report.failure.c_str());
  return report.ok ? 1 : 0;  // it must notice that the backward is not the true derivative
}
