// Helpers shared by the engine test files: error-message capture, small tensor builders, value
// comparisons, and two in-place ops written against the engine's in-place protocol
// (check_inplace / finish_inplace in engine/autograd/record.h), so the version-counter and
// in-place rules are tested on the engine itself, independently of ops/inplace.cpp.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/autograd/record.h"
#include "ops/ops.h"
#include "tests/test_util.h"

namespace gs_test {

using gs_test::error_of;

inline bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

inline gs::Tensor f64(const std::vector<double>& v, gs::Shape s = {}) { return gs::from_vector(v, std::move(s)); }

// An f64 leaf that requires grad.
inline gs::Tensor leaf(const std::vector<double>& v, gs::Shape s = {}) {
  gs::Tensor t = gs::from_vector(v, std::move(s));
  t.set_requires_grad(true);
  return t;
}

inline std::vector<double> vals(const gs::Tensor& t) { return t.to_vector<double>(); }

// Element-wise |actual - expected| <= tol * max(1, |expected|), with a readable report.
inline void check_values(const gs::Tensor& t, const std::vector<double>& expected, double tol = 1e-12) {
  REQUIRE(t.defined());
  std::vector<double> a = vals(t);
  REQUIRE(a.size() == expected.size());
  for (size_t i = 0; i < a.size(); ++i) {
    double scale = std::max(1.0, std::abs(expected[i]));
    CHECK_MESSAGE(std::abs(a[i] - expected[i]) <= tol * scale,
                  "element " << i << ": got " << a[i] << ", expected " << expected[i]);
  }
}

// self *= s, in place, through the engine's in-place protocol. Backward: g * s.
inline gs::Tensor& scale_(gs::Tensor& self, double s) {
  gs::check_inplace(self, "scale_", {});
  gs::Tensor scaled;
  {
    gs::NoGradGuard ng;
    scaled = gs::mul(self.detach(), s);
  }
  gs::copy_values(self, scaled);
  gs::finish_inplace(self, "scale_", {}, [s](gs::BackwardContext&, const std::vector<gs::Tensor>& g) {
    return std::vector<gs::Tensor>{gs::mul(g[0], s)};
  });
  return self;
}

// self += other (other broadcast to self), in place. Backward: g for both (reduced by the engine).
inline gs::Tensor& add_into_(gs::Tensor& self, const gs::Tensor& other) {
  gs::check_inplace(self, "add_into_", {other});
  gs::Tensor summed;
  {
    gs::NoGradGuard ng;
    summed = gs::add(self.detach(), other.detach());
  }
  gs::copy_values(self, summed);
  gs::finish_inplace(self, "add_into_", {other}, [](gs::BackwardContext&, const std::vector<gs::Tensor>& g) {
    return std::vector<gs::Tensor>{g[0], g[0]};
  });
  return self;
}

// What a raw buffer broadcast does: overwrite the bytes and bump the version, no autograd.
inline void overwrite_raw(const gs::Tensor& t, double value) {
  gs::copy_values(t, gs::full({}, value, t.dtype()));
  gs::bump_version(t);
}

}  // namespace gs_test
