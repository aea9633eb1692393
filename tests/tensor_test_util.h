// Tensor helpers shared by the test suites: values as f64 and the largest elementwise difference.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"

namespace gs_test {

// The elements in row-major order, as f64 (complex: real parts).
inline std::vector<double> values_f64(const gs::Tensor& t) {
  return gs::cast_copy(t, gs::DType::f64).to_vector<double>();
}

// max |a - b| over the elements; the two must have the same number of elements.
inline double max_abs_diff(const gs::Tensor& a, const gs::Tensor& b) {
  auto va = values_f64(a), vb = values_f64(b);
  GS_CHECK(va.size() == vb.size(), "max_abs_diff: {} and {} differ in size", a.meta_str(), b.meta_str());
  double m = 0;
  for (size_t i = 0; i < va.size(); ++i) m = std::max(m, std::abs(va[i] - vb[i]));
  return m;
}

}  // namespace gs_test

namespace gs_test {

// Whether a and b hold the same dtype, shape and values, element for element (==: exact, but a
// zero's sign may differ; NaN never equals).
inline bool exactly_equal(const gs::Tensor& a, const gs::Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const bool cplx = gs::is_complex(a.dtype());
  const gs::DType wide = cplx ? gs::DType::c128 : gs::DType::f64;
  const gs::Tensor ca = gs::cast_copy(a.detach(), wide), cb = gs::cast_copy(b.detach(), wide);
  const double* pa = static_cast<const double*>(ca.raw_data());
  const double* pb = static_cast<const double*>(cb.raw_data());
  const int64_t n = ca.numel() * (cplx ? 2 : 1);
  for (int64_t i = 0; i < n; ++i)
    if (!(pa[i] == pb[i])) return false;
  return true;
}

}  // namespace gs_test
