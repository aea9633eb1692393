// Helpers of the distributed suite: every test case runs on every rank (the MPI test main), and
// most loop over every grid of the current world size, so `mpiexec -n 4` covers 1x1x4, 1x2x2,
// 1x4x1, 2x1x2, 2x2x1 and 4x1x1 in one run.
#pragma once
#include <functional>
#include <string>

#include "distributed/process_grid.h"
#include "distributed/world.h"

namespace gs::test {

// Runs body once per grid of the world (the grid spec is CAPTUREd for failure messages);
// `with_ensemble`: also on the grids with an ensemble axis E > 1 (dist::all_grids).
void for_each_grid(const std::function<void(const dist::ProcessGrid&)>& body, bool with_ensemble = false);

}  // namespace gs::test
