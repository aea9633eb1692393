// Smoke test of the ops test pipeline.
#include <doctest/doctest.h>

#include "engine/shape.h"

TEST_CASE("smoke: broadcast_shapes follows NumPy") {
  CHECK(gs::broadcast_shapes(gs::Shape{2, 1, 4}, gs::Shape{3, 1}, "smoke") == gs::Shape{2, 3, 4});
  CHECK(gs::broadcast_shapes(gs::Shape{}, gs::Shape{5}, "smoke") == gs::Shape{5});
  CHECK_THROWS(gs::broadcast_shapes(gs::Shape{2}, gs::Shape{3}, "smoke"));
}
