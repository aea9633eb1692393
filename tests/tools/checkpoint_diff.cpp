// checkpoint_diff A B TOL: compares the model weights of two gradsphere checkpoints (the same keys
// and shapes; every tensor within TOL of B's largest value, relative) and their steps. Prints the
// worst tensor; exit status 0 when they agree, 1 when not, 2 on bad input. For the CLI tests of
// distributed training (tests/tools/train_mpi_test.sh).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "engine/factory.h"
#include "models/checkpoint.h"

namespace {

double max_rel(const gs::Tensor& a, const gs::Tensor& b) {
  const bool cplx = gs::is_complex(b.dtype());
  const gs::DType wide = cplx ? gs::DType::c128 : gs::DType::f64;
  const gs::Tensor ca = gs::cast_copy(a, wide), cb = gs::cast_copy(b, wide);
  const int64_t n = cb.numel() * (cplx ? 2 : 1);
  const double *pa = static_cast<const double*>(ca.raw_data()), *pb = static_cast<const double*>(cb.raw_data());
  double num = 0, den = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(pa[i]) || !std::isfinite(pb[i])) return INFINITY;
    num = std::max(num, std::abs(pa[i] - pb[i]));
    den = std::max(den, std::abs(pb[i]));
  }
  return den == 0 ? num : num / den;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: checkpoint_diff A.safetensors B.safetensors TOLERANCE\n");
    return 2;
  }
  try {
    const double tol = std::stod(argv[3]);
    const auto a = gs::models::load_checkpoint(argv[1]), b = gs::models::load_checkpoint(argv[2]);
    if (a.step != b.step) {
      std::printf("steps differ: %lld vs %lld\n", static_cast<long long>(a.step), static_cast<long long>(b.step));
      return 1;
    }
    if (a.model.size() != b.model.size()) {
      std::printf("tensor counts differ: %zu vs %zu\n", a.model.size(), b.model.size());
      return 1;
    }
    double worst = 0;
    std::string worst_name;
    for (const auto& [name, tb] : b.model) {
      auto it = a.model.find(name);
      if (it == a.model.end() || it->second.sizes() != tb.sizes() || it->second.dtype() != tb.dtype()) {
        std::printf("tensor %s is missing or differs in shape or dtype\n", name.c_str());
        return 1;
      }
      const double r = max_rel(it->second, tb);
      if (!(r <= worst)) worst = r, worst_name = name;
    }
    std::printf("%zu tensors, step %lld, largest relative difference %.3g (%s)\n", b.model.size(),
                static_cast<long long>(b.step), worst, worst_name.c_str());
    return worst <= tol ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_diff: %s\n", e.what());
    return 2;
  }
}
