// Version counters: every in-place write bumps the storage's counter in every grad mode, a saved
// tensor that changed between forward and backward is an error that names the op, the tensor and
// the versions (the seed bug), and the in-place rules of leaves, views and read-only tables.
#include "tests/engine/engine_test_util.h"

using namespace gs;
using namespace gs_test;

TEST_CASE("version counter: the seed scenario (a saved buffer overwritten between forward and backward)") {
  // A layer multiplies by a constant table (think Legendre weights) that its op saves for backward.
  Tensor table = f64({0.5, 0.25, 0.125});
  Tensor x = leaf({1, 2, 3});
  Tensor y = mul(x, table);
  Tensor loss = sum(y);
  CHECK(table.version() == 0);
  const uint64_t mul_node = y.grad_fn()->sequence_nr();

  SUBCASE("a raw buffer broadcast (bytes overwritten, version bumped)") { overwrite_raw(table, 1.0); }
  SUBCASE("an in-place op under no_grad, as a buffer sync would run") {
    NoGradGuard ng;
    scale_(table, 2.0);
  }
  SUBCASE("a write through a view of the table") {
    Tensor first = select(table, 0, 0);
    add_into_(first, f64({1.0}));
  }
  CHECK(table.version() == 1);
  std::string msg = error_of([&] { loss.backward(); });
  CAPTURE(msg);
  CHECK(has(msg, "modified by an in-place operation"));
  CHECK(has(msg, fmt::format("input 1 of 'mul' (node #{})", mul_node)));  // which op, which input
  CHECK(has(msg, "(f64, (3,))"));                                        // dtype and shape
  CHECK(has(msg, "saved at version 0 and is now at version 1"));
  CHECK(has(msg, "anomaly mode"));
  // The failing node is named once (the engine adds no "in backward of ..." prefix to a message
  // that already names it).
  const std::string node = fmt::format("'mul' (node #{})", mul_node);
  CHECK(msg.find(node) != std::string::npos);
  CHECK(msg.find(node, msg.find(node) + 1) == std::string::npos);
  CHECK_FALSE(x.grad().defined());  // nothing was accumulated
}

TEST_CASE("version counter: the error names the creation scope under anomaly mode") {
  AnomalyModeGuard anomaly;
  Tensor table = f64({0.5, 0.25});
  Tensor x = leaf({1, 2});
  Tensor loss;
  {
    AnomalyScope block("sfno/block 2");
    AnomalyScope sht("sht");
    loss = sum(mul(x, table));
  }
  overwrite_raw(table, 0.0);
  std::string msg = error_of([&] { loss.backward(); });
  CHECK(has(msg, "created in scope 'sfno/block 2/sht'"));
  CHECK(has(msg, "input 1 of 'mul'"));
  CHECK(has(msg, "Look for in-place writes"));
}

TEST_CASE("version counter: saved outputs and saved inputs are both checked") {
  SUBCASE("exp saves its output") {
    Tensor x = leaf({0.0, 1.0});
    Tensor y = exp(x);
    Tensor loss = sum(y);
    overwrite_raw(y, 5.0);
    std::string msg = error_of([&] { loss.backward(); });
    CHECK(has(msg, "output 0 of 'exp'"));
    CHECK(has(msg, "saved at version 0 and is now at version 1"));
  }
  SUBCASE("x saved twice by mul(x, x), modified twice") {
    Tensor x = leaf({1, 2});
    Tensor h = add(x, 0.0);  // a non-leaf we may write to
    Tensor loss = sum(mul(h, h));
    {
      NoGradGuard ng;
      scale_(h, 2.0);
      scale_(h, 2.0);
    }
    CHECK(h.version() == 2);
    std::string msg = error_of([&] { loss.backward(); });
    CHECK(has(msg, "input 0 of 'mul'"));
    CHECK(has(msg, "saved at version 0 and is now at version 2"));
  }
  SUBCASE("writes to other tensors do not trip the check") {
    Tensor x = leaf({1, 2});
    Tensor table = f64({3, 4});
    Tensor unrelated = f64({3, 4});
    Tensor loss = sum(mul(x, table));
    overwrite_raw(unrelated, 0.0);
    Tensor copy = clone(table);  // its own counter
    overwrite_raw(copy, 0.0);
    loss.backward();
    check_values(x.grad(), {3, 4});
  }
}

TEST_CASE("version counter: writes bump the counter in every grad mode") {
  Tensor t = f64({1, 2, 3});
  scale_(t, 2.0);
  CHECK(t.version() == 1);
  {
    NoGradGuard ng;
    scale_(t, 2.0);
    add_into_(t, f64({1.0}));
  }
  CHECK(t.version() == 3);
  {
    InferenceModeGuard im;
    scale_(t, 0.5);
  }
  CHECK(t.version() == 4);
  check_values(t, {(4 + 1) * 0.5, (8 + 1) * 0.5, (12 + 1) * 0.5});
  CHECK(t.is_leaf());
  CHECK_FALSE(t.requires_grad());
  // Views see the bumps of their base and the other way round.
  Tensor v = slice(t, 0, 1, 3);
  scale_(v, 2.0);
  CHECK(t.version() == 5);
  CHECK(v.version() == 5);
  check_values(t, {2.5, 9, 13});
}

TEST_CASE("version counter: an optimizer step under no_grad invalidates graphs that saved the weight") {
  Tensor w = leaf({1.0, -1.0});
  Tensor x = f64({2, 3});
  Tensor loss = sum(mul(w, x));
  // A second graph, not yet backwarded, whose backward needs w's value. (mul(x, w) would not do:
  // its gradient for w is x, so w's saved copy is never unpacked and never checked.)
  Tensor loss_saving_w = sum(mul(w, w));
  loss.backward();
  {
    NoGradGuard ng;
    Tensor step = mul(w.grad(), -0.1);
    add_into_(w, step);  // allowed on a leaf under no_grad
  }
  CHECK(w.is_leaf());
  CHECK(w.requires_grad());
  CHECK(w.version() == 1);
  check_values(w, {0.8, -1.3});
  std::string msg = error_of([&] { loss_saving_w.backward(); });
  CAPTURE(msg);
  CHECK(has(msg, "input 0 of 'mul'"));
  CHECK(has(msg, "saved at version 0 and is now at version 1"));
}

TEST_CASE("version counter: in-place on a leaf that requires grad is an error while recording") {
  Tensor w = leaf({1, 2});
  std::string msg = error_of([&] { scale_(w, 2.0); });
  CHECK(has(msg, "scale_"));
  CHECK(has(msg, "a leaf tensor that requires grad (f64 (2,) on cpu) is being used in an in-place operation"));
  CHECK(has(msg, "NoGradGuard"));
  CHECK(w.version() == 0);  // refused before writing
  check_values(w, {1, 2});
  CHECK(has(error_of([&] { add_into_(w, f64({1.0})); }), "leaf"));
}

TEST_CASE("version counter: in-place through a view of a graph tensor rebases the base (PyTorch's CopySlices)") {
  Tensor x = leaf({1, 2, 3, 4}, {2, 2});
  SUBCASE("a view of a non-leaf") {
    // h = 2x; h[0] *= 3; loss = sum(h * w): d/dx = 2 w, times 3 on row 0.
    Tensor h = mul(x, 2.0);
    Tensor row = select(h, 0, 0);
    scale_(row, 3.0);
    CHECK(h.version() == 1);
    check_values(h, {6, 12, 6, 8});
    CHECK(h.grad_fn()->name() == "copy_slices");
    sum(mul(h, f64({1, 10, 100, 1000}, {2, 2}))).backward();
    check_values(x.grad(), {6, 60, 200, 2000});
  }
  SUBCASE("the written view itself carries the write's history") {
    Tensor h = mul(x, 1.0);
    Tensor row = select(h, 0, 1);
    scale_(row, 5.0);
    sum(mul(row, f64({1, 2}))).backward();  // row = 5 * x[1, :]
    check_values(x.grad(), {0, 0, 5, 10});
  }
  SUBCASE("a view of a leaf that requires grad is refused, as in PyTorch") {
    Tensor row = select(x, 0, 1);
    std::string msg = error_of([&] { scale_(row, 3.0); });
    CHECK(has(msg, "in-place write to a view"));
    CHECK(has(msg, "a view of a leaf tensor that requires grad (PyTorch refuses this too)"));
    CHECK(x.version() == 0);
  }
  SUBCASE("a view of a plain tensor written with a value that requires grad: the base gains history") {
    Tensor buf = zeros({2, 2}, DType::f64);
    Tensor row = select(buf, 0, 0);
    add_into_(row, select(x, 0, 0));
    CHECK(buf.version() == 1);
    CHECK_FALSE(buf.is_leaf());
    sum(mul(buf, f64({1, 10, 100, 1000}, {2, 2}))).backward();
    check_values(x.grad(), {1, 10, 0, 0});
  }
  SUBCASE("a view of a plain tensor written with plain values is fine") {
    Tensor buf = zeros({2, 2}, DType::f64);
    Tensor row = select(buf, 0, 1);
    add_into_(row, f64({5.0}));
    check_values(buf, {0, 0, 5, 5});
    CHECK(buf.version() == 1);
  }
  SUBCASE("a detach() alias of a graph tensor written with a value that requires grad is refused") {
    Tensor h = mul(x, 1.0);
    Tensor d = h.detach();
    CHECK(has(error_of([&] { add_into_(d, x); }), "detach() alias"));
  }
}

TEST_CASE("version counter: a recorded in-place op on a non-leaf rebases its history") {
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 2.0);
  scale_(h, 3.0);
  CHECK(h.version() == 1);
  REQUIRE(h.grad_fn() != nullptr);
  CHECK(h.grad_fn()->name() == "scale_");
  add_into_(h, x);  // h = 6x + x
  CHECK(h.grad_fn()->name() == "add_into_");
  Tensor loss = sum(mul(h, h));  // d/dx = 2 h * 7
  loss.backward();
  check_values(x.grad(), {2 * 7 * 7, 2 * 14 * 7});
  // A plain tensor written with a value that requires grad joins the graph.
  Tensor x2 = leaf({1, 2});
  Tensor buf = f64({10, 20});
  add_into_(buf, mul(x2, x2));
  CHECK_FALSE(buf.is_leaf());
  CHECK(buf.requires_grad());
  sum(buf).backward();
  check_values(x2.grad(), {2, 4});
  // In-place after the tensor was saved by another op: that op's backward fails.
  Tensor x3 = leaf({1, 2});
  Tensor h3 = mul(x3, 1.0);
  Tensor saved_by_exp = exp(h3);  // exp saves its output only: this one is fine
  Tensor saved_by_mul = mul(h3, h3);
  scale_(h3, 2.0);
  sum(saved_by_exp).backward();
  check_values(x3.grad(), {std::exp(1.0), std::exp(2.0)});
  CHECK(has(error_of([&] { sum(saved_by_mul).backward(); }), "input 0 of 'mul'"));
}

TEST_CASE("version counter: a non-leaf changed behind autograd's back cannot be used again") {
  Tensor x = leaf({1, 2});
  Tensor h = mul(x, 2.0);
  SUBCASE("written under no_grad") {
    NoGradGuard ng;
    scale_(h, 3.0);
  }
  SUBCASE("written raw") { overwrite_raw(h, 7.0); }
  SUBCASE("written through a detached alias") {
    Tensor d = h.detach();
    scale_(d, 3.0);  // d is no graph tensor: allowed, but it shares h's storage
  }
  CHECK(h.version() == 1);
  std::string msg = error_of([&] { mul(h, 1.0); });
  CHECK(has(msg, "mul: an input (f64 (2,) on cpu) was modified in place outside autograd's record"));
  CHECK(has(msg, "from version 0 to 1"));
  CHECK(has(msg, "clone()"));
  // A recorded in-place op on it is refused as well.
  msg = error_of([&] { scale_(h, 2.0); });
  CHECK(has(msg, "was modified in place outside autograd's record before this op (version 0 -> 1)"));
  CHECK(h.version() == 1);  // refused before writing
  // Reading it under no_grad is still fine (no history is built on it).
  NoGradGuard ng;
  CHECK(mul(h, 1.0).numel() == 2);
}

TEST_CASE("version counter: read-only storage refuses in-place writes in every mode") {
  Tensor table = f64({1, 2, 3, 4}, {2, 2});
  table.storage()->set_read_only("a cached Legendre table, shared by every layer with the same grid");
  std::string msg = error_of([&] { scale_(table, 2.0); });
  CHECK(has(msg, "scale_: cannot write in place to a read-only tensor (f64 (2, 2) on cpu)"));
  CHECK(has(msg, "a cached Legendre table, shared by every layer"));
  {
    NoGradGuard ng;
    CHECK(has(error_of([&] { scale_(table, 2.0); }), "read-only"));
  }
  {
    InferenceModeGuard im;
    CHECK(has(error_of([&] { add_into_(table, f64({1.0})); }), "read-only"));
  }
  // Views share the storage, so they are read-only too.
  Tensor row = select(table, 0, 1);
  CHECK(has(error_of([&] { scale_(row, 2.0); }), "read-only"));
  CHECK(table.version() == 0);
  check_values(table, {1, 2, 3, 4});
  // Reading works, and a clone is writable.
  Tensor c = clone(table);
  scale_(c, 2.0);
  check_values(c, {2, 4, 6, 8});
  Tensor x = leaf({1, 1});
  sum(mul(x, row)).backward();
  check_values(x.grad(), {3, 4});
}

TEST_CASE("version counter: the in-place ops of ops/inplace.h follow the same contract") {
  SUBCASE("the seed scenario through copy_ under no_grad (a buffer broadcast)") {
    Tensor table = f64({0.5, 0.25, 0.125});
    Tensor x = leaf({1, 2, 3});
    Tensor loss = sum(mul(x, table));
    {
      NoGradGuard ng;
      copy_(table, f64({1.0, 1.0, 1.0}));
    }
    CHECK(table.version() == 1);
    std::string msg = error_of([&] { loss.backward(); });
    CHECK(has(msg, "input 1 of 'mul'"));
    CHECK(has(msg, "saved at version 0 and is now at version 1"));
  }
  SUBCASE("every op bumps the version once, in every mode") {
    Tensor t = f64({1, 2});
    fill_(t, 3.0);
    add_(t, 1.0);
    {
      NoGradGuard ng;
      mul_(t, 2.0);
      add_(t, f64({1.0, 2.0}));
    }
    {
      InferenceModeGuard im;
      mul_(t, f64({0.5}));
    }
    CHECK(t.version() == 5);
    check_values(t, {4.5, 5});
    zero_(t);
    CHECK(t.version() == 6);
  }
  SUBCASE("leaf, view and read-only rules") {
    Tensor w = leaf({1, 2});
    CHECK(has(error_of([&] { fill_(w, 0.0); }), "leaf"));
    CHECK(has(error_of([&] { add_(w, f64({1.0})); }), "leaf"));
    Tensor h = mul(w, 2.0);
    Tensor row = select(h, 0, 0);
    mul_(row, 2.0);  // a view of a non-leaf: the base's history is rebased (copy_slices)
    CHECK(h.grad_fn()->name() == "copy_slices");
    Tensor table = f64({1, 2});
    table.storage()->set_read_only("shared Legendre table");
    NoGradGuard ng;
    CHECK(has(error_of([&] { zero_(table); }), "shared Legendre table"));
    CHECK(table.version() == 0);
    zero_(w);  // allowed on a leaf under no_grad (optimizer-style)
    check_values(w, {0, 0});
  }
  SUBCASE("a recorded in-place op on a non-leaf gives the right gradient") {
    Tensor x = leaf({1, 2});
    Tensor w = leaf({3, 4});
    Tensor h = mul(x, 2.0);
    mul_(h, w);     // h = 2 x w
    add_(h, x, 0.5);  // h = 2 x w + x / 2
    sum(h).backward();
    check_values(x.grad(), {2 * 3 + 0.5, 2 * 4 + 0.5});
    check_values(w.grad(), {2, 4});
  }
}
