// The index arithmetic of the CUDA element loops (engine/strided_index.h), run on the CPU: every
// element's offsets agree with the naive row-major walk, for merged, broadcast, transposed and
// offset-free layouts.
#include "tests/engine/engine_test_util.h"
#include "engine/strided_index.h"

using namespace gs;

namespace {

// Offsets of element `linear` by the definition: unravel over `shape`, dot with the strides.
int64_t naive_offset(int64_t linear, const Shape& shape, const Shape& strides) {
  int64_t off = 0;
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    off += (linear % shape[d]) * strides[d];
    linear /= shape[d];
  }
  return off;
}

void check_loop(const Shape& shape, const Shape& s0, const Shape& s1, const Shape& s2, int expected_ndim) {
  CAPTURE(shape_str(shape));
  StridedLoop<3> loop = make_strided_loop<3>(shape, {&s0, &s1, &s2});
  CHECK(loop.numel == numel_of(shape));
  CHECK(loop.ndim == expected_ndim);
  for (int64_t i = 0; i < loop.numel; ++i) {
    int64_t off[3];
    loop.offsets(i, off);
    REQUIRE(off[0] == naive_offset(i, shape, s0));
    REQUIRE(off[1] == naive_offset(i, shape, s1));
    REQUIRE(off[2] == naive_offset(i, shape, s2));
  }
}

}  // namespace

TEST_CASE("strided loop: offsets of every element match the row-major walk") {
  // All contiguous: one merged dim.
  check_loop({2, 3, 4}, {12, 4, 1}, {12, 4, 1}, {12, 4, 1}, 1);
  // Broadcast of the middle dim in operand 2 (stride 0) splits the merge.
  check_loop({2, 3, 4}, {12, 4, 1}, {12, 4, 1}, {4, 0, 1}, 3);
  // A transposed operand.
  check_loop({3, 5}, {5, 1}, {1, 3}, {5, 1}, 2);
  // Size-1 dims are dropped whatever their strides.
  check_loop({1, 4, 1, 3}, {12, 3, 3, 1}, {99, 3, 7, 1}, {0, 3, 0, 1}, 1);
  // A scalar broadcast to a shape (all strides 0) and a 0-dim loop.
  check_loop({4, 2}, {2, 1}, {0, 0}, {2, 1}, 1);
  check_loop({}, {}, {}, {}, 0);
  // Every other element of a wider tensor (a strided slice): the two inner dims still merge.
  check_loop({2, 3, 2}, {6, 2, 1}, {24, 8, 4}, {6, 2, 1}, 1);
}

TEST_CASE("strided loop: an empty shape has no elements and more dims than the kernels take is an error") {
  Shape e{3, 0, 2}, es{0, 2, 1};
  StridedLoop<1> loop = make_strided_loop<1>(e, {&es});
  CHECK(loop.numel == 0);
  Shape big(kMaxLoopDims + 1, 2), bs(kMaxLoopDims + 1, 0);
  for (size_t d = 0; d < big.size(); ++d) bs[d] = int64_t{1} << (2 * d);  // never mergeable
  CHECK_THROWS_WITH_AS(make_strided_loop<1>(big, {&bs}), doctest::Contains("cannot be merged"), Error);
}
