// Element-by-element checks of a tensor's values against expected doubles (the ops tests that
// paste values from closed forms or from PyTorch): NaN matches NaN, infinities match exactly,
// finite values to `tol` relative (absolute below 1).
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "engine/tensor.h"

namespace gs::testing {

inline void check_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-13) {
  const auto got = t.to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    if (std::isnan(want[i])) CHECK(std::isnan(got[i]));
    else if (std::isinf(want[i])) CHECK(got[i] == want[i]);
    else CHECK(got[i] == doctest::Approx(want[i]).epsilon(tol).scale(1.0));
  }
}

}  // namespace gs::testing
