// The distributed registry: every collective tape op (and, from the next issue, every distributed
// sphere op) with a sample maker that builds each rank's inputs for the current grid. The way the
// op registry serves `gradsphere gradcheck`, this one serves `mpiexec -n N gradsphere gradcheck
// --distributed` and tests/distributed: finite differences of the global function, first and
// second order, and the adjoint identity <A x, y> = <x, A^T y> summed over ranks.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "distributed/process_grid.h"
#include "engine/autograd/gradcheck.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace gs::dist {

// How a sample's tensor is laid out over the ranks: its own value on every rank (a block of a split
// dim, or a partial), or one value replicated over a group (counted once, perturbed and seeded on
// every rank of the group together).
struct Placement {
  bool replicated = false;
  Group group = Group::world;
  static Placement per_rank() { return {}; }
  static Placement replicated_over(Group g) { return {true, g}; }
  std::string str() const;
};

struct DistSample {
  std::string label;              // "group h, dim 1 of 5 (uneven)"
  std::vector<Tensor> inputs;     // this rank's inputs (f64 / c128, requires_grad where checked)
  std::vector<Placement> input_placement;
  std::vector<Placement> output_placement;
  DifferentiableFn fn;            // runs on every rank in lock-step (it issues collectives)
  bool linear = true;             // the adjoint identity applies
};

struct DistOpInfo {
  std::string name;
  std::function<std::vector<DistSample>(const ProcessGrid&, RandomKey)> samples;
  bool second_order = true;
};

class DistRegistry {
 public:
  static void add(DistOpInfo info);
  static const std::vector<DistOpInfo>& all();
  static const DistOpInfo* find(const std::string& name);
};

struct DistRegistrar {
  explicit DistRegistrar(std::initializer_list<DistOpInfo> infos) {
    for (auto& i : infos) DistRegistry::add(i);
  }
};

// A leaf drawn for `placement`: ranks of one replica group draw the same values (keyed by the
// group's first world rank), other tensors are keyed by this rank.
Tensor dist_sample_leaf(const ProcessGrid& grid, const Shape& sizes, RandomKey key, Placement placement,
                        DType dtype = DType::f64);

}  // namespace gs::dist
