// Forward-mode AD: a Jacobian-vector product from dual tensors in one forward pass, and the
// Hessian by forward-over-reverse (the tangent v carried through the reverse pass of the
// gradient), both against closed forms. f(x) = sum(x^3) / 3 + x . A x: gradient x^2 + (A + A^T) x,
// Hessian diag(2x) + A + A^T.
#include <cmath>
#include <cstdio>

#include "ops/ops.h"

using namespace gs;

int main() {
  const int64_t n = 4;
  const Tensor x = from_vector<double>({0.5, -1.0, 2.0, 0.25});
  const Tensor A = randn({n, n}, {3, 0}, DType::f64);
  const Tensor v = from_vector<double>({1.0, 0.0, -1.0, 2.0});
  const auto xs = x.to_vector<double>(), vs = v.to_vector<double>(), as = A.to_vector<double>();
  double worst = 0;

  // 1. J v of g(x) = x^2 + (A + A^T) x (the gradient, written out) by jvp: J = H, so J v = H v.
  auto gradient = [&](const std::vector<Tensor>& in) {
    const Tensor& y = in[0];
    return std::vector<Tensor>{add(mul(y, y), add(matmul(A, y), matmul(transpose(A, 0, 1), y)))};
  };
  const JvpResult r = jvp(gradient, {x}, {v});
  // 2. H v of f by forward-over-reverse, and the whole Hessian.
  auto f = [&](const Tensor& y) { return add(div(sum(pow(y, 3.0)), 3.0), sum(mul(y, matmul(A, y)))); };
  const auto hv = hvp(f, x, v).to_vector<double>(), jv = r.tangents[0].to_vector<double>();
  const auto h = hessian(f, x).to_vector<double>();
  for (int64_t i = 0; i < n; ++i) {
    double expect = 2 * xs[i] * vs[i];
    for (int64_t j = 0; j < n; ++j) {
      expect += (as[i * n + j] + as[j * n + i]) * vs[j];
      const double h_ij = (i == j ? 2 * xs[i] : 0.0) + as[i * n + j] + as[j * n + i];
      worst = std::max(worst, std::abs(h[i * n + j] - h_ij));
    }
    std::printf("  (Hv)[%lld]: jvp % .12f  hvp % .12f  closed form % .12f\n", (long long)i, jv[i], hv[i], expect);
    worst = std::max({worst, std::abs(jv[i] - expect), std::abs(hv[i] - expect)});
  }
  std::printf("max |difference| (J v, H v and the %lldx%lld Hessian) = %.3g\n", (long long)n, (long long)n, worst);
  return worst < 1e-12 ? 0 : 1;
}
