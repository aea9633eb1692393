// The distributed registry is complete, as the op registry is (tests/ops/test_registry.cpp): every
// tape-op node that distributed/ records is reached by some distributed-registry sample, so
// `gradsphere gradcheck --distributed` and the registry walk (test_collectives.cpp) check it.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "distributed/dist_registry.h"
#include "tests/distributed/dist_test_util.h"
#include "tests/registry_coverage.h"

using namespace gs;
using namespace gs::dist;

TEST_CASE("the distributed registry: every tape op node recorded in distributed/ is reached by some sample") {
  // Node names that distributed/ records with a literal name (record_op("name", ...)).
  const auto recorded = gs_test::node_names_in_sources(GS_SOURCE_ROOT "/distributed");
  REQUIRE(recorded.size() >= 9);  // the scan found the ops (a moved tree would find none)
  // Reached on any grid of this world: every rank runs every sample (they issue collectives).
  std::set<std::string> reached;
  gs::test::for_each_grid([&](const ProcessGrid& grid) {
    for (const auto& op : DistRegistry::all())
      for (const auto& sample : op.samples(grid, {77, 1}))
        gs_test::collect_reached_nodes(sample.fn, sample.inputs, op.second_order, reached);
  });
  for (const auto& [name, file] : recorded) {
    CAPTURE(file);
    CHECK_MESSAGE(reached.count(name), "distributed tape op node '" << name << "' (recorded in " << file
                                                                    << ") is reached by no distributed registry "
                                                                       "sample: add a DistRegistrar entry "
                                                                       "(distributed/dist_registry.h)");
  }
}
