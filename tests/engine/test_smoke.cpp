// Smoke test of the test pipeline: builds against the library and runs under the MPI test main.
#include <doctest/doctest.h>

#include "engine/shape.h"
#include "tests/mpi_test_util.h"

TEST_CASE("smoke: numel_of multiplies the sizes") {
  CHECK(gs::numel_of(gs::Shape{2, 3, 4}) == 24);
  CHECK(gs::numel_of(gs::Shape{}) == 1);  // a scalar has one element
  CHECK(gs::numel_of(gs::Shape{5, 0}) == 0);
}

TEST_CASE("smoke: rank helpers are consistent") {
  CHECK(test_world_size() >= 1);
  CHECK(test_rank() >= 0);
  CHECK(test_rank() < test_world_size());
}
