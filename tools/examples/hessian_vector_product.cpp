// A Hessian-vector product by double backward. f(x) = sum(x^3) / 3 + x . A x has gradient
// x^2 + (A + A^T) x and Hessian diag(2x) + A + A^T, so H v is known in closed form.
#include <cmath>
#include <cstdio>

#include "ops/ops.h"

using namespace gs;

int main() {
  const int64_t n = 4;
  Tensor x = from_vector<double>({0.5, -1.0, 2.0, 0.25}).set_requires_grad();
  Tensor A = randn({n, n}, {3, 0}, DType::f64);
  Tensor v = from_vector<double>({1.0, 0.0, -1.0, 2.0});

  Tensor f = add(div(sum(pow(x, 3.0)), 3.0), sum(mul(x, matmul(A, x))));
  // First backward with create_graph: the gradient is itself on the tape.
  Tensor g = grad({f}, {x}, {}, {.create_graph = true})[0];
  // Second backward of g . v gives H v.
  Tensor hv = grad({sum(mul(g, v))}, {x})[0];

  auto xs = x.to_vector<double>(), vs = v.to_vector<double>(), as = A.to_vector<double>(), got = hv.to_vector<double>();
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double expect = 2 * xs[i] * vs[i];
    for (int64_t j = 0; j < n; ++j) expect += (as[i * n + j] + as[j * n + i]) * vs[j];
    std::printf("  (Hv)[%lld] = % .12f   closed form % .12f\n", (long long)i, got[i], expect);
    worst = std::max(worst, std::abs(got[i] - expect));
  }
  std::printf("max |difference| = %.3g\n", worst);
  return worst < 1e-12 ? 0 : 1;
}
