// View ops (ops/view.h): storage sharing and write-through, copy-versus-view, Python-style bounds,
// and error messages.
#include "tests/ops/view_test_util.h"

namespace {

// Python's slice(start, end, step).indices(n) for step > 0, then the selected indices.
std::vector<int64_t> py_slice(int64_t n, int64_t start, int64_t end, int64_t step) {
  auto fix = [n](int64_t i) {
    if (i < 0) i += n;
    return std::min(std::max<int64_t>(i, 0), n);
  };
  std::vector<int64_t> r;
  for (int64_t i = fix(start); i < fix(end); i += step) r.push_back(i);
  return r;
}

}  // namespace

TEST_CASE("views: every view op shares storage, view base and version with its input") {
  Tensor base = iota({2, 3, 4});
  struct Case {
    std::string label;
    Tensor view;
  };
  std::vector<Case> cases = {
      {"reshape (contiguous)", gs::reshape(base, {6, 4})},
      {"view", gs::view(base, {4, -1})},
      {"flatten", gs::flatten(base, 1)},
      {"permute", gs::permute(base, {2, 0, 1})},
      {"transpose", gs::transpose(base, 0, 2)},
      {"slice", gs::slice(base, 2, 1, 4, 2)},
      {"narrow", gs::narrow(base, 1, 1, 2)},
      {"select", gs::select(base, 0, 1)},
      {"expand", gs::expand(gs::select(base, 2, 0), {5, 2, 3})},
      {"squeeze", gs::squeeze(gs::unsqueeze(base, 1), 1)},
      {"unsqueeze", gs::unsqueeze(base, -1)},
      {"squeeze all", gs::squeeze(gs::unsqueeze(base, 0))},
      {"view of a view", gs::select(gs::transpose(base, 0, 1), 0, 2)},
  };
  for (auto& c : cases) {
    INFO(c.label);
    check_shares(c.view, base);
    // A write through the view bumps the shared version counter.
    uint64_t before = base.version();
    write_through(c.view, -7.0);
    CHECK(base.version() == before + 1);
    CHECK(c.view.version() == base.version());
    for (double v : vals(c.view)) CHECK(v == -7.0);
    // Restore.
    gs::copy_values(base, iota({2, 3, 4}));
  }
}

TEST_CASE("views: writes through a view land in the right base elements") {
  Tensor base = iota({3, 4});
  Tensor col = gs::select(base, 1, -1);  // base[:, 3]
  write_through(col, 100.0);
  CHECK(vals(base) == std::vector<double>{0, 1, 2, 100, 4, 5, 6, 100, 8, 9, 10, 100});
  Tensor t = gs::transpose(base, 0, 1);  // (4, 3)
  Tensor row = gs::slice(gs::select(t, 0, 0), 0, 0, 3, 2);  // base[0, 0] and base[2, 0]
  write_through(row, -1.0);
  CHECK(vals(base) == std::vector<double>{-1, 1, 2, 100, 4, 5, 6, 100, -1, 9, 10, 100});
  // Writing through the base is visible in the view too.
  Tensor v = gs::view(base, {2, 6});
  base.data<double>()[7] = 55.0;
  CHECK(vals(v)[7] == 55.0);
  // Raw data of a view points at its first element.
  Tensor s = gs::select(base, 0, 2);
  CHECK(s.data<double>() == base.data<double>() + 8);
  CHECK(s.offset() == 8);
}

TEST_CASE("views: values of view ops match index arithmetic") {
  Tensor b = iota({2, 3, 4});
  auto at = [](int64_t i, int64_t j, int64_t k) { return static_cast<double>(i * 12 + j * 4 + k); };
  {
    Tensor p = gs::permute(b, {2, 0, 1});
    CHECK(p.sizes() == Shape{4, 2, 3});
    CHECK(p.strides() == Shape{1, 12, 4});
    std::vector<double> want;
    for (int64_t k = 0; k < 4; ++k)
      for (int64_t i = 0; i < 2; ++i)
        for (int64_t j = 0; j < 3; ++j) want.push_back(at(i, j, k));
    CHECK(vals(p) == want);
    CHECK(!p.is_contiguous());
  }
  {
    Tensor p = gs::permute(b, {-1, 0, -2});  // negative dims
    CHECK(p.sizes() == Shape{4, 2, 3});
  }
  {
    Tensor t = gs::transpose(b, -1, 0);
    CHECK(t.sizes() == Shape{4, 3, 2});
    CHECK(vals(t)[1] == at(1, 0, 0));
  }
  {
    Tensor s = gs::select(b, -2, 1);
    CHECK(s.sizes() == Shape{2, 4});
    CHECK(vals(s) == std::vector<double>{at(0, 1, 0), at(0, 1, 1), at(0, 1, 2), at(0, 1, 3), at(1, 1, 0),
                                         at(1, 1, 1), at(1, 1, 2), at(1, 1, 3)});
  }
  {
    Tensor n = gs::narrow(b, 2, -3, 2);  // negative start
    CHECK(n.sizes() == Shape{2, 3, 2});
    CHECK(vals(n)[0] == at(0, 0, 1));
    CHECK(vals(n)[1] == at(0, 0, 2));
  }
  {
    Tensor u = gs::unsqueeze(b, 3);
    CHECK(u.sizes() == Shape{2, 3, 4, 1});
    CHECK(gs::unsqueeze(b, 0).sizes() == Shape{1, 2, 3, 4});
    CHECK(gs::unsqueeze(b, -4).sizes() == Shape{1, 2, 3, 4});
    CHECK(gs::squeeze(b).sizes() == Shape{2, 3, 4});
  }
  {
    Tensor x = iota({1, 3, 1});
    CHECK(gs::squeeze(x).sizes() == Shape{3});
    CHECK(gs::squeeze(x, 0).sizes() == Shape{3, 1});
    CHECK(gs::squeeze(x, -1).sizes() == Shape{1, 3});
    CHECK(gs::squeeze(x, 1).sizes() == Shape{1, 3, 1});  // size 3: unchanged
    CHECK(gs::squeeze(iota({})).sizes() == Shape{});
    CHECK(gs::squeeze(iota({}), 0).sizes() == Shape{});
  }
  {
    CHECK(gs::flatten(b).sizes() == Shape{24});
    CHECK(gs::flatten(b, 0, 1).sizes() == Shape{6, 4});
    CHECK(gs::flatten(b, -2).sizes() == Shape{2, 12});
    CHECK(gs::flatten(iota({})).sizes() == Shape{1});
    CHECK(vals(gs::flatten(b)) == vals(b));
    CHECK(contains(error_of([&] { gs::flatten(b, 2, 1); }), "flatten"));
  }
  {
    Tensor e = gs::expand(iota({3, 1}), {2, 3, 4});
    CHECK(e.sizes() == Shape{2, 3, 4});
    CHECK(e.strides() == Shape{0, 1, 0});
    auto v = vals(e);
    for (int64_t i = 0; i < 24; ++i) CHECK(v[i] == static_cast<double>((i / 4) % 3));
    CHECK(gs::expand(iota({3, 1}), {-1, 5}).sizes() == Shape{3, 5});
    CHECK(gs::expand(iota({}), {2, 2}).sizes() == Shape{2, 2});
  }
}

TEST_CASE("views: reshape is a view when the strides allow it and a copy otherwise") {
  Tensor base = iota({3, 4});
  // Contiguous: a view.
  Tensor r = gs::reshape(base, {2, 6});
  check_shares(r, base);
  CHECK(vals(r) == vals(base));
  CHECK(gs::reshape(base, {-1}).sizes() == Shape{12});
  CHECK(gs::reshape(base, {2, -1, 3}).sizes() == Shape{2, 2, 3});
  // Transposed: no strides can view (4, 3) memory as 12 in row-major order, so reshape copies.
  Tensor t = gs::transpose(base, 0, 1);
  Tensor c = gs::reshape(t, {12});
  CHECK(c.storage() != base.storage());
  CHECK(!c.is_view());
  CHECK(c.is_contiguous());
  CHECK(vals(c) == std::vector<double>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  // The copy is independent of the base.
  uint64_t v0 = base.version();
  write_through(c, 9.0);
  CHECK(vals(base)[0] == 0.0);
  CHECK(base.version() == v0);
  // Some non-contiguous tensors can still be viewed: splitting a dim of a transpose.
  Tensor sv = gs::reshape(t, {2, 2, 3});
  check_shares(sv, base);
  CHECK(vals(sv) == vals(t));
  // A stepped slice whose rows stay strided can merge size-1 dims without copying.
  Tensor s = gs::slice(base, 1, 0, 4, 2);  // (3, 2) with strides (4, 2)
  Tensor s1 = gs::reshape(s, {3, 1, 2});
  check_shares(s1, base);
  CHECK(vals(s1) == vals(s));
  // ... and even flatten: rows 4 apart holding 2 columns 2 apart are one run with stride 2.
  Tensor s2 = gs::reshape(s, {6});
  check_shares(s2, base);
  CHECK(s2.strides() == Shape{2});
  CHECK(vals(s2) == std::vector<double>{0, 2, 4, 6, 8, 10});
  // A narrowed row range cannot be flattened without copying.
  Tensor n = gs::slice(base, 1, 0, 3);  // (3, 3) with strides (4, 1)
  Tensor n2 = gs::reshape(n, {9});
  CHECK(n2.storage() != base.storage());
  CHECK(!n2.is_view());
  CHECK(vals(n2) == std::vector<double>{0, 1, 2, 4, 5, 6, 8, 9, 10});
  CHECK(contains(error_of([&] { gs::view(n, {9}); }), "view"));
  // Empty and 0-dim.
  CHECK(gs::reshape(iota({0, 3}), {3, 0}).sizes() == Shape{3, 0});
  CHECK(gs::reshape(iota({}), {1, 1}).sizes() == Shape{1, 1});
  CHECK(gs::reshape(iota({1}), {}).sizes() == Shape{});
}

TEST_CASE("views: squeeze / unsqueeze / flatten of non-contiguous tensors stay views") {
  Tensor base = iota({3, 4});
  Tensor t = gs::transpose(base, 0, 1);
  Tensor st = gs::slice(base, 1, 0, 4, 3);  // (3, 2), strides (4, 3)
  for (auto* x : {&t, &st}) {
    check_shares(gs::unsqueeze(*x, 0), base);
    check_shares(gs::unsqueeze(*x, 1), base);
    check_shares(gs::unsqueeze(*x, -1), base);
    check_shares(gs::squeeze(gs::unsqueeze(*x, 1)), base);
    check_shares(gs::squeeze(gs::unsqueeze(*x, 2), 2), base);
    check_shares(gs::squeeze(*x, 0), base);  // size > 1: unchanged, still a view
    CHECK(vals(gs::unsqueeze(*x, 1)) == vals(*x));
    CHECK(vals(gs::squeeze(gs::unsqueeze(*x, 0))) == vals(*x));
    check_shares(gs::flatten(gs::unsqueeze(*x, 1), 0, 1), base);
  }
}

// reshape on many strided layouts and target shapes: the values always follow row-major order, and
// when the result is a view, writing through it lands exactly on the input's elements.
TEST_CASE("views: reshape of strided inputs, checked by writing through the result") {
  struct Src {
    std::string label;
    std::function<Tensor(const Tensor&)> make;  // from a (4, 6, 2) base
  };
  std::vector<Src> srcs = {
      {"contiguous", [](const Tensor& b) { return b; }},
      {"transpose(0,1)", [](const Tensor& b) { return gs::transpose(b, 0, 1); }},
      {"transpose(1,2)", [](const Tensor& b) { return gs::transpose(b, 1, 2); }},
      {"permute(2,0,1)", [](const Tensor& b) { return gs::permute(b, {2, 0, 1}); }},
      {"slice dim0 step 2", [](const Tensor& b) { return gs::slice(b, 0, 0, 4, 2); }},
      {"slice dim1 step 2", [](const Tensor& b) { return gs::slice(b, 1, 1, 6, 2); }},
      {"slice dim2", [](const Tensor& b) { return gs::slice(b, 2, 1, 2); }},
      {"select dim1", [](const Tensor& b) { return gs::select(b, 1, 3); }},
      {"narrow dim1", [](const Tensor& b) { return gs::narrow(b, 1, 2, 3); }},
      {"unsqueeze+transpose", [](const Tensor& b) { return gs::transpose(gs::unsqueeze(b, 1), 0, 3); }},
  };
  auto factorizations = [](int64_t n) {
    std::vector<Shape> r = {{n}, {n, 1}, {1, n}, {1, n, 1}};
    for (int64_t a = 2; a <= n; ++a)
      if (n % a == 0) {
        r.push_back({a, n / a});
        for (int64_t b = 2; b <= n / a; ++b)
          if ((n / a) % b == 0) r.push_back({a, b, n / a / b}), r.push_back({a, 1, b, n / a / b});
      }
    return r;
  };
  for (const auto& src : srcs) {
    Tensor base = iota({4, 6, 2});
    Tensor x = src.make(base);
    for (const auto& shape : factorizations(x.numel())) {
      INFO(src.label << " " << gs::shape_str(x.sizes()) << " strides " << gs::shape_str(x.strides()) << " -> "
                     << gs::shape_str(shape));
      gs::copy_values(base, iota({4, 6, 2}));
      Tensor r = gs::reshape(x, shape);
      REQUIRE(r.sizes() == shape);
      CHECK(vals(r) == vals(x));
      if (x.is_contiguous()) CHECK(r.storage() == base.storage());
      if (r.storage() == base.storage()) {
        CHECK(r.is_view());
        std::vector<double> pattern(r.numel());
        for (size_t i = 0; i < pattern.size(); ++i) pattern[i] = -1.0 - static_cast<double>(i);
        gs::copy_values(r, gs::from_vector(pattern, shape));
        CHECK(vals(x) == pattern);
      } else {
        CHECK(!r.is_view());
        CHECK(contains(error_of([&] { gs::view(x, shape); }), "view"));
      }
    }
  }
}

TEST_CASE("views: reshape of an expanded (stride-0) tensor") {
  Tensor small = iota({3, 1});
  Tensor e = gs::expand(small, {2, 3, 4});
  Tensor v = gs::reshape(e, {6, 4});  // merging the stride-0 leading dim is impossible: copies
  CHECK(vals(v) == vals(e));
  Tensor k = gs::reshape(e, {2, 3, 2, 2});  // splitting a stride-0 dim: a view
  CHECK(vals(k) == vals(e));
  CHECK(k.storage() == small.storage());
  CHECK(vals(gs::reshape(e, {-1})) == vals(e));
}

TEST_CASE("views: reshape / view errors") {
  Tensor base = iota({3, 4});
  std::string msg = error_of([&] { gs::view(gs::transpose(base, 0, 1), {12}); });
  CHECK(contains(msg, "view"));
  CHECK(contains(msg, "reshape()"));
  CHECK(contains(msg, "(4, 3)"));
  CHECK(contains(msg, "(12,)"));
  msg = error_of([&] { gs::reshape(base, {5, -1}); });
  CHECK(contains(msg, "reshape"));
  CHECK(contains(msg, "12"));
  msg = error_of([&] { gs::reshape(base, {5, 2}); });
  CHECK(contains(msg, "(5, 2)"));
  CHECK(contains(msg, "(3, 4)"));
  CHECK(contains(error_of([&] { gs::reshape(base, {-1, -1}); }), "-1"));
  CHECK(contains(error_of([&] { gs::view(base, {-2, -6}); }), "view"));
  CHECK(contains(error_of([&] { gs::reshape(Tensor(), {1}); }), "undefined"));
  CHECK(contains(error_of([&] { gs::view(Tensor(), {1}); }), "undefined"));
}

TEST_CASE("views: slice follows Python bounds") {
  const int64_t n = 7;
  Tensor base = iota({2, n});
  struct Case {
    int64_t start, end, step;
  };
  std::vector<Case> cases = {{0, 7, 1},   {1, 5, 1},     {-3, 7, 1}, {0, -1, 1}, {-100, 100, 1}, {5, 2, 1},
                             {7, 9, 1},   {-8, -6, 1},   {0, 7, 2},  {1, 7, 3},  {-1, 7, 5},     {0, 7, 10},
                             {3, 3, 1},   {-2, -5, 1},   {2, 100, 4}, {100, 200, 1}, {-100, -50, 2}};
  for (auto c : cases) {
    INFO("slice(" << c.start << ", " << c.end << ", " << c.step << ")");
    Tensor s = gs::slice(base, 1, c.start, c.end, c.step);
    auto idx = py_slice(n, c.start, c.end, c.step);
    REQUIRE(s.sizes() == Shape{2, static_cast<int64_t>(idx.size())});
    std::vector<double> want;
    for (int64_t r = 0; r < 2; ++r)
      for (auto i : idx) want.push_back(static_cast<double>(r * n + i));
    CHECK(vals(s) == want);
    CHECK(s.storage() == base.storage());
  }
  // Negative dim, and slicing a slice.
  Tensor s = gs::slice(gs::slice(base, -1, 1, 7, 2), -1, 1, 3);  // columns 3, 5
  CHECK(vals(s) == std::vector<double>{3, 5, 10, 12});
  // Errors.
  CHECK(contains(error_of([&] { gs::slice(base, 1, 0, 7, 0); }), "step"));
  CHECK(contains(error_of([&] { gs::slice(base, 1, 0, 7, -1); }), "step"));
  CHECK(contains(error_of([&] { gs::slice(base, 2, 0, 1); }), "out of range"));
  CHECK(contains(error_of([&] { gs::slice(iota({}), 0, 0, 1); }), "0-dim"));
  std::string msg = error_of([&] { gs::narrow(base, 1, 5, 3); });
  CHECK(contains(msg, "narrow"));
  CHECK(contains(msg, "7"));
  CHECK(contains(error_of([&] { gs::narrow(base, 1, 0, -1); }), "narrow"));
}

TEST_CASE("views: select with negative indices, and its errors") {
  Tensor base = iota({3, 4});
  CHECK(vals(gs::select(base, 0, -1)) == std::vector<double>{8, 9, 10, 11});
  CHECK(vals(gs::select(base, 0, -3)) == std::vector<double>{0, 1, 2, 3});
  CHECK(vals(gs::select(base, -1, -4)) == std::vector<double>{0, 4, 8});
  CHECK(gs::select(gs::select(base, 0, 1), 0, 2).item<double>() == 6.0);
  CHECK(gs::select(gs::select(base, 0, 1), 0, 2).dim() == 0);
  std::string msg = error_of([&] { gs::select(base, 0, -4); });
  CHECK(contains(msg, "select"));
  CHECK(contains(msg, "-4"));
  CHECK(contains(msg, "out of range"));
  msg = error_of([&] { gs::select(base, 1, 4); });
  CHECK(contains(msg, "4"));
  CHECK(contains(msg, "out of range"));
  CHECK(contains(error_of([&] { gs::select(base, 2, 0); }), "out of range"));
  CHECK(contains(error_of([&] { gs::select(base, -3, 0); }), "out of range"));
  CHECK(contains(error_of([&] { gs::select(iota({}), 0, 0); }), "0-dim"));
  CHECK(contains(error_of([&] { gs::select(Tensor(), 0, 0); }), "undefined"));
}

TEST_CASE("views: expand errors") {
  Tensor t = iota({3, 1});
  std::string msg = error_of([&] { gs::expand(t, {4, 4}); });
  CHECK(contains(msg, "expand"));
  CHECK(contains(msg, "(3, 1)"));
  CHECK(contains(msg, "(4, 4)"));
  msg = error_of([&] { gs::expand(t, {3}); });
  CHECK(contains(msg, "fewer dims"));
  msg = error_of([&] { gs::expand(t, {-1, 3, 2}); });
  CHECK(contains(msg, "expand"));
  CHECK(contains(msg, "-1"));
  CHECK(contains(error_of([&] { gs::expand(iota({2, 3}), {2, 6}); }), "(2, 3)"));
  CHECK(contains(error_of([&] { gs::expand(Tensor(), {2}); }), "undefined"));
}

TEST_CASE("views: permute / transpose errors") {
  Tensor t = iota({2, 3, 4});
  std::string msg = error_of([&] { gs::permute(t, {0, 0, 1}); });
  CHECK(contains(msg, "permute"));
  CHECK(contains(msg, "twice"));
  CHECK(contains(error_of([&] { gs::permute(t, {0, -3, 1}); }), "twice"));  // -3 is dim 0
  msg = error_of([&] { gs::permute(t, {0, 1}); });
  CHECK(contains(msg, "expected 3 dims"));
  CHECK(contains(error_of([&] { gs::permute(t, {0, 1, 3}); }), "out of range"));
  CHECK(contains(error_of([&] { gs::transpose(t, 0, 3); }), "out of range"));
  CHECK(gs::transpose(iota({}), 0, 0).sizes() == Shape{});
  CHECK(gs::transpose(t, 1, 1).strides() == t.strides());
}

TEST_CASE("views: clone, contiguous and to() are copies or the input itself") {
  Tensor base = iota({3, 4});
  CHECK(gs::contiguous(base).is_same(base));
  Tensor t = gs::transpose(base, 0, 1);
  Tensor c = gs::contiguous(t);
  CHECK(c.is_contiguous());
  CHECK(c.storage() != base.storage());
  CHECK(vals(c) == vals(t));
  Tensor cl = gs::clone(base);
  CHECK(cl.storage() != base.storage());
  CHECK(vals(cl) == vals(base));
  CHECK(!cl.is_view());
  CHECK(gs::to(base, DType::f64).is_same(base));
  Tensor f = gs::to(t, DType::f32);
  CHECK(f.dtype() == DType::f32);
  CHECK(vals(f) == vals(t));
  Tensor z = gs::to(base, DType::c128);
  CHECK(z.dtype() == DType::c128);
  for (auto v : z.to_vector<c128>()) CHECK(v.imag() == 0.0);
  Tensor back = gs::to(gs::complex(base, gs::mul(base, 2.0)), DType::f64);
  CHECK(vals(back) == vals(base));
  CHECK(gs::to(base, gs::Device::cpu()).is_same(base));
}

// ---------------------------------------------------------------------------------------------
// Regressions: bugs these tests found (now fixed); the cases keep them fixed.

// Was a bug: ops/view.cpp squeeze(t, dim) and transpose(): on a 0-dim tensor the dim is never range-checked,
// so squeeze(scalar, 5) and transpose(scalar, 3, 5) succeed (sum() on a 0-dim tensor accepts only
// -1 and 0, via wrap_dim).
TEST_CASE("views: dims given for a 0-dim tensor are range-checked") {
  Tensor s = iota({});
  CHECK(contains(error_of([&] { gs::squeeze(s, 5); }), "out of range"));
  CHECK(contains(error_of([&] { gs::transpose(s, 3, 5); }), "out of range"));
  CHECK(gs::squeeze(s, 0).dim() == 0);
  CHECK(gs::squeeze(s, -1).dim() == 0);
}

// Was a bug: ops/view.cpp narrow(): on a 0-dim tensor wrap_dim(0, 0) passes and then t.sizes()[0] reads past
// the end of an empty vector (a segfault under AddressSanitizer, at view.cpp `n = t.sizes()[d]`).
TEST_CASE("views: narrow of a 0-dim tensor is an error") {
  CHECK(contains(error_of([&] { gs::narrow(iota({}), 0, 0, 1); }), "0-dim"));
}

// Was a bug: ops/view.cpp expand(): a negative target size other than -1 on an existing size-1 dim passes
// the check (have == 1) and makes a tensor of sizes (3, -2) with numel -6.
TEST_CASE("views: expand rejects negative sizes") {
  Tensor t = iota({3, 1});
  std::string msg = error_of([&] { gs::expand(t, {3, -2}); });
  CHECK(contains(msg, "expand"));
  CHECK(contains(msg, "-2"));
  CHECK(gs::expand(t, {3, 0}).sizes() == Shape{3, 0});  // expanding 1 to 0 is fine
}
