// What the net tests (test_sfno.cpp, test_noise_sfno.cpp) share: the headers both read, and helpers
// over a model's parameters (their shapes, one by name, random values, a gradcheck through them).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/autograd/grad_mode.h"
#include "engine/autograd/gradcheck.h"
#include "engine/factory.h"
#include "models/layers.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/view.h"
#include "tests/tensor_test_util.h"
#include "tests/test_util.h"

namespace gs_test {

// max |t| (complex: of the real parts; take abs() first for the modulus).
inline double max_abs(const gs::Tensor& t) {
  double m = 0;
  for (double v : values_f64(t)) m = std::max(m, std::abs(v));
  return m;
}

// Every parameter's shape, by name.
inline std::map<std::string, gs::Shape> shapes_of(const gs::models::Module& m) {
  std::map<std::string, gs::Shape> out;
  for (const auto& p : m.named_parameters()) out[p.name] = p.tensor.sizes();
  return out;
}

// The parameter called `name`; a failed test case when there is none.
inline gs::Tensor parameter(const gs::models::Module& m, const std::string& name) {
  for (const auto& p : m.named_parameters())
    if (p.name == name) return p.tensor;
  FAIL("no parameter " << name);
  return {};
}

// Every entry of the state dict moved off its initial value by N(0, std) noise keyed
// {seed, first_stream + k} for the k-th entry: parameters that start at constants (zero
// conditional norms, zero biases) would hide the paths through them.
inline void randomize(gs::models::Module& m, uint64_t seed, double std = 0.3, uint64_t first_stream = 0) {
  gs::NoGradGuard ng;
  gs::models::StateDict sd = m.state_dict();
  uint64_t s = first_stream;
  for (auto& [name, t] : sd) t = gs::add(t, gs::models::init_normal(t.sizes(), std, {seed, s++}, t.dtype()));
  m.load_state_dict(sd);
}

// gradcheck of (x, the named parameters) -> proj . flatten(forward(x)), with copies of the
// parameters substituted for them (ParameterSubstitution). x must require grad. A fixed projection
// of the output keeps the analytical Jacobian to a few backward passes.
inline gs::GradcheckReport gradcheck_input_and_parameters(gs::models::Module& m, const std::vector<std::string>& names,
                                                          const gs::Tensor& x, const gs::Tensor& proj,
                                                          const std::function<gs::Tensor(const gs::Tensor&)>& forward) {
  std::vector<gs::Tensor> inputs = {x};
  for (const auto& n : names) inputs.push_back(gs::contiguous_copy(parameter(m, n).detach(), true).set_requires_grad());
  auto f = [&](const std::vector<gs::Tensor>& xs) {
    std::map<std::string, gs::Tensor> sub;
    for (size_t i = 0; i < names.size(); ++i) sub[names[i]] = xs[i + 1];
    gs::models::ParameterSubstitution guard(m, sub);
    const gs::Tensor y = forward(xs[0]);
    return std::vector<gs::Tensor>{gs::matmul(proj, gs::reshape(y, {y.numel()}))};
  };
  return gs::gradcheck(f, inputs);
}

}  // namespace gs_test
