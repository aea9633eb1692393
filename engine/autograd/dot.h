// Writes the tape behind some tensors as Graphviz DOT: one box per node (op name, output shapes,
// saved tensors with their saved and current versions), edges from each node to its inputs' nodes.
#pragma once
#include <string>
#include <vector>

#include "engine/tensor.h"

namespace gs {

std::string graph_to_dot(const std::vector<Tensor>& roots);

}  // namespace gs
