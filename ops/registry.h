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

// The (device, dtype) pairs of an op, one table: every op runs its f64 / c128 samples and the same
// samples cast to f32 / c64 on the CPU, and both on CUDA unless `cuda_missing` says why not.
struct OpInfo {
  std::string name;
  std::function<std::vector<OpSample>(RandomKey)> samples;
  DifferentiableFn fn;
  bool second_order = true;  // the backward rule is differentiable: run gradgradcheck too
  GradcheckOptions tolerances{};
  std::string cuda_missing{};  // empty: the op has CUDA kernels; else why it has none yet
  // Outputs and gradients in single precision against the f64 run, relative to each tensor's
  // largest magnitude.
  double single_tolerance = 1e-4;
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

// ---- the registry walk on every backend (ops/registry_backends.cpp)

// One (device, precision) pair: single = the samples cast to f32 / c64.
struct Backend {
  DeviceType device = DeviceType::cpu;
  bool single = false;
  std::string str() const;  // "cuda f32"
};
// The pairs the op's entry supports, and whether one can run on this machine (CUDA: a usable GPU).
std::vector<Backend> supported_backends(const OpInfo& op);
bool backend_present(const Backend& b);

struct BackendCheck {
  bool ok = true;
  double max_error = 0;  // the largest difference, relative to its tensor's largest magnitude
  std::string failure;
};
// Runs `sample` on `b` and compares every output, and every input's gradient for a fixed random
// output gradient, with the CPU f64 run: within 1e-12 in f64 (the same arithmetic in another order),
// op.single_tolerance in single precision.
BackendCheck compare_with_cpu(const OpInfo& op, const OpSample& sample, const Backend& b);
// `fn` run on device `d` from CPU inputs, moved there and back with the differentiable to(): the
// CPU's gradcheck of it checks d's forward and backward kernels against finite differences.
DifferentiableFn on_device(const DifferentiableFn& fn, Device d);

// Helpers for sample makers. The s-th sub-key of a sample key (distinct leaves of one sample).
inline RandomKey sub_key(RandomKey k, uint64_t s) { return {k.seed, k.stream * 100 + s}; }
// Random f64 / c128 leaves that require grad.
Tensor sample_leaf(const Shape& sizes, RandomKey key, DType dtype = DType::f64);
// Values in [lo, hi] (for ops with a restricted domain, e.g. log or sqrt).
Tensor sample_leaf_in(const Shape& sizes, RandomKey key, double lo, double hi);
// A non-contiguous leaf of `sizes` (a transposed view of a fresh tensor); still a leaf.
Tensor sample_leaf_transposed(const Shape& sizes, RandomKey key, DType dtype = DType::f64);

}  // namespace gs
