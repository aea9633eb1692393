// The op registry: every differentiable op with a sample-input maker. `gradsphere gradcheck` and
// the op test suite walk it, so an op is gradchecked (first and second order) the day it is added.
// Each op file registers its own entries with a static OpRegistrar.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "engine/autograd/gradcheck.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace gs {

// One set of inputs for an op: f64 or c128, small, with requires_grad on the differentiable ones.
// `label` says what the sample exercises ("broadcast", "non-contiguous", ...).
struct OpSample {
  std::string label;
  std::vector<Tensor> inputs;
};

struct OpInfo {
  std::string name;
  std::function<std::vector<OpSample>(RandomKey)> samples;
  DifferentiableFn fn;
  bool second_order = true;  // the backward rule is differentiable: run gradgradcheck too
  GradcheckOptions tolerances{};
};

class OpRegistry {
 public:
  static void add(OpInfo info);
  static const std::vector<OpInfo>& all();
  static const OpInfo* find(const std::string& name);  // null when unknown
  static std::vector<std::string> names();
};

struct OpRegistrar {
  explicit OpRegistrar(OpInfo info) { OpRegistry::add(std::move(info)); }
  OpRegistrar(std::initializer_list<OpInfo> infos) {
    for (auto& i : infos) OpRegistry::add(i);
  }
};

// Helpers for sample makers: random f64 / c128 leaves that require grad.
Tensor sample_leaf(const Shape& sizes, RandomKey key, DType dtype = DType::f64);
// Values in [lo, hi] (for ops with a restricted domain, e.g. log or sqrt).
Tensor sample_leaf_in(const Shape& sizes, RandomKey key, double lo, double hi);
// A non-contiguous leaf of `sizes` (a transposed view of a fresh tensor); still a leaf.
Tensor sample_leaf_transposed(const Shape& sizes, RandomKey key, DType dtype = DType::f64);

}  // namespace gs
