// Custom functions (engine/autograd/custom_function.h): user forward and backward,
// save_for_backward, mark_dirty, once_differentiable, non-differentiable outputs.
#include <any>

#include "tests/engine/engine_test_util.h"

using namespace gs;
using namespace gs_test;

namespace {

using V = std::vector<Tensor>;

// x^3 with a differentiable backward (so double backward works).
struct Cube {
  static V forward(FunctionCtx& ctx, const V& in) {
    ctx.save_for_backward({in[0]});
    return {mul(mul(in[0], in[0]), in[0])};
  }
  static V backward(FunctionCtx& ctx, const V& g) {
    Tensor x = ctx.saved_tensors()[0];
    return {mul(g[0], mul(mul(x, x), 3.0))};
  }
};

// Same rule, but declared once-differentiable.
struct CubeOnce {
  static V forward(FunctionCtx& ctx, const V& in) {
    ctx.set_once_differentiable();
    return Cube::forward(ctx, in);
  }
  static V backward(FunctionCtx& ctx, const V& g) { return Cube::backward(ctx, g); }
};

// exp saving its output; a * scale with the scale kept in ctx.attrs; which inputs need grads.
struct ExpScaled {
  static inline std::vector<bool> needs_seen;
  static V forward(FunctionCtx& ctx, const V& in) {
    needs_seen = {ctx.needs_input_grad(0), ctx.needs_input_grad(1)};
    ctx.attrs["scale"] = 2.0;
    Tensor out = mul(exp(in[0]), in[1]);
    Tensor e = exp(in[0]);  // computed in forward, saved, neither input nor output
    ctx.save_for_backward({out, in[1], e});
    return {out};
  }
  static V backward(FunctionCtx& ctx, const V& g) {
    auto s = ctx.saved_tensors();
    double scale = std::any_cast<double>(ctx.attrs.at("scale"));
    needs_seen = {ctx.needs_input_grad(0), ctx.needs_input_grad(1)};
    Tensor gx = ctx.needs_input_grad(0) ? mul(g[0], s[0]) : Tensor();
    Tensor gb = ctx.needs_input_grad(1) ? mul(g[0], s[2]) : Tensor();
    (void)scale;
    return {gx, gb};
  }
};

// Doubles its input in place and returns it (mark_dirty).
struct DoubleInPlace {
  static V forward(FunctionCtx& ctx, const V& in) {
    Tensor t = in[0];
    copy_values(t, mul(t, 2.0));  // a raw write: the engine bumps the version for us
    ctx.mark_dirty(t);
    return {t};
  }
  static V backward(FunctionCtx&, const V& g) { return {mul(g[0], 2.0)}; }
};

// Same, but the forward bumps the version itself (through the in-place protocol).
struct DoubleInPlaceBumping {
  static V forward(FunctionCtx& ctx, const V& in) {
    Tensor t = in[0];
    scale_(t, 2.0);
    ctx.mark_dirty(t);
    return {t};
  }
  static V backward(FunctionCtx&, const V& g) { return {mul(g[0], 2.0)}; }
};

// Writes its input but forgets to return it.
struct DirtyNotReturned {
  static V forward(FunctionCtx& ctx, const V& in) {
    ctx.mark_dirty(in[0]);
    return {mul(in[0], 1.0)};
  }
  static V backward(FunctionCtx&, const V& g) { return {g[0]}; }
};

// Values (differentiable), a mask (bool) and "indices" stored as f64 but marked non-differentiable.
struct ValuesAndIndices {
  static inline bool index_grad_was_zero = false;
  static V forward(FunctionCtx& ctx, const V& in) {
    Tensor values = mul(in[0], 2.0);
    Tensor mask = gt(in[0], 0.0);
    Tensor index = arange(0.0, static_cast<double>(in[0].numel()), 1.0, DType::f64);
    ctx.mark_non_differentiable(index);
    return {values, mask, index};
  }
  static V backward(FunctionCtx&, const V& g) {
    index_grad_was_zero = g.size() == 3 && g[2].defined() && sum(abs(g[2])).item<double>() == 0.0;
    return {mul(g[0], 2.0)};
  }
};

// Returns its input unchanged.
struct Identity {
  static V forward(FunctionCtx&, const V& in) { return {in[0]}; }
  static V backward(FunctionCtx&, const V& g) { return {g[0]}; }
};

struct TooFewGradients {
  static V forward(FunctionCtx&, const V& in) { return {add(in[0], in[1])}; }
  static V backward(FunctionCtx&, const V& g) { return {g[0]}; }
};

struct WrongShapeGradient {
  static V forward(FunctionCtx&, const V& in) { return {mul(in[0], 1.0)}; }
  static V backward(FunctionCtx&, const V&) { return {zeros({5}, DType::f64)}; }
};

struct BroadcastGradient {  // returns a (2, 3) gradient for a (3,) input: reduced by the engine
  static V forward(FunctionCtx&, const V& in) { return {mul(in[0], 1.0)}; }
  static V backward(FunctionCtx&, const V& g) { return {expand(g[0], {2, 3})}; }
};

struct WrongDtypeGradient {
  static V forward(FunctionCtx&, const V& in) { return {mul(in[0], 1.0)}; }
  static V backward(FunctionCtx&, const V& g) { return {to(g[0], DType::f32)}; }
};

}  // namespace

TEST_CASE("custom function: forward, save_for_backward and the gradient it defines") {
  Tensor x = leaf({1, -2, 0.5});
  Tensor y = apply_function<Cube>("cube", {x})[0];
  check_values(y, {1, -8, 0.125});
  REQUIRE(y.grad_fn() != nullptr);
  CHECK(y.grad_fn()->name() == "cube");
  CHECK(y.grad_fn()->saved.size() == 1);
  CHECK(y.grad_fn()->saved[0].role() == "input 0");
  sum(y).backward();
  check_values(x.grad(), {3, 12, 0.75});
  auto rep = gradcheck([](const V& in) { return apply_function<Cube>("cube", in); }, {x});
  CHECK_MESSAGE(rep.ok, rep.failure);
  auto rep2 = gradgradcheck([](const V& in) { return apply_function<Cube>("cube", in); }, {x});
  CHECK_MESSAGE(rep2.ok, rep2.failure);
  // Under no_grad nothing is recorded.
  NoGradGuard ng;
  Tensor z = apply_function<Cube>("cube", {x})[0];
  CHECK(z.grad_fn() == nullptr);
  CHECK_FALSE(z.requires_grad());
}

TEST_CASE("custom function: saved outputs, saved intermediates, attrs and needs_input_grad") {
  Tensor a = leaf({0.0, 1.0});
  Tensor b = f64({3.0, -1.0});
  Tensor y = apply_function<ExpScaled>("exp_scaled", {a, b})[0];
  CHECK(ExpScaled::needs_seen == std::vector<bool>{true, false});
  auto& saved = y.grad_fn()->saved;
  REQUIRE(saved.size() == 3);
  CHECK(saved[0].role() == "output 0");
  CHECK(saved[1].role() == "input 1");
  CHECK(saved[2].role() == "a tensor computed in forward");
  sum(y).backward();
  CHECK(ExpScaled::needs_seen == std::vector<bool>{true, false});
  check_values(a.grad(), {3.0, -std::exp(1.0)});
  // Both inputs differentiable: gradcheck and gradgradcheck (the saved output re-attaches to the
  // node, so the second derivative flows through it).
  Tensor b2 = leaf({3.0, -1.0});
  auto f = [](const V& in) { return apply_function<ExpScaled>("exp_scaled", in); };
  auto rep = gradcheck(f, {a, b2});
  CHECK_MESSAGE(rep.ok, rep.failure);
  // Modifying a saved output between forward and backward is caught and named.
  Tensor y2 = apply_function<ExpScaled>("exp_scaled", {a, b})[0];
  Tensor loss = sum(y2);
  overwrite_raw(y2, 0.0);
  std::string msg = error_of([&] { loss.backward(); });
  CHECK(has(msg, "output 0 of 'exp_scaled'"));
  CHECK(has(msg, "saved at version 0 and is now at version 1"));
}

TEST_CASE("custom function: mark_dirty rebases the history of a tensor modified in forward") {
  Tensor x = leaf({1, 2});
  SUBCASE("raw write in forward") {
    Tensor h = mul(x, 3.0);
    Tensor out = apply_function<DoubleInPlace>("double_", {h})[0];
    CHECK(out.is_same(h));  // the dirty tensor itself is returned
    CHECK(h.version() == 1);  // bumped once by the engine
    CHECK(h.grad_fn()->name() == "double_");
    check_values(h, {6, 12});
    sum(mul(h, h)).backward();  // d/dx = 2 h * 2 * 3
    check_values(x.grad(), {72, 144});
  }
  SUBCASE("retain_grad follows the dirty tensor") {
    Tensor h = mul(x, 3.0);
    h.retain_grad();
    apply_function<DoubleInPlace>("double_", {h});
    sum(mul(h, h)).backward();
    check_values(h.grad(), {12, 24});  // 2 h, h = 6 x
  }
  SUBCASE("forward bumps the version itself: no second bump") {
    Tensor h = mul(x, 3.0);
    apply_function<DoubleInPlaceBumping>("double_", {h});
    CHECK(h.version() == 1);
    CHECK(h.grad_fn()->name() == "double_");
    sum(h).backward();
    check_values(x.grad(), {6, 6});
  }
  SUBCASE("a plain tensor written in forward") {
    Tensor buf = f64({5, 6});
    apply_function<DoubleInPlace>("double_", {buf});
    CHECK(buf.version() == 1);
    CHECK(buf.is_leaf());
    check_values(buf, {10, 12});
  }
  SUBCASE("a tensor saved earlier is caught at backward") {
    Tensor h = mul(x, 3.0);
    Tensor p = mul(h, h);
    apply_function<DoubleInPlace>("double_", {h});
    CHECK(has(error_of([&] { sum(p).backward(); }), "input 0 of 'mul'"));
  }
  SUBCASE("a view of a graph tensor: its base is rebased through copy_slices, as PyTorch's CopySlices") {
    Tensor h = mul(x, 1.0);
    Tensor v = select(h, 0, 0);
    Tensor out = apply_function<DoubleInPlace>("double_", {v})[0];
    CHECK(out.is_same(v));
    check_values(h, {2, 2});
    CHECK(h.grad_fn()->name() == "copy_slices");
    CHECK(v.grad_fn()->name() == "double_");
    sum(mul(h, f64({10, 100}))).backward();  // h = (2 x0, x1)
    check_values(x.grad(), {20, 100});
    // And against finite differences, first and second order, through a strided view.
    auto f = [](const std::vector<Tensor>& in) {
      Tensor t = mul(in[0], in[0]);
      apply_function<DoubleInPlace>("double_", {slice(t, 1, 0, 3, 2)});
      return std::vector<Tensor>{t};
    };
    Tensor x0 = randn({2, 3}, {9, 9}, DType::f64).set_requires_grad();
    auto r = gradcheck(f, {x0});
    CHECK_MESSAGE(r.ok, r.failure);
    auto r2 = gradgradcheck(f, {x0});
    CHECK_MESSAGE(r2.ok, r2.failure);
  }
  SUBCASE("a detach() alias or a no_grad view is refused when another input needs grad; the leaf stays a leaf") {
    Tensor w = leaf({1, 1});
    Tensor d = x.detach();
    CHECK(has(error_of([&] { apply_function<DoubleInPlace>("double_", {d, w}); }), "detach() alias"));
    CHECK(x.is_leaf());
    Tensor nv;
    {
      NoGradGuard ng;
      nv = select(x, 0, 0);
    }
    CHECK(has(error_of([&] { apply_function<DoubleInPlace>("double_", {nv, w}); }), "made under no_grad"));
    CHECK(x.is_leaf());
    CHECK_FALSE(x.grad_fn());
  }
  SUBCASE("rules: a leaf that requires grad, a view of a leaf that requires grad, a dirty tensor not returned") {
    // The forward has already written when the rules are checked: the write is still counted,
    // so graphs that saved the tensor, and later uses of a non-leaf, are caught.
    Tensor saved_x = mul(x, x);
    CHECK(has(error_of([&] { apply_function<DoubleInPlace>("double_", {x}); }), "leaf"));
    CHECK(x.version() == 1);
    CHECK(has(error_of([&] { sum(saved_x).backward(); }), "saved at version 0 and is now at version 1"));
    Tensor y = leaf({3, 4});
    Tensor vy = select(y, 0, 0);
    CHECK(has(error_of([&] { apply_function<DoubleInPlace>("double_", {vy}); }), "view of a leaf tensor that requires grad"));
    CHECK(y.version() == 1);
    Tensor h2 = mul(x, 1.0);
    CHECK(has(error_of([&] { apply_function<DirtyNotReturned>("forgetful", {h2}); }),
              "forgetful: a tensor passed to mark_dirty() must be returned from forward"));
  }
}

TEST_CASE("custom function: once_differentiable refuses double backward with a clear error") {
  Tensor x = leaf({1.0, 2.0});
  // First order works, with or without create_graph.
  Tensor y = apply_function<CubeOnce>("cube_once", {x})[0];
  check_values(grad({sum(y)}, {x})[0], {3, 12});
  Tensor y2 = apply_function<CubeOnce>("cube_once", {x})[0];
  Tensor g = grad({sum(y2)}, {x}, {}, {.create_graph = true})[0];
  check_values(g, {3, 12});
  // Differentiating the gradient again goes through the once-differentiable backward: error.
  std::string msg = error_of([&] { grad({sum(g)}, {x}); });
  CAPTURE(msg);
  CHECK(has(msg, "the backward of 'cube_once'"));
  CHECK(has(msg, "is not differentiable (it is once-differentiable)"));
  CHECK(has(msg, "drop create_graph"));
  // Also when the gradient is mixed with differentiable terms, and through backward().
  Tensor y3 = apply_function<CubeOnce>("cube_once", {x})[0];
  Tensor g3 = grad({sum(add(y3, mul(x, x)))}, {x}, {}, {.create_graph = true})[0];
  check_values(g3, {3 + 2, 12 + 4});
  CHECK(has(error_of([&] { sum(g3).backward(); }), "once-differentiable"));
  // The same rule without the flag differentiates twice.
  Tensor y4 = apply_function<Cube>("cube", {x})[0];
  Tensor g4 = grad({sum(y4)}, {x}, {}, {.create_graph = true})[0];
  check_values(grad({sum(g4)}, {x})[0], {6, 12});
}

TEST_CASE("custom function: non-differentiable outputs") {
  Tensor x = leaf({-1.0, 2.0, 3.0});
  auto outs = apply_function<ValuesAndIndices>("values_and_indices", {x});
  REQUIRE(outs.size() == 3);
  CHECK(outs[0].requires_grad());
  CHECK(outs[0].grad_fn() != nullptr);
  CHECK(outs[1].dtype() == DType::b8);
  CHECK_FALSE(outs[1].requires_grad());  // bool: never differentiable
  CHECK_FALSE(outs[2].requires_grad());  // marked
  CHECK(outs[2].grad_fn() == nullptr);
  CHECK(outs[1].to_vector<bool>() == std::vector<bool>{false, true, true});
  check_values(outs[2], {0, 1, 2});
  sum(outs[0]).backward();
  check_values(x.grad(), {2, 2, 2});
  CHECK(ValuesAndIndices::index_grad_was_zero);  // unused outputs get zero gradients
  CHECK(has(error_of([&] { sum(outs[2]).backward(); }), "does not require grad"));
}

TEST_CASE("custom function: an input returned unchanged gets its own history") {
  Tensor x = leaf({1.0, 2.0});
  Tensor y = apply_function<Identity>("identity", {x})[0];
  CHECK_FALSE(y.is_same(x));
  CHECK(y.storage() == x.storage());
  CHECK(y.grad_fn()->name() == "identity");
  CHECK(x.is_leaf());  // the input keeps its own (leaf) identity
  sum(mul(y, 3.0)).backward();
  check_values(x.grad(), {3, 3});
}

TEST_CASE("custom function: a backward that returns the wrong gradients is named") {
  Tensor x = leaf({1.0, 2.0, 3.0});
  Tensor w = leaf({1.0, 1.0, 1.0});
  std::string msg = error_of([&] { sum(apply_function<TooFewGradients>("too_few", {x, w})[0]).backward(); });
  CHECK(has(msg, "in backward of 'too_few'"));
  CHECK(has(msg, "backward returned 1 gradients, expected 2 (one per input)"));
  msg = error_of([&] { sum(apply_function<WrongShapeGradient>("wrong_shape", {x})[0]).backward(); });
  CHECK(has(msg, "backward of 'wrong_shape'"));
  CHECK(has(msg, "returned a gradient of shape (5,) for input 0, expected (3,)"));
  msg = error_of([&] { sum(apply_function<WrongDtypeGradient>("wrong_dtype", {x})[0]).backward(); });
  CHECK(has(msg, "returned a f32 gradient for input 0, expected f64"));
  Tensor x2 = leaf({1.0, 2.0, 3.0});
  sum(apply_function<BroadcastGradient>("broadcast_grad", {x2})[0]).backward();
  check_values(x2.grad(), {2, 2, 2});
}
