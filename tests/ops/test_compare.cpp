// Comparisons and where (ops/compare.h): against naive loops with broadcasting, NaN, complex and
// bool operands, and error messages.
#include "tests/ops/view_test_util.h"

TEST_CASE("compare: the six comparisons match naive loops, with broadcasting") {
  for (DType dt : {DType::f64, DType::f32, DType::i64}) {
    INFO(gs::dtype_name(dt));
    // a: (3,1,4) values i % 5; b: (2,4) (transposed storage) values (i * 3) % 5.
    Tensor a = gs::cast_copy(gs::from_vector(std::vector<double>{0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1}, {3, 1, 4}), dt);
    Tensor bb = gs::cast_copy(gs::from_vector(std::vector<double>{0, 4, 3, 2, 1, 0, 4, 3}, {4, 2}), dt);
    Tensor b = gs::transpose(bb, 0, 1);  // (2,4)
    auto av = vals(a), bv = vals(b);
    struct Op {
      std::string name;
      Tensor (*fn)(const Tensor&, const Tensor&);
      bool (*ref)(double, double);
    };
    std::vector<Op> ops = {
        {"eq", [](const Tensor& x, const Tensor& y) { return gs::eq(x, y); }, [](double x, double y) { return x == y; }},
        {"ne", [](const Tensor& x, const Tensor& y) { return gs::ne(x, y); }, [](double x, double y) { return x != y; }},
        {"lt", [](const Tensor& x, const Tensor& y) { return gs::lt(x, y); }, [](double x, double y) { return x < y; }},
        {"le", [](const Tensor& x, const Tensor& y) { return gs::le(x, y); }, [](double x, double y) { return x <= y; }},
        {"gt", [](const Tensor& x, const Tensor& y) { return gs::gt(x, y); }, [](double x, double y) { return x > y; }},
        {"ge", [](const Tensor& x, const Tensor& y) { return gs::ge(x, y); }, [](double x, double y) { return x >= y; }},
    };
    for (const auto& op : ops) {
      INFO(op.name);
      Tensor m = op.fn(a, b);
      CHECK(m.dtype() == DType::b8);
      REQUIRE(m.sizes() == Shape{3, 2, 4});
      auto mv = m.to_vector<bool>();
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 2; ++j)
          for (int64_t k = 0; k < 4; ++k) CHECK(mv[i * 8 + j * 4 + k] == op.ref(av[i * 4 + k], bv[j * 4 + k]));
      CHECK(!m.requires_grad());
    }
    // Scalar overloads.
    auto as = [&](Tensor m) { return m.to_vector<bool>(); };
    std::vector<bool> eq2, lt2, le2, gt2, ge2;
    for (double x : av) eq2.push_back(x == 2), lt2.push_back(x < 2), le2.push_back(x <= 2), gt2.push_back(x > 2),
        ge2.push_back(x >= 2);
    CHECK(as(gs::eq(a, 2.0)) == eq2);
    CHECK(as(gs::lt(a, 2.0)) == lt2);
    CHECK(as(gs::le(a, 2.0)) == le2);
    CHECK(as(gs::gt(a, 2.0)) == gt2);
    CHECK(as(gs::ge(a, 2.0)) == ge2);
  }
}

TEST_CASE("compare: NaN, complex and bool operands") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = gs::from_vector(std::vector<double>{nan, 1.0, nan});
  Tensor y = gs::from_vector(std::vector<double>{nan, nan, 2.0});
  CHECK(gs::eq(x, y).to_vector<bool>() == std::vector<bool>{false, false, false});
  CHECK(gs::ne(x, y).to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(gs::lt(x, y).to_vector<bool>() == std::vector<bool>{false, false, false});
  CHECK(gs::ge(x, y).to_vector<bool>() == std::vector<bool>{false, false, false});
  CHECK(gs::isfinite(gs::from_vector(std::vector<double>{nan, 1.0, std::numeric_limits<double>::infinity(),
                                                         -std::numeric_limits<double>::infinity()}))
            .to_vector<bool>() == std::vector<bool>{false, true, false, false});
  // Complex: eq / ne only.
  Tensor z = gs::from_vector(std::vector<c128>{{1, 2}, {1, 2}, {3, 0}});
  Tensor w = gs::from_vector(std::vector<c128>{{1, 2}, {1, -2}, {3, 0}});
  CHECK(gs::eq(z, w).to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(gs::ne(z, w).to_vector<bool>() == std::vector<bool>{false, true, false});
  CHECK(gs::eq(z, 3.0).to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(gs::isfinite(gs::from_vector(std::vector<c128>{{1, nan}, {1, 1}})).to_vector<bool>() ==
        std::vector<bool>{false, true});
  std::string msg = error_of([&] { gs::lt(z, w); });
  CHECK(contains(msg, "lt"));
  CHECK(contains(msg, "c128"));
  CHECK(contains(error_of([&] { gs::ge(z, 1.0); }), "ge"));
  // Bool masks: eq / ne / logical ops.
  Tensor p = gs::from_vector(std::vector<bool>{true, true, false, false});
  Tensor q = gs::from_vector(std::vector<bool>{true, false, true, false});
  CHECK(gs::eq(p, q).to_vector<bool>() == std::vector<bool>{true, false, false, true});
  CHECK(gs::ne(p, q).to_vector<bool>() == std::vector<bool>{false, true, true, false});
  CHECK(gs::logical_and(p, q).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK(gs::logical_not(p).to_vector<bool>() == std::vector<bool>{false, false, true, true});
  CHECK(gs::logical_and(gs::reshape(p, {4, 1}), q).sizes() == Shape{4, 4});
  CHECK(contains(error_of([&] { gs::lt(p, q); }), "bool"));
  CHECK(gs::all_true(gs::logical_not(gs::logical_and(p, gs::logical_not(p)))));
  CHECK(!gs::all_true(p));
  CHECK(gs::all_true(gs::from_vector(std::vector<bool>{}, {0})));
  CHECK(contains(error_of([&] { gs::logical_not(iota({2})); }), "bool"));
  CHECK(contains(error_of([&] { gs::logical_and(p, iota({4})); }), "bool"));
  CHECK(contains(error_of([&] { gs::all_true(iota({2})); }), "bool"));
}

TEST_CASE("compare: errors for dtype mismatch, bad broadcast and undefined inputs") {
  Tensor f = gs::ones({2, 3}, DType::f32), d = gs::ones({2, 3}, DType::f64);
  for (auto fn : {+[](const Tensor& a, const Tensor& b) { return gs::eq(a, b); },
                  +[](const Tensor& a, const Tensor& b) { return gs::lt(a, b); },
                  +[](const Tensor& a, const Tensor& b) { return gs::ge(a, b); }}) {
    CHECK(contains(error_of([&] { fn(f, d); }), "same dtype"));
    std::string msg = error_of([&] { fn(d, gs::ones({4}, DType::f64)); });
    CHECK(contains(msg, "(2, 3)"));
    CHECK(contains(msg, "(4,)"));
    CHECK(contains(error_of([&] { fn(Tensor(), d); }), "undefined"));
  }
  CHECK(contains(error_of([&] { gs::gt(Tensor(), 1.0); }), "undefined"));
}

TEST_CASE("where: selects elementwise with broadcasting of all three operands") {
  Tensor cond = gs::from_vector(std::vector<bool>{true, false, true}, {3, 1});
  Tensor a = iota({3, 4});
  Tensor b = gs::mul(iota({4}), -1.0);
  Tensor w = gs::where(cond, a, b);
  CHECK(w.sizes() == Shape{3, 4});
  CHECK(vals(w) == std::vector<double>{0, 1, 2, 3, 0, -1, -2, -3, 8, 9, 10, 11});
  // Condition broadcasting the other way, non-contiguous operands and a 0-dim branch.
  Tensor c2 = gs::gt(gs::transpose(iota({4, 3}), 0, 1), 5.0);  // (3,4): x > 5 where x = 3*j + i
  Tensor at = gs::transpose(gs::mul(iota({4, 3}), 10.0), 0, 1);  // (3,4), non-contiguous
  Tensor w2 = gs::where(c2, at, gs::scalar_tensor(-1.0, DType::f64));
  auto cv = c2.to_vector<bool>();
  auto av = vals(at), wv = vals(w2);
  for (int64_t i = 0; i < 12; ++i) CHECK(wv[i] == (cv[i] ? av[i] : -1.0));
  // All three broadcast: (2,1,1), (1,3,1), (4,)
  Tensor c3 = gs::from_vector(std::vector<bool>{false, true}, {2, 1, 1});
  Tensor w3 = gs::where(c3, iota({1, 3, 1}), gs::add(iota({4}), 100.0));
  CHECK(w3.sizes() == Shape{2, 3, 4});
  auto w3v = vals(w3);
  for (int64_t k = 0; k < 4; ++k) CHECK(w3v[k] == 100.0 + static_cast<double>(k));
  for (int64_t j = 0; j < 3; ++j)
    for (int64_t k = 0; k < 4; ++k) CHECK(w3v[12 + j * 4 + k] == static_cast<double>(j));
  // Complex and f32 branches.
  Tensor z = gs::complex(iota({3}), iota({3}));
  Tensor m = gs::from_vector(std::vector<bool>{true, false, true});
  CHECK(gs::where(m, z, gs::conj(z)).to_vector<c128>() == std::vector<c128>{{0, 0}, {1, -1}, {2, 2}});
  CHECK(gs::where(m, gs::ones({3}), gs::zeros({3})).dtype() == DType::f32);
  // Gradient routes to the taken branch, summed over broadcast dims.
  Tensor la = iota({3, 4}), lb = iota({4});
  la.set_requires_grad(true);
  lb.set_requires_grad(true);
  auto g = gs::grad({gs::sum(gs::where(cond, la, lb))}, {la, lb});
  CHECK(vals(g[0]) == std::vector<double>{1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1});
  CHECK(vals(g[1]) == std::vector<double>{1, 1, 1, 1});
}

TEST_CASE("where: errors") {
  Tensor a = iota({2, 3}), b = iota({2, 3});
  std::string msg = error_of([&] { gs::where(a, a, b); });
  CHECK(contains(msg, "where"));
  CHECK(contains(msg, "bool"));
  CHECK(contains(msg, "f64"));
  msg = error_of([&] { gs::where(gs::arange(6), a, b); });
  CHECK(contains(msg, "bool"));
  Tensor m = gs::gt(a, 2.0);
  CHECK(contains(error_of([&] { gs::where(m, a, gs::to(b, DType::f32)); }), "same dtype"));
  msg = error_of([&] { gs::where(m, a, iota({4})); });
  CHECK(contains(msg, "where"));
  CHECK(contains(msg, "(4,)"));
  msg = error_of([&] { gs::where(gs::from_vector(std::vector<bool>{true, false, true, false}), a, b); });
  CHECK(contains(msg, "(4,)"));
  CHECK(contains(error_of([&] { gs::where(Tensor(), a, b); }), "undefined"));
  CHECK(contains(error_of([&] { gs::where(m, Tensor(), b); }), "undefined"));
  CHECK(contains(error_of([&] { gs::where(m, a, Tensor()); }), "undefined"));
}

// ---------------------------------------------------------------------------------------------
// Regressions: bugs these tests found (now fixed); the cases keep them fixed.

// Was a bug: ops/compare.cpp scalar_of(): the double scalar is stored in the tensor's dtype, so for an i64
// tensor 0.5 becomes 0: with a = {-2, -1, 0, 1, 2}, lt(a, 0.5) gives {1,1,0,0,0} (a < 0), not
// {1,1,1,0,0}; eq(a, 0.5) is true at 0. PyTorch compares against the exact scalar.
TEST_CASE("compare: scalar overloads on i64 tensors compare against the exact scalar") {
  Tensor a = gs::from_vector(std::vector<int64_t>{-2, -1, 0, 1, 2});
  CHECK(gs::lt(a, 0.5).to_vector<bool>() == std::vector<bool>{true, true, true, false, false});
  CHECK(gs::le(a, -0.5).to_vector<bool>() == std::vector<bool>{true, true, false, false, false});
  CHECK(gs::gt(a, -1.5).to_vector<bool>() == std::vector<bool>{false, true, true, true, true});
  CHECK(gs::ge(a, 0.5).to_vector<bool>() == std::vector<bool>{false, false, false, true, true});
  CHECK(gs::eq(a, 0.5).to_vector<bool>() == std::vector<bool>{false, false, false, false, false});
  // Integral scalars are exact already.
  CHECK(gs::lt(a, 1.0).to_vector<bool>() == std::vector<bool>{true, true, true, false, false});
}
