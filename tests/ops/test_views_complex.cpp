// View ops (ops/view.h), complex ops (ops/complex_ops.h) and comparisons / where (ops/compare.h):
// storage sharing and write-through, copy-versus-view, Python-style bounds, and error messages.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/test_util.h"

namespace {

using gs::c128;
using gs::DType;
using gs::Shape;
using gs::Tensor;

// 0, 1, 2, ... in row-major order.
Tensor iota(const Shape& s, DType dtype = DType::f64) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  std::vector<double> v(n);
  std::iota(v.begin(), v.end(), 0.0);
  Tensor t = gs::from_vector(v, s);
  return dtype == DType::f64 ? t : gs::cast_copy(t, dtype);
}

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

using gs_test::error_of;

using gs_test::contains;

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

// Writes `value` into every element of `view` (through its strides) and bumps the version, the
// way an in-place op would.
void write_through(const Tensor& view, double value) {
  gs::copy_values(view, gs::full({}, value, view.dtype()));
  gs::bump_version(view);
}

void check_shares(const Tensor& view, const Tensor& base) {
  CHECK(view.storage() == base.storage());
  CHECK(view.is_view());
  REQUIRE(view.view_base().defined());
  // The view base is the root tensor that owns the geometry-free storage, not an intermediate view.
  Tensor root = base.is_view() ? base.view_base() : base;
  CHECK(view.view_base().is_same(root));
  CHECK(view.version() == base.version());
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Views

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
// Complex

TEST_CASE("complex: complex() builds from parts, with broadcasting and dtype promotion") {
  Tensor re = iota({2, 3}), im = gs::mul(iota({3}), -1.0);
  Tensor z = gs::complex(re, im);
  CHECK(z.dtype() == DType::c128);
  CHECK(z.sizes() == Shape{2, 3});
  auto v = z.to_vector<c128>();
  for (int64_t i = 0; i < 6; ++i) CHECK(v[i] == c128(static_cast<double>(i), -static_cast<double>(i % 3)));
  Tensor z32 = gs::complex(gs::to(re, DType::f32), gs::to(im, DType::f32));
  CHECK(z32.dtype() == DType::c64);
  CHECK(z32.to_vector<c128>() == v);
  // Non-contiguous parts.
  Tensor zt = gs::complex(gs::transpose(re, 0, 1), gs::transpose(re, 0, 1));
  CHECK(zt.to_vector<c128>()[1] == c128(3, 3));
  // Errors.
  std::string msg = error_of([&] { gs::complex(re, gs::to(im, DType::f32)); });
  CHECK(contains(msg, "complex"));
  CHECK(contains(msg, "same dtype"));
  msg = error_of([&] { gs::complex(z, z); });
  CHECK(contains(msg, "complex"));
  CHECK(contains(msg, "c128"));
  CHECK(contains(error_of([&] { gs::complex(iota({2}), iota({3})); }), "(2,)"));
  CHECK(contains(error_of([&] { gs::complex(gs::arange(3), gs::arange(3)); }), "i64"));
  CHECK(contains(error_of([&] { gs::complex(Tensor(), re); }), "undefined"));
}

TEST_CASE("complex: real() and imag() are write-through views") {
  for (DType dt : {DType::c128, DType::c64}) {
    INFO(gs::dtype_name(dt));
    Tensor z = gs::to(gs::complex(iota({2, 3}), gs::add(iota({2, 3}), 10.0)), dt);
    Tensor re = gs::real(z), im = gs::imag(z);
    CHECK(re.dtype() == gs::real_dtype(dt));
    CHECK(im.dtype() == gs::real_dtype(dt));
    CHECK(re.sizes() == z.sizes());
    CHECK(re.strides() == Shape{6, 2});
    check_shares(re, z);
    check_shares(im, z);
    CHECK(vals(re) == vals(iota({2, 3})));
    CHECK(vals(im) == std::vector<double>{10, 11, 12, 13, 14, 15});
    uint64_t v0 = z.version();
    write_through(gs::select(re, 1, 2), -1.0);  // Re z[:, 2] = -1
    write_through(gs::select(gs::select(im, 0, 0), 0, 0), -2.0);  // Im z[0, 0] = -2
    CHECK(z.version() == v0 + 2);
    auto zv = z.to_vector<c128>();
    CHECK(zv[0] == c128(0, -2));
    CHECK(zv[2] == c128(-1, 12));
    CHECK(zv[5] == c128(-1, 15));
    CHECK(zv[4] == c128(4, 14));
    // Views of a non-contiguous complex tensor.
    Tensor zt = gs::transpose(z, 0, 1);
    CHECK(vals(gs::imag(zt)) == std::vector<double>{-2, 13, 11, 14, 12, 15});
    check_shares(gs::real(zt), z);
  }
  Tensor r = iota({3});
  CHECK(gs::real(r).is_same(r));
  std::string msg = error_of([&] { gs::imag(r); });
  CHECK(contains(msg, "imag"));
  CHECK(contains(msg, "f64"));
  CHECK(contains(error_of([&] { gs::real(Tensor()); }), "undefined"));
}

TEST_CASE("complex: conj") {
  Tensor z = gs::complex(iota({2, 2}), gs::sub(1.0, iota({2, 2})));
  auto v = z.to_vector<c128>();
  auto c = gs::conj(z).to_vector<c128>();
  for (size_t i = 0; i < v.size(); ++i) CHECK(c[i] == std::conj(v[i]));
  CHECK(gs::conj(z).storage() != z.storage());
  Tensor r = iota({3});
  CHECK(gs::conj(r).is_same(r));
  // conj of a non-contiguous c64.
  Tensor zt = gs::transpose(gs::to(z, DType::c64), 0, 1);
  auto ct = gs::conj(zt).to_vector<c128>();
  CHECK(ct[1] == std::conj(v[2]));
}

TEST_CASE("complex: view_as_real / view_as_complex round trip") {
  Tensor z = gs::complex(iota({2, 3}), gs::add(iota({2, 3}), 0.5));
  Tensor r = gs::view_as_real(z);
  CHECK(r.sizes() == Shape{2, 3, 2});
  CHECK(r.strides() == Shape{6, 2, 1});
  CHECK(r.dtype() == DType::f64);
  check_shares(r, z);
  auto rv = vals(r);
  for (int64_t i = 0; i < 6; ++i) {
    CHECK(rv[2 * i] == static_cast<double>(i));
    CHECK(rv[2 * i + 1] == static_cast<double>(i) + 0.5);
  }
  Tensor back = gs::view_as_complex(r);
  CHECK(back.dtype() == DType::c128);
  CHECK(back.sizes() == z.sizes());
  CHECK(back.to_vector<c128>() == z.to_vector<c128>());
  check_shares(back, z);
  // Write through the real view shows up in the complex tensor.
  write_through(gs::select(gs::select(r, 0, 1), -1, 1), 42.0);  // Im z[1, :] = 42
  CHECK(z.to_vector<c128>() == std::vector<c128>{{0, 0.5}, {1, 1.5}, {2, 2.5}, {3, 42}, {4, 42}, {5, 42}});
  // From real data: (..., 2) contiguous-last becomes complex; round trip to the same values.
  Tensor x = gs::to(iota({4, 2}), DType::f32);
  Tensor xc = gs::view_as_complex(x);
  CHECK(xc.dtype() == DType::c64);
  CHECK(xc.sizes() == Shape{4});
  CHECK(xc.to_vector<c128>()[3] == c128(6, 7));
  CHECK(vals(gs::view_as_real(xc)) == vals(x));
  // Of a non-contiguous complex tensor, and of a selected row (even offset).
  Tensor zt = gs::transpose(z, 0, 1);
  CHECK(gs::view_as_real(zt).strides() == Shape{2, 6, 1});
  CHECK(gs::view_as_complex(gs::view_as_real(zt)).to_vector<c128>() == zt.to_vector<c128>());
  Tensor row = gs::select(iota({3, 4}), 0, 1);  // offset 4
  CHECK(gs::view_as_complex(gs::reshape(row, {2, 2})).to_vector<c128>() == std::vector<c128>{{4, 5}, {6, 7}});
}

TEST_CASE("complex: view_as_real / view_as_complex errors") {
  std::string msg = error_of([&] { gs::view_as_complex(iota({3, 3})); });
  CHECK(contains(msg, "view_as_complex"));
  CHECK(contains(msg, "size 2"));
  CHECK(contains(error_of([&] { gs::view_as_complex(gs::transpose(iota({2, 2}), 0, 1)); }), "stride"));
  CHECK(contains(error_of([&] { gs::view_as_complex(gs::arange(4)); }), "view_as_complex"));
  CHECK(contains(error_of([&] { gs::view_as_complex(iota({})); }), "view_as_complex"));
  // Odd storage offset: the pairs would straddle two complex numbers.
  msg = error_of([&] { gs::view_as_complex(gs::reshape(gs::slice(iota({5}), 0, 1, 5), {2, 2})); });
  CHECK(contains(msg, "offset"));
  // Odd leading stride.
  msg = error_of([&] { gs::view_as_complex(gs::slice(iota({3, 3}), 1, 0, 2)); });
  CHECK(contains(msg, "strides"));
  msg = error_of([&] { gs::view_as_real(iota({2})); });
  CHECK(contains(msg, "view_as_real"));
  CHECK(contains(msg, "f64"));
  CHECK(contains(error_of([&] { gs::view_as_real(Tensor()); }), "undefined"));
}

TEST_CASE("complex: abs is the modulus, in the real dtype") {
  Tensor z = gs::from_vector(std::vector<c128>{{3, 4}, {0, 0}, {-1, 0}, {0, -2}, {1e200, 1e200}});
  auto a = vals(gs::abs(z));
  CHECK(a[0] == 5.0);
  CHECK(a[1] == 0.0);
  CHECK(a[2] == 1.0);
  CHECK(a[3] == 2.0);
  CHECK(a[4] == doctest::Approx(std::sqrt(2.0) * 1e200));  // no overflow (hypot)
  Tensor z64 = gs::to(z, DType::c64);
  CHECK(gs::abs(gs::slice(z64, 0, 0, 4)).dtype() == DType::f32);
  CHECK(vals(gs::abs(gs::slice(z64, 0, 0, 4))) == std::vector<double>{5, 0, 1, 2});
  // The gradient of |z| at z = 0 is 0, not NaN.
  Tensor leaf = gs::from_vector(std::vector<c128>{{0, 0}, {3, 4}});
  leaf.set_requires_grad(true);
  auto g = gs::grad({gs::sum(gs::abs(leaf))}, {leaf})[0].to_vector<c128>();
  CHECK(g[0] == c128(0, 0));
  CHECK(g[1].real() == doctest::Approx(0.6));
  CHECK(g[1].imag() == doctest::Approx(0.8));
}

// ---------------------------------------------------------------------------------------------
// Comparisons and where

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
