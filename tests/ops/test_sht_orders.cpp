// The Legendre contractions on a block of the orders (what a rank holding a block of m runs in the
// distributed SHT): each column equals the full contraction's exactly (== per element: only a zero's
// sign can differ, where one grouping of orders stores 0 and the other sums 0 * a), forward and
// backward, for blocks that start mid-register and end in a partial one; the table holds only the block.
#include <doctest/doctest.h>

#include <vector>

#include "engine/autograd/engine.h"
#include "ops/ops.h"
#include "ops/registry.h"
#include "ops/sphere/legendre/table.h"
#include "ops/sphere/sht.h"
#include "ops/sphere/vector_sht.h"
#include "tests/tensor_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using namespace gs::sphere;

namespace {

struct OrderBlock {
  int64_t begin, count;
};

// Blocks of every kind for mmax orders: the first, a middle one not aligned to a register, the
// last (partial), a single order, an empty one.
std::vector<OrderBlock> blocks_for(int64_t mmax) {
  return {{0, 3}, {2, mmax - 4}, {mmax - 5, 5}, {mmax - 1, 1}, {4, 0}, {0, mmax}};
}

using Contraction = Tensor (*)(const Tensor&, const ShtSpec&);
using BlockContraction = Tensor (*)(const Tensor&, const ShtSpec&, int64_t);

// Forward and the gradient for a random output gradient: the block's equal the full one's columns.
void check_block(Contraction full, BlockContraction part, const Tensor& x, const ShtSpec& spec, OrderBlock b) {
  CAPTURE(spec.str());
  CAPTURE(b.begin);
  CAPTURE(b.count);
  Tensor xf = contiguous_copy(x.detach(), true);
  xf.set_requires_grad();
  const Tensor yf = full(xf, spec);
  const Tensor g = sample_leaf(yf.sizes(), RandomKey{9, 9}, yf.dtype()).detach();
  backward(std::vector<Tensor>{yf}, std::vector<Tensor>{g});
  Tensor xb = contiguous_copy(narrow(x.detach(), -1, b.begin, b.count), true);
  xb.set_requires_grad();
  const Tensor yb = part(xb, spec, b.begin);
  CHECK(gs_test::exactly_equal(yb, narrow(yf.detach(), -1, b.begin, b.count)));
  backward(std::vector<Tensor>{yb}, std::vector<Tensor>{contiguous_copy(narrow(g, -1, b.begin, b.count))});
  CHECK(gs_test::exactly_equal(xb.grad(), narrow(xf.grad(), -1, b.begin, b.count)));
}

}  // namespace

TEST_CASE("sht orders: a block of orders equals the full contraction's columns exactly, forward and backward") {
  for (DType dt : {DType::c128, DType::c64})
    for (const ShtSpec& spec : {make_sht_spec(GridKind::legendre_gauss, 17, 32, 13, 13),
                                make_sht_spec(GridKind::equiangular, 19, 36, 10, 10)})
      for (OrderBlock b : blocks_for(spec.mmax)) {
        const Tensor X = sample_leaf({3, spec.nlat, spec.mmax}, RandomKey{1, 1}, dt);
        const Tensor A = sample_leaf({3, spec.lmax, spec.mmax}, RandomKey{2, 1}, dt);
        check_block(legendre_analysis, legendre_analysis_orders, X, spec, b);
        check_block(legendre_synthesis, legendre_synthesis_orders, A, spec, b);
        const Tensor VX = sample_leaf({2, 2, spec.nlat, spec.mmax}, RandomKey{3, 1}, dt);
        const Tensor VA = sample_leaf({2, 2, spec.lmax, spec.mmax}, RandomKey{4, 1}, dt);
        check_block(vector_legendre_analysis, vector_legendre_analysis_orders, VX, spec, b);
        check_block(vector_legendre_synthesis, vector_legendre_synthesis_orders, VA, spec, b);
      }
}

TEST_CASE("sht orders: the table of a block holds only its orders, and a block beyond mmax is refused") {
  const ShtSpec spec = make_sht_spec(GridKind::legendre_gauss, 32, 64, 32, 32);
  const size_t full = sht_table_bytes(spec, DType::f64, true);
  const size_t lo = sht_table_bytes(spec, DType::f64, true, 0, 16), hi = sht_table_bytes(spec, DType::f64, true, 16, 16);
  CHECK(lo < full);
  CHECK(hi < lo);  // high orders have fewer degrees
  // The two halves together hold at most the full table plus one register of padding each.
  CHECK(lo + hi <= full + 2 * 4 * sizeof(double));
  CHECK(sht_table_bytes(spec, DType::f64, true, 0, 0) == 0);
  const Tensor X = zeros({1, 32, 4}, DType::c128);
  CHECK(gs_test::contains(gs_test::error_of([&] { legendre_analysis_orders(X, spec, 30); }),
                          "expected a block of orders within 0 .. mmax - 1 = 31"));
}
