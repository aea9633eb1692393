// Indexing ops (ops/indexing.h): values and gradients against PyTorch 2.14 (the numbers below were
// printed by /opt/gs-ref/bin/python, float64, with the same inputs and output gradients), the
// duplicate-index rules, double backward, in-place version bumps and rebased views, and the errors.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "engine/autograd/engine.h"
#include "engine/autograd/grad_mode.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/indexing.h"
#include "ops/inplace.h"
#include "ops/reduce.h"
#include "ops/view.h"
#include "tests/test_util.h"

using namespace gs;
using gs_test::contains;
using gs_test::error_of;

namespace {

using Vals = std::vector<double>;

Tensor t64(const Vals& v, const Shape& s, bool grad = false) {
  Tensor t = from_vector(v, s);
  if (grad) t.set_requires_grad(true);
  return t;
}
Tensor idx(const std::vector<int64_t>& v, const Shape& s) { return from_vector(v, s); }
// start, start + 1, ... in shape s (a fresh leaf); ramp_in: 1, 2, ..., the output gradients fed to torch.
Tensor iota(const Shape& s, bool grad = false, double start = 0.0) {
  const double end = start + static_cast<double>(numel_of(s));
  Tensor t = contiguous_copy(reshape(arange(start, end, 1.0, DType::f64), s), true);
  if (grad) t.set_requires_grad(true);
  return t;
}
Tensor ramp_in(const Shape& s) { return iota(s, false, 1.0); }

void check_vals(const Tensor& t, const Vals& want) {
  REQUIRE(t.defined());
  const Vals got = t.to_vector<double>();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-14));
  }
}

}  // namespace

TEST_CASE("indexing: index_select and gather values and gradients match torch") {
  Tensor x = iota({3, 4}, true);
  Tensor y = index_select(x, 1, idx({3, 0, 3}, {3}));
  CHECK(y.sizes() == Shape{3, 3});
  check_vals(y, {3, 0, 3, 7, 4, 7, 11, 8, 11});  // torch.index_select
  y.backward(ramp_in({3, 3}));
  check_vals(x.grad(), {2, 0, 0, 4, 5, 0, 0, 10, 8, 0, 0, 16});  // duplicates accumulate

  Tensor x2 = iota({3, 4}, true);
  Tensor z = gather(x2, 0, idx({2, 0, 1, 1, 0, 0, 2, 1}, {2, 4}));
  check_vals(z, {8, 1, 6, 7, 0, 1, 10, 7});  // torch.gather
  z.backward(ramp_in({2, 4}));
  check_vals(x2.grad(), {5, 8, 0, 0, 0, 0, 3, 12, 1, 0, 7, 0});

  // A 0-dim index keeps the dim with size 1, as torch.
  CHECK(index_select(iota({2, 3}), 1, full({}, 2, DType::i64)).sizes() == Shape{2, 1});
}

TEST_CASE("indexing: scatter_add, index_add and scatter values and gradients match torch") {
  Tensor x = ones({2, 3}, DType::f64).set_requires_grad(true);
  Tensor s = t64({1, 2, 3, 4, 5, 6}, {2, 3}, true);
  Tensor y = scatter_add(x, 1, idx({0, 0, 2, 1, 1, 1}, {2, 3}), s);
  check_vals(y, {4, 1, 4, 1, 16, 1});
  y.backward(ramp_in({2, 3}));
  check_vals(x.grad(), {1, 2, 3, 4, 5, 6});
  check_vals(s.grad(), {1, 1, 3, 5, 5, 5});

  Tensor xa = zeros({3, 2}, DType::f64).set_requires_grad(true);
  Tensor sa = t64({1, 2, 3, 4, 5, 6}, {3, 2}, true);
  Tensor ya = index_add(xa, 0, idx({2, 0, 2}, {3}), sa, 2.0);
  check_vals(ya, {6, 8, 0, 0, 12, 16});
  ya.backward(ramp_in({3, 2}));
  check_vals(xa.grad(), {1, 2, 3, 4, 5, 6});
  check_vals(sa.grad(), {10, 12, 2, 4, 10, 12});

  Tensor xv = iota({2, 3}, true);
  Tensor yv = scatter(xv, 1, idx({2, 0}, {2, 1}), -1.0);
  check_vals(yv, {0, 1, -1, -1, 4, 5});
  yv.backward(full({2, 3}, 3.0, DType::f64));
  check_vals(xv.grad(), {3, 3, 0, 0, 3, 3});  // written positions get no gradient
}

TEST_CASE("indexing: duplicate writes keep the last in index order; the source gradient is torch's rule") {
  // torch on the CPU prints [6, 3, 5, 0] and source gradient [1, 1, 1, 2, 2, 0] for both.
  const Tensor i = idx({1, 1, 1, 2, 2, 0}, {6});
  Tensor base = zeros({4}, DType::f64).set_requires_grad(true);
  Tensor src = t64({1, 2, 3, 4, 5, 6}, {6}, true);
  Tensor y = scatter(base, 0, i, src);
  check_vals(y, {6, 3, 5, 0});
  y.backward(iota({4}));
  check_vals(src.grad(), {1, 1, 1, 2, 2, 0});
  check_vals(base.grad(), {0, 0, 0, 3});

  Tensor src2 = t64({1, 2, 3, 4, 5, 6}, {6}, true);
  Tensor y2 = index_put(zeros({4}, DType::f64), {i}, src2);
  check_vals(y2, {6, 3, 5, 0});
  y2.backward(iota({4}));
  check_vals(src2.grad(), {1, 1, 1, 2, 2, 0});

  // Two index tensors, duplicates overwrite: torch gives [0, 3, 0, ..., 2] and these gradients.
  Tensor x = zeros({3, 4}, DType::f64).set_requires_grad(true);
  Tensor v = t64({1, 2, 3}, {3}, true);
  Tensor z = index_put(x, {idx({0, 2, 0}, {3}), idx({1, 3, 1}, {3})}, v);
  check_vals(z, {0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2});
  z.backward(ramp_in({3, 4}));
  check_vals(x.grad(), {1, 0, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0});
  check_vals(v.grad(), {2, 12, 2});

  // Summing forms are the same run to run (one fixed order) and sum exactly here.
  Tensor a = scatter_add(zeros({2}, DType::f64), 0, idx({0, 1, 0, 0}, {4}), t64({0.1, 0.2, 0.3, 0.4}, {4}));
  Tensor b = scatter_add(zeros({2}, DType::f64), 0, idx({0, 1, 0, 0}, {4}), t64({0.1, 0.2, 0.3, 0.4}, {4}));
  CHECK(a.to_vector<double>() == b.to_vector<double>());
  CHECK(a.to_vector<double>()[0] == (0.0 + 0.1) + 0.3 + 0.4);  // index order
}

TEST_CASE("indexing: index_put with accumulate, a negative index and broadcast values matches torch") {
  Tensor x = zeros({3, 2}, DType::f64).set_requires_grad(true);
  Tensor v = t64({1, 2}, {1, 2}, true);
  Tensor y = index_put(x, {idx({-1, 0, 2}, {3})}, v, true);
  check_vals(y, {1, 2, 0, 0, 2, 4});
  y.backward(ramp_in({3, 2}));
  check_vals(x.grad(), {1, 2, 3, 4, 5, 6});
  check_vals(v.grad(), {11, 14});
}

TEST_CASE("indexing: masked_fill and masked_select match torch, the 0-dim value's gradient sums over the mask") {
  Tensor x = iota({2, 3}, true);
  Tensor v = scalar_tensor(-1.0, DType::f64).set_requires_grad(true);
  const Tensor m = from_vector(std::vector<bool>{true, false, true}, {3});
  Tensor y = masked_fill(x, m, v);
  check_vals(y, {-1, 1, -1, -1, 4, -1});
  y.backward(ramp_in({2, 3}));
  check_vals(x.grad(), {0, 2, 0, 0, 5, 0});
  check_vals(v.grad(), {14});

  Tensor xs = t64({1, 2, 3}, {3}, true);
  const Tensor ms = from_vector(std::vector<bool>{true, false, true, false, true, true}, {2, 3});
  Tensor s = masked_select(xs, ms);
  CHECK(s.sizes() == Shape{4});
  check_vals(s, {1, 3, 2, 3});
  s.backward(t64({1, 2, 3, 4}, {4}));
  check_vals(xs.grad(), {1, 3, 6});  // summed over the broadcast
}

TEST_CASE("indexing: double backward through gather matches torch") {
  Tensor x = t64({0.5, -1, 2}, {3}, true);
  const Tensor w = t64({1, 2, 3, 4}, {4});
  Tensor y = gather(x, 0, idx({0, 2, 2, 1}, {4}));
  Tensor loss = sum(mul(mul(mul(y, y), y), w));
  auto gx = grad({loss}, {x}, {}, {.create_graph = true});
  check_vals(gx[0], {0.75, 12, 60});
  auto hv = grad({sum(mul(gx[0], t64({1, -1, 0.5}, {3})))}, {x});
  check_vals(hv[0], {3, 24, 30});
}

TEST_CASE("indexing: in-place forms bump the version, rebase a view's base, and refuse what they must") {
  Tensor a = iota({3, 4}, true);
  Tensor s = t64({10, 20, 30}, {1, 3}, true);
  Tensor b = clone(a);
  Tensor v = slice(b, 0, 1, 3);
  const uint64_t before = b.version();
  scatter_add_(v, 1, idx({3, 3, 0}, {1, 3}), s);
  CHECK(b.version() > before);
  check_vals(b, {0, 1, 2, 3, 34, 5, 6, 37, 8, 9, 10, 11});  // torch: b[1:].scatter_add_
  sum(mul(b, ramp_in({3, 4}))).backward();
  check_vals(a.grad(), {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  check_vals(s.grad(), {8, 8, 5});

  // Every in-place form bumps the version, in every grad mode.
  Tensor t = zeros({3, 2}, DType::f64);
  const Tensor i = idx({2, 0}, {2});
  std::vector<std::function<void()>> writes = {
      [&] { scatter_(t, 0, idx({1, 0}, {1, 2}), ones({1, 2}, DType::f64)); },
      [&] { scatter_(t, 0, idx({1, 0}, {1, 2}), 2.0); },
      [&] { scatter_add_(t, 0, idx({1, 0}, {1, 2}), ones({1, 2}, DType::f64)); },
      [&] { index_add_(t, 0, i, ones({2, 2}, DType::f64)); },
      [&] { masked_fill_(t, from_vector(std::vector<bool>{true, false}, {2}), 3.0); },
      [&] { index_put_(t, {i}, ones({2}, DType::f64), true); }};
  for (auto& w : writes) {
    const uint64_t v0 = t.version();
    {
      NoGradGuard off;
      w();
    }
    CHECK(t.version() == v0 + 1);
  }

  // A tensor saved for backward and then written in place: backward names the version change.
  Tensor p = t64({1, 2, 3}, {3}, true);
  Tensor q = clone(p);
  Tensor r = mul(q, q);  // saves q
  index_put_(q, {idx({0}, {1})}, t64({5}, {1}));
  CHECK(contains(error_of([&] { sum(r).backward(); }), "version"));

  // A leaf that requires grad, and an expanded view, are refused.
  Tensor leaf = zeros({3}, DType::f64).set_requires_grad(true);
  CHECK(contains(error_of([&] { scatter_(leaf, 0, idx({0}, {1}), 1.0); }), "leaf"));
  Tensor wide = expand(zeros({1}, DType::f64), {3});
  CHECK(contains(error_of([&] { index_add_(wide, 0, idx({0}, {1}), ones({1}, DType::f64)); }), "expanded view"));
}

TEST_CASE("indexing: errors name the index, its position and the valid range") {
  const Tensor x = iota({2, 3});
  std::string e = error_of([&] { gather(x, 1, idx({0, 1, 3, 0}, {2, 2})); });
  CHECK(contains(e, "gather"));
  CHECK(contains(e, "index 3 at position (1, 0)"));
  CHECK(contains(e, "valid indices: 0 to 2"));
  e = error_of([&] { index_select(x, 1, idx({-1}, {1})); });
  CHECK(contains(e, "index -1"));  // negative indices are refused, as torch
  e = error_of([&] { index_put(x, {idx({0, 2}, {2})}, scalar_tensor(1.0, DType::f64)); });
  CHECK(contains(e, "index 2 at position (1,)"));
  CHECK(contains(e, "valid indices: -2 to 1"));
  e = error_of([&] { index_select(x, 0, t64({0}, {1})); });
  CHECK(contains(e, "i64"));
  e = error_of([&] { scatter_add(x, 0, idx({0}, {1, 1}), iota({2, 2, 1})); });
  CHECK(contains(e, "src with 2 dims"));
  e = error_of([&] { index_add(x, 0, idx({0, 1}, {2}), iota({2, 2})); });
  CHECK(contains(e, "expected the source to have shape (2, 3)"));
  e = error_of([&] { gather(x, 0, idx({0, 0, 0, 0}, {1, 4})); });
  CHECK(contains(e, "larger than the indexed tensor"));
  e = error_of([&] { index_put(x, {idx({0}, {1})}, iota({2, 3})); });
  CHECK(contains(e, "cannot be broadcast to the indexed result's shape (1, 3)"));
  e = error_of([&] { masked_fill(x, x, 1.0); });
  CHECK(contains(e, "bool mask"));
  e = error_of([&] { masked_fill(x, from_vector(std::vector<bool>{true, false, true}, {3}), iota({1})); });
  CHECK(contains(e, "0-dim value"));
  Tensor target = iota({2, 3});
  const Tensor wider = from_vector(std::vector<bool>{true, false, true, true, true, true}, {2, 1, 3});
  e = error_of([&] { masked_fill_(target, wider, 1.0); });
  CHECK(contains(e, "cannot be broadcast to the modified tensor's shape"));
}

TEST_CASE("indexing: integer, bool and f32 tensors (f32 duplicates summed in f64)") {
  // i64 values move and sum like any other; bool ones can be written (not summed).
  Tensor xi = from_vector(std::vector<int64_t>{1, 2, 3}, {3});
  const Tensor si = from_vector(std::vector<int64_t>{10, 20, 30}, {3});
  CHECK(scatter_add(xi, 0, idx({2, 2, 0}, {3}), si).to_vector<int64_t>() == std::vector<int64_t>{31, 2, 33});
  CHECK(gather(xi, 0, idx({2, 0}, {2})).to_vector<int64_t>() == std::vector<int64_t>{3, 1});
  Tensor xb = from_vector(std::vector<bool>{false, false, false}, {3});
  CHECK(index_put(xb, {idx({-1}, {1})}, from_vector(std::vector<bool>{true}, {1})).to_vector<bool>() ==
        std::vector<bool>{false, false, true});
  CHECK(contains(error_of([&] { index_put(xb, {idx({0}, {1})}, from_vector(std::vector<bool>{true}, {1}), true); }),
                 "cannot sum bool"));
  // 1e8 + eight 1s: summed one by one in f32 each 1 is lost (torch's CPU loop gives 1e8); the f64
  // accumulator keeps them and rounds once: 100000008, exact in f32.
  std::vector<float> src(9, 1.0f);
  src[0] = 1e8f;
  Tensor acc = index_add(zeros({1}, DType::f32), 0, idx(std::vector<int64_t>(9, 0), {9}), from_vector(src, {9}));
  CHECK(acc.to_vector<float>()[0] == 100000008.0f);
}

TEST_CASE("indexing: src larger than index: the unread part gets a zero gradient (torch raises in backward)") {
  // torch 2.14: b.scatter(0, [[1, 2]], s).sum().backward() raises "ScatterBackward0 returned an
  // invalid gradient at index 1 - got [1, 2] but expected shape compatible with [3, 3]".
  Tensor s = iota({3, 3}, true, 1.0);
  Tensor y = scatter(zeros({3, 3}, DType::f64), 0, idx({1, 2}, {1, 2}), s);
  check_vals(y, {0, 0, 0, 1, 0, 0, 0, 2, 0});
  sum(mul(y, ramp_in({3, 3}))).backward();
  check_vals(s.grad(), {4, 8, 0, 0, 0, 0, 0, 0, 0});
  Tensor s2 = iota({3, 3}, true, 1.0);
  scatter_add(zeros({3, 3}, DType::f64), 0, idx({1, 2}, {1, 2}), s2).backward(ramp_in({3, 3}));
  check_vals(s2.grad(), {4, 8, 0, 0, 0, 0, 0, 0, 0});
}
