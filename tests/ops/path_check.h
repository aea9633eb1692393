// Shared by the suites that run an op's other paths on the CPU (the composite paths, the device
// kernels' arithmetic): an op's registry samples natively, then inside a scope object that switches
// the path, compared, and the switched path gradchecked.
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <complex>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "ops/registry.h"

namespace gs_test {

// max |a - b| / max(1, max |a|) over two tensors of one shape, on any devices.
inline double relative_difference(const gs::Tensor& a, const gs::Tensor& b) {
  REQUIRE(a.sizes() == b.sizes());
  const auto va = gs::to(a, gs::Device::cpu()).to_vector<gs::c128>();
  const auto vb = gs::to(b, gs::Device::cpu()).to_vector<gs::c128>();
  double diff = 0.0, scale = 1.0;
  for (size_t i = 0; i < va.size(); ++i) {
    diff = std::max(diff, std::abs(va[i] - vb[i]));
    scale = std::max(scale, std::abs(va[i]));
  }
  return diff / scale;
}

// Op `name`'s samples: outputs inside a `Scope` within `tol` of the native ones (same dtypes), and
// gradcheck (and gradgradcheck where the op declares it) inside the scope.
template <typename Scope>
void check_samples_in_scope(const char* name, const gs::RandomKey& key, double tol) {
  const gs::OpInfo* op = gs::OpRegistry::find(name);
  REQUIRE_MESSAGE(op != nullptr, std::string(name));
  for (const auto& smp : op->samples(key)) {
    INFO("op '" << std::string(name) << "', sample '" << smp.label << "'");
    const std::vector<gs::Tensor> native = op->fn(smp.inputs);
    Scope scope;
    const std::vector<gs::Tensor> other = op->fn(smp.inputs);
    REQUIRE(other.size() == native.size());
    for (size_t i = 0; i < other.size(); ++i) {
      CHECK(other[i].dtype() == native[i].dtype());
      CHECK(relative_difference(native[i], other[i]) < tol);
    }
    const auto first = gs::gradcheck(op->fn, smp.inputs, op->tolerances);
    CHECK_MESSAGE(first.ok, "gradcheck: " << first.failure);
    if (op->second_order) {
      const auto second = gs::gradgradcheck(op->fn, smp.inputs, op->tolerances);
      CHECK_MESSAGE(second.ok, "gradgradcheck: " << second.failure);
    }
  }
}

}  // namespace gs_test
