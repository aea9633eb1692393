// The preamble of the view, complex and comparison tests (test_view.cpp, test_complex_ops.cpp,
// test_compare.cpp): the names they use unqualified and their helpers. Test files only: the
// helpers are each file's own (an unnamed namespace), as they were when the three were one file.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/test_util.h"

namespace {

using gs::c128;
using gs::DType;
using gs::Shape;
using gs::Tensor;
using gs_test::contains;
using gs_test::error_of;

// 0, 1, 2, ... in row-major order.
inline Tensor iota(const Shape& s, DType dtype = DType::f64) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  Tensor t = gs::from_vector(v, s);
  return dtype == DType::f64 ? t : gs::cast_copy(t, dtype);
}

inline std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

// Writes `value` into every element of `view` (through its strides) and bumps the version, the
// way an in-place op would.
inline void write_through(const Tensor& view, double value) {
  gs::copy_values(view, gs::full({}, value, view.dtype()));
  gs::bump_version(view);
}

inline void check_shares(const Tensor& view, const Tensor& base) {
  CHECK(view.storage() == base.storage());
  CHECK(view.is_view());
  REQUIRE(view.view_base().defined());
  // The view base is the root tensor that owns the geometry-free storage, not an intermediate view.
  Tensor root = base.is_view() ? base.view_base() : base;
  CHECK(view.view_base().is_same(root));
  CHECK(view.version() == base.version());
}

}  // namespace
