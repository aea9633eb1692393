// A probe for tests/distributed/faults.sh: misbehaves on one rank in the way its first argument
// names, inside a distributed region, and ends the way the gradsphere command does (an error on one
// rank aborts every rank with that rank's message).
//   throw RANK      rank RANK throws a gs::Error while the others wait in an all-reduce
//   skip RANK       rank RANK never joins an all-reduce (GS_COMM_TIMEOUT ends the others)
//   mismatch RANK   rank RANK runs a barrier where the others all-reduce (GS_CHECK_REPLICAS=1 names both)
//   reducer RANK    a tape-reducer backward where rank RANK ran its forward outside forward_scope()
//                   (its gradient went around the reduction: refused there) while the others reduce
//   ok              every rank all-reduces and exits 0
#include <cstdio>
#include <cstdlib>
#include <string>

#include "distributed/process_grid.h"
#include "distributed/reducer.h"
#include "distributed/world.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

using namespace gs;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "ok";
  const int bad = argc > 2 ? std::atoi(argv[2]) : 0;
  try {
    auto world = dist::world_communicator();
    Tensor t = ones({4}, DType::f64);
    world->barrier();
    if (mode == "throw" && world->rank() == bad) fail("probe: rank {} hit a bad input file", bad);
    if (mode == "skip" && world->rank() == bad) {
      world->barrier();  // waits for the others, who are in an all-reduce: never completes
      return 0;
    }
    if (mode == "reducer") {
      auto grid = dist::ProcessGrid::create(world, {world->size(), 1, 1});
      Tensor w = ones({3}, DType::f64).set_requires_grad();
      dist::GradientReducer reducer(grid, {{"w", w, dist::Distribution::replicated()}});
      Tensor loss;
      if (world->rank() == bad) {
        loss = sum(mul(w, w));  // no forward scope: the reducer's hook refuses the gradient
      } else {
        dist::ReducedForward scope = reducer.forward_scope();
        loss = sum(mul(w, w));
      }
      loss.backward();
    }
    if (mode == "mismatch" && world->rank() == bad) world->barrier();
    else world->all_reduce(t, dist::ReduceOp::sum);
    world->barrier();
    if (world->rank() == 0) std::printf("probe: all ranks done, sum %g\n", t.to_vector<double>()[0]);
    return 0;
  } catch (const Error& e) {
    dist::abort_job(e.what(), 1);
  }
}
