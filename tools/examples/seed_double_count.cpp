// The seed's first bug: a spatial all-reduce whose backward is another all-reduce. The loss is
// computed from a replicated value (the same on every rank, counted once), so its gradient must
// pass back unchanged; summing it again multiplies it by the group size. Run under mpiexec -n N:
//   mpiexec -n 3 build/tools/example_seed_double_count
#include <cstdio>

#include "distributed/collectives.h"
#include "distributed/world.h"
#include "ops/ops.h"

using namespace gs;

// The wrong rule: forward all-reduce, backward all-reduce (what the seed's PyTorch stack did).
struct AllReduceBothWays {
  static std::vector<Tensor> forward(FunctionCtx&, const std::vector<Tensor>& in) {
    Tensor y = contiguous_copy(in[0], true);
    dist::world_communicator()->all_reduce(y, dist::ReduceOp::sum);
    return {y};
  }
  static std::vector<Tensor> backward(FunctionCtx&, const std::vector<Tensor>& g) {
    Tensor s = contiguous_copy(g[0], true);
    dist::world_communicator()->all_reduce(s, dist::ReduceOp::sum);
    return {s};
  }
};

int main() {
  auto world = dist::world_communicator();
  const int n = world->size();
  // Each rank holds its part of a sum; the loss is the sum of the replicated total.
  Tensor part = full({4}, 1.0 + world->rank(), DType::f64).set_requires_grad();
  sum(dist::reduce_replicated(part, world)).backward();
  const double right = part.grad().to_vector<double>()[0];
  Tensor part2 = full({4}, 1.0 + world->rank(), DType::f64).set_requires_grad();
  sum(apply_function<AllReduceBothWays>("all_reduce_both_ways", {part2})[0]).backward();
  const double wrong = part2.grad().to_vector<double>()[0];
  if (world->rank() == 0) {
    std::printf("%d ranks: d loss / d part with reduce_replicated (identity backward) = %g\n", n, right);
    std::printf("%d ranks: with an all-reduce as backward = %g, %g times too large\n", n, wrong, wrong / right);
  }
  if (right != 1.0 || wrong != n) {
    std::printf("FAIL: expected gradients 1 and %d\n", n);
    return 1;
  }
  return 0;
}
