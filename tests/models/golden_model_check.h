// One golden case of a whole model (tests/models/test_*_golden.cpp): load the reference's state
// dict unchanged, run forward, the loss mean((y - target)^2) and backward, and compare the output,
// the loss and every gradient with the reference's (relative to each tensor's largest magnitude).
#pragma once
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <string>

#include "engine/autograd/engine.h"
#include "models/module.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/view.h"
#include "tests/golden_util.h"

namespace gs_test {

struct GoldenModelCase {
  const gs::models::StateDict* golden;  // the whole golden file
  std::string prefix;                   // "<cfg>.<dtype>."
  double tol;
  // Parameters whose true gradient is 0, so both sides hold rounding noise: checked to be noise
  // (below tol times the largest gradient of the model) instead of against each other.
  std::function<bool(const std::string&)> zero_gradient = [](const std::string&) { return false; };
};

// Returns the largest relative difference found (the zero-gradient parameters aside).
inline double check_model_against_golden(gs::models::Module& model, const GoldenModelCase& c,
                                         const std::function<gs::Tensor(const gs::Tensor&)>& forward) {
  using gs::Tensor;
  const auto& golden = *c.golden;
  auto at = [&](const std::string& name) -> const Tensor& {
    REQUIRE_MESSAGE(golden.count(c.prefix + name), "missing golden tensor " << c.prefix + name);
    return golden.at(c.prefix + name);
  };
  // The reference's state dict as it is: parameters (with its dtypes) and persistent buffers.
  gs::models::StateDict sd;
  for (const std::string kind : {"param.", "buffer."})
    for (const auto& [name, t] : golden)
      if (name.rfind(c.prefix + kind, 0) == 0) sd[name.substr(c.prefix.size() + kind.size())] = t;
  model.load_state_dict(sd);
  model.train();
  // And back: the model's own state dict has exactly the reference's keys and shapes, so the
  // reference loads it strictly too.
  const gs::models::StateDict mine = model.state_dict();
  CHECK(mine.size() == sd.size());
  for (const auto& [name, t] : sd) {
    CAPTURE(name);
    REQUIRE(mine.count(name));
    CHECK(mine.at(name).sizes() == t.sizes());
  }

  Tensor x = at("input").detach();
  x.set_requires_grad(true);
  const Tensor y = forward(x);
  const Tensor loss = gs::mean(gs::square(gs::sub(y, at("target"))));
  gs::backward({loss});

  double worst = 0;
  for (double err : {relative_error(y, at("output")), relative_error(gs::reshape(loss, {1}), at("loss")),
                     relative_error(x.grad(), at("grad_input"))}) {
    CHECK(err < c.tol);
    worst = std::max(worst, err);
  }
  double largest = 0;
  for (const auto& p : model.named_parameters()) largest = std::max(largest, max_magnitude(at("grad." + p.name)));
  for (const auto& p : model.named_parameters()) {
    CAPTURE(p.name);
    REQUIRE(p.tensor.grad().defined());
    const Tensor& ref = at("grad." + p.name);
    if (c.zero_gradient(p.name)) {
      CHECK(max_magnitude(p.tensor.grad()) < c.tol * largest);
      CHECK(max_magnitude(ref) < c.tol * largest);
    } else {
      const double err = relative_error(p.tensor.grad(), ref);
      CHECK(err < c.tol);
      worst = std::max(worst, err);
    }
  }
  return worst;
}

}  // namespace gs_test
