// Registry sample helpers shared by the op files of ops/elementwise_more.h (internal to ops/).
#pragma once
#include <cmath>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "ops/registry.h"

namespace gs::samples {

using SampleMaker = std::function<std::vector<OpSample>(RandomKey)>;

// A registry entry for a one-input op.
inline OpInfo unary_entry(std::string name, std::function<Tensor(const Tensor&)> f, SampleMaker samples) {
  return {std::move(name), std::move(samples), [f](const std::vector<Tensor>& x) { return std::vector<Tensor>{f(x[0])}; }};
}

// One (3, 4) leaf with values in [lo, hi] (an op's domain).
inline SampleMaker within(double lo, double hi) {
  return [lo, hi](RandomKey k) {
    return std::vector<OpSample>{{"values in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]",
                                  {sample_leaf_in({3, 4}, sub_key(k, 1), lo, hi)}}};
  };
}

// `leaf` (f64) with every value closer than `margin` to one of `points` moved out to that distance,
// so that finite differences never straddle a kink or a jump there. Returns a fresh leaf.
inline Tensor away_from(const Tensor& leaf, std::initializer_list<double> points, double margin) {
  Tensor t = contiguous_copy(leaf.detach(), /*force_copy=*/true);
  double* p = t.data<double>();
  for (int64_t i = 0; i < t.numel(); ++i)
    for (double c : points)
      if (std::abs(p[i] - c) < margin) p[i] = c + (p[i] >= c ? margin : -margin);
  t.set_requires_grad(true);
  return t;
}

}  // namespace gs::samples
