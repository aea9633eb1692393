// The golden files of tools/make_golden.py (torch-harmonics' values, committed under tests/*/data/):
// loading them and comparing with them. Header-only, shared by the ops and models suites.
#pragma once
#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"
#include "models/safetensors.h"

namespace gs_test {

// Reads `relative` (e.g. "tests/ops/data/golden_sht.safetensors") from the source tree
// (GS_SOURCE_ROOT, which the suite's meson.build defines and may be relative to the build folder,
// where meson test runs; else the working folder), or from $GS_TEST_DATA_DIR when set (by file name).
inline gs::models::SafetensorsContents load_golden(const std::string& relative) {
  namespace fs = std::filesystem;
  fs::path file = fs::path(GS_SOURCE_ROOT) / relative;
  if (!fs::is_regular_file(file)) file = relative;
  if (const char* env = std::getenv("GS_TEST_DATA_DIR")) file = fs::path(env) / fs::path(relative).filename();
  GS_CHECK(fs::is_regular_file(file), "golden file {} not found (written by tools/make_golden.py)", file.string());
  return gs::models::load_safetensors(file);
}

// Every element of t as (re, im) pairs in f64 (real dtypes: im = 0), row-major.
inline std::vector<std::complex<double>> complex_values(const gs::Tensor& t) {
  return gs::cast_copy(t, gs::DType::c128).to_vector<std::complex<double>>();
}

// max |t| over the elements (complex: the modulus).
inline double max_magnitude(const gs::Tensor& t) {
  double m = 0;
  for (const auto& z : complex_values(t)) m = std::isnan(std::abs(z)) ? INFINITY : std::max(m, std::abs(z));
  return m;
}

// max |a - b| / max |b| over the elements (complex: the modulus); shapes must match.
inline double relative_error(const gs::Tensor& a, const gs::Tensor& b) {
  GS_CHECK(a.sizes() == b.sizes(), "relative_error: {} against {}", a.meta_str(), b.meta_str());
  const auto va = complex_values(a), vb = complex_values(b);
  double num = 0, den = 0;
  for (size_t i = 0; i < va.size(); ++i) {
    const double d = std::abs(va[i] - vb[i]);
    num = std::isnan(d) ? INFINITY : std::max(num, d);
    den = std::max(den, std::abs(vb[i]));
  }
  return den > 0 ? num / den : num;
}

}  // namespace gs_test
