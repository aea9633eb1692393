#include "tests/distributed/dist_test_util.h"

#include <doctest/doctest.h>

#include "engine/error.h"

namespace gs::test {

void for_each_grid(const std::function<void(const dist::ProcessGrid&)>& body, bool with_ensemble) {
  auto world = dist::world_communicator();
  for (const auto& spec : dist::all_grids(world->size(), with_ensemble)) {
    auto grid = dist::ProcessGrid::create(world, spec);
    CAPTURE(spec.str());
    body(grid);
  }
}

}  // namespace gs::test
