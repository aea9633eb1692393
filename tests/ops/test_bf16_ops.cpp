// The ops that read bf16 storage as f32 (matmul, linear, conv1x1, gelu_fused): each equals its f32
// twin on the rounded values, exactly, forward and backward (the widening is exact and the f32
// kernels are the same), returns f32 and f32 gradients, saves the bf16 tensor rather than a wide
// copy, and refuses pairings other than bf16 with f32.
#include <doctest/doctest.h>

#include <vector>

#include "engine/autograd/engine.h"
#include "engine/factory.h"
#include "engine/storage.h"
#include "ops/elementwise.h"
#include "ops/gelu_fused.h"
#include "ops/linalg.h"
#include "ops/reduce.h"
#include "ops/sphere/sfno_blocks.h"
#include "ops/view.h"
#include "tests/tensor_test_util.h"
#include "tests/test_util.h"

using namespace gs;
using gs_test::contains;
using gs_test::error_of;
using gs_test::exactly_equal;

namespace {

// An f32 leaf of `sizes` whose values bf16 cannot all hold (so rounding shows if it happened).
Tensor f32_leaf(const Shape& sizes, uint64_t stream) {
  Tensor t = randn(sizes, {404, stream}, DType::f32);
  t.set_requires_grad(true);
  return t;
}

// The f32 leaf rounded to bf16 and back, as a new leaf: what the bf16 path computes on.
Tensor rounded_leaf(const Tensor& t) {
  Tensor r = cast_copy(cast_copy(t.detach(), DType::bf16), DType::f32);
  r.set_requires_grad(true);
  return r;
}

}  // namespace

TEST_CASE("bf16 matmul and linear: the f32 product of the rounded values, f32 gradients") {
  Tensor a = f32_leaf({3, 5, 4}, 1), b = f32_leaf({4, 6}, 2);
  Tensor out = matmul(to(a, DType::bf16), b);
  CHECK(out.dtype() == DType::f32);
  Tensor ar = rounded_leaf(a), br = b.detach();
  br.set_requires_grad(true);
  Tensor want = matmul(ar, br);
  CHECK(exactly_equal(out, want));
  const Tensor w = randn(want.sizes(), {404, 3}, DType::f32);
  sum(mul(out, w)).backward();
  sum(mul(want, w)).backward();
  CHECK(a.grad().dtype() == DType::f32);
  CHECK(exactly_equal(a.grad(), ar.grad()));
  CHECK(exactly_equal(b.grad(), br.grad()));

  // Both operands bf16, and a transposed (column-major) bf16 operand.
  Tensor both = matmul(to(b.detach(), DType::bf16), transpose(to(b.detach(), DType::bf16), 0, 1));
  Tensor br2 = cast_copy(cast_copy(b.detach(), DType::bf16), DType::f32);
  CHECK(exactly_equal(both, matmul(br2, transpose(br2, 0, 1))));

  // linear: bf16 input, f32 weight and bias.
  Tensor x = f32_leaf({2, 4}, 4), wt = f32_leaf({3, 4}, 5), bias = f32_leaf({3}, 6);
  Tensor y = linear(to(x, DType::bf16), wt, bias);
  CHECK(exactly_equal(y, linear(rounded_leaf(x), wt.detach(), bias.detach())));
  CHECK(contains(error_of([&] { linear(to(x, DType::bf16), wt, to(bias, DType::bf16)); }),
                 "expected a bias of the result's dtype f32"));
  const std::string mixed = error_of([&] { matmul(to(a, DType::bf16), cast_copy(b.detach(), DType::f64)); });
  CHECK(contains(mixed, "a bf16 operand pairs with f32 or bf16"));
  CHECK(contains(mixed, "got bf16 and f64"));
}

TEST_CASE("bf16 conv1x1 and gelu_fused: the f32 results of the rounded input, bf16 kept for backward") {
  Tensor x = f32_leaf({2, 3, 4, 8}, 7), w = f32_leaf({5, 3}, 8), bias = f32_leaf({5}, 9);
  Tensor xr = rounded_leaf(x);
  Tensor y = sphere::conv1x1(to(x, DType::bf16), w, bias);
  Tensor want = sphere::conv1x1(xr, w.detach(), bias.detach());
  CHECK(y.dtype() == DType::f32);
  CHECK(exactly_equal(y, want));

  Tensor h = f32_leaf({2, 5, 4, 8}, 10), hb = f32_leaf({5}, 11);
  Tensor hr = rounded_leaf(h), hbr = hb.detach();
  hbr.set_requires_grad(true);
  Tensor g = gelu_fused(to(h, DType::bf16), hb);
  Tensor gwant = gelu_fused(hr, hbr);
  CHECK(g.dtype() == DType::f32);
  CHECK(exactly_equal(g, gwant));
  const Tensor up = randn(g.sizes(), {404, 12}, DType::f32);
  sum(mul(g, up)).backward();
  sum(mul(gwant, up)).backward();
  CHECK(exactly_equal(h.grad(), hr.grad()));
  CHECK(exactly_equal(hb.grad(), hbr.grad()));
  CHECK(contains(error_of([&] { gelu_fused(to(h, DType::bf16), to(hb, DType::bf16)); }),
                 "expected a bias (5) of dtype f32"));

  // What the tape keeps: after the f32 value is dropped, the graph holds the bf16 copy (2 bytes
  // an element) and no wide copy of it.
  Allocator& alloc = allocator_for(DeviceType::cpu);
  const Tensor big = randn({4, 16, 32, 64}, {404, 13}, DType::f32);  // 512 KiB in f32
  const size_t before = alloc.bytes_in_use();
  Tensor out;
  {
    Tensor leaf = big.detach();
    leaf.set_requires_grad(true);
    out = gelu_fused(to(leaf, DType::bf16));
  }
  const size_t kept = alloc.bytes_in_use() - before;
  const size_t f32_bytes = static_cast<size_t>(big.numel()) * 4;
  CHECK(kept >= f32_bytes + f32_bytes / 2);  // the f32 output and the bf16 input
  CHECK(kept < f32_bytes + f32_bytes / 2 + 4096);
}
