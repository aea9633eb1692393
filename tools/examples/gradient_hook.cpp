// A tensor hook sees the gradient flowing into a tensor and may replace it. Here a hook halves the
// gradient of an intermediate, and a post-accumulate hook on the leaf reports .grad once it lands
// (the distributed gradient reducer is built on exactly these hooks).
#include <cstdio>

#include "ops/ops.h"

using namespace gs;

int main() {
  Tensor w = from_vector<double>({1.0, 2.0, 3.0}).set_requires_grad();
  Tensor h = mul(w, 4.0);
  h.register_hook([](const Tensor& g) {
    std::printf("hook on h: incoming gradient %s, halving it\n", g.str().c_str());
    return mul(g, 0.5);
  });
  int calls = 0;
  w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    ++calls;
    std::printf("post-accumulate hook: w.grad = %s\n", leaf.grad().str().c_str());
  });
  sum(h).backward();
  // d sum(4w)/dw = 4, halved by the hook: 2.
  for (double v : w.grad().to_vector<double>())
    if (v != 2.0 || calls != 1) {
      std::printf("FAIL: expected every gradient to be 2 after one hook call\n");
      return 1;
    }
  std::printf("w.grad is 2 everywhere: 4 from the op, halved by the hook\n");
  return 0;
}
