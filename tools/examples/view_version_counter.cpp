// Views share storage and the version counter with their base: writing through a view bumps the
// version that every alias sees, so a saved base is protected from writes through its views too.
#include <cstdio>

#include "ops/ops.h"

using namespace gs;

int main() {
  Tensor base = arange(0.0, 12.0, 1.0, DType::f64);
  Tensor grid = reshape(base, {3, 4});
  Tensor row = select(grid, 0, 1);    // second row, a view
  Tensor column = slice(grid, 1, 2, 3);  // third column, a view
  std::printf("base v%llu, grid v%llu, row v%llu, column v%llu\n", (unsigned long long)base.version(),
              (unsigned long long)grid.version(), (unsigned long long)row.version(),
              (unsigned long long)column.version());
  fill_(row, -1.0);
  std::printf("after fill_(row, -1): base v%llu, grid v%llu, column v%llu; base[5] = %g\n",
              (unsigned long long)base.version(), (unsigned long long)grid.version(),
              (unsigned long long)column.version(), base.to_vector<double>()[5]);
  if (base.version() != 1 || column.version() != 1 || base.to_vector<double>()[5] != -1.0) {
    std::printf("FAIL: the view write should be visible and counted on every alias\n");
    return 1;
  }

  // A saved base is protected from writes through any view.
  Tensor w = ones({3, 4}, DType::f64).set_requires_grad();
  Tensor y = sum(mul(w, grid));  // saves grid
  mul_(column, 10.0);             // writes through a view of grid
  try {
    y.backward();
  } catch (const Error& e) {
    std::printf("backward after a write through a view:\n  %s\n", e.what());
    return 0;
  }
  std::printf("FAIL: a write through a view went unnoticed\n");
  return 1;
}
