#include "distributed/dist_registry.h"

#include "engine/error.h"
#include "ops/registry.h"

namespace gs::dist {
namespace {
std::vector<DistOpInfo>& registry() {
  static std::vector<DistOpInfo> ops;
  return ops;
}
}  // namespace

std::string Placement::str() const { return replicated ? fmt::format("replicated over {}", group_name(group)) : "per rank"; }

void DistRegistry::add(DistOpInfo info) {
  GS_CHECK(find(info.name) == nullptr, "DistRegistry: '{}' is registered twice", info.name);
  registry().push_back(std::move(info));
}
const std::vector<DistOpInfo>& DistRegistry::all() { return registry(); }
const DistOpInfo* DistRegistry::find(const std::string& name) {
  for (const auto& op : registry())
    if (op.name == name) return &op;
  return nullptr;
}

Tensor dist_sample_leaf(const ProcessGrid& grid, const Shape& sizes, RandomKey key, Placement placement, DType dtype) {
  int64_t owner = grid.world_rank();
  if (placement.replicated)
    for (int64_t q = 0; q < grid.world_size(); ++q)
      if (grid.in_my_group(q, placement.group)) {
        owner = q;
        break;
      }
  return sample_leaf(sizes, {key.seed, key.stream * 4096 + static_cast<uint64_t>(owner)}, dtype);
}

}  // namespace gs::dist
