// Forward values of the elementwise ops (ops/elementwise.h) against naive loops over the inputs'
// row-major values: odd shapes, broadcasting, non-contiguous inputs, 0-dim, f32 / f64 / complex,
// the scalar overloads and operators, and the error messages.
#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "tests/test_util.h"

namespace {

using gs::c128;
using gs::DType;
using gs::Shape;
using gs::Tensor;

// ---- independent reference machinery: values in row-major order, broadcasting by hand.

Shape naive_broadcast(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i + a.size() >= n ? a[i + a.size() - n] : 1;
    int64_t db = i + b.size() >= n ? b[i + b.size() - n] : 1;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// Row-major index into `in` of the element that broadcasts to out-linear index `lin`.
int64_t source_index(const Shape& out, int64_t lin, const Shape& in) {
  // Walk the dims from the last: out dim d pairs with in dim d - (out.size() - in.size()).
  int64_t r = 0, mult = 1;
  const size_t off = out.size() - in.size();
  for (size_t d = out.size(); d-- > 0;) {
    int64_t i = lin % out[d];
    lin /= out[d];
    if (d >= off) {
      int64_t n = in[d - off];
      r += (n == 1 ? 0 : i) * mult;
      mult *= n;
    }
  }
  return r;
}

template <typename V, typename F>
std::vector<V> ref_binary(const std::vector<V>& a, const Shape& sa, const std::vector<V>& b, const Shape& sb, F f) {
  Shape so = naive_broadcast(sa, sb);
  std::vector<V> out(numel(so));
  for (int64_t i = 0; i < numel(so); ++i) out[i] = f(a[source_index(so, i, sa)], b[source_index(so, i, sb)]);
  return out;
}

// A tensor of `dtype` filled by gen(i) in row-major order (no op involved: from_vector + cast).
Tensor make(const Shape& s, DType dtype, const std::function<double(int64_t)>& gen) {
  std::vector<double> v(numel(s));
  for (int64_t i = 0; i < numel(s); ++i) v[i] = gen(i);
  Tensor t = gs::from_vector(v, s);
  if (s.empty()) t = gs::from_vector(v, Shape{});
  return dtype == DType::f64 ? t : gs::cast_copy(t, dtype);
}

Tensor make_complex(const Shape& s, DType dtype, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-2.0, 2.0);
  std::vector<c128> v(numel(s));
  for (auto& x : v) x = c128(u(rng), u(rng));
  Tensor t = gs::from_vector(v, s);
  return dtype == DType::c128 ? t : gs::cast_copy(t, dtype);
}

// Values with |x| in [0.5, 2] and random sign (or positive), so division and pow are well defined.
std::function<double(int64_t)> magnitude_gen(uint64_t seed, bool positive) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return [rng, positive](int64_t) {
    std::uniform_real_distribution<double> u(0.5, 2.0);
    double v = u(*rng);
    return positive || ((*rng)() & 1) ? v : -v;
  };
}
std::function<double(int64_t)> uniform_gen(uint64_t seed, double lo, double hi) {
  auto rng = std::make_shared<std::mt19937_64>(seed);
  return [rng, lo, hi](int64_t) { return std::uniform_real_distribution<double>(lo, hi)(*rng); };
}

double tol_for(DType d) { return d == DType::f32 || d == DType::c64 ? 3e-6 : 1e-13; }

void check_values(const Tensor& got, const std::vector<double>& want, double rtol, double atol = -1) {
  if (atol < 0) atol = rtol;
  auto g = got.to_vector<double>();
  REQUIRE(g.size() == want.size());
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i) {
    bool same_nonfinite = (std::isnan(g[i]) && std::isnan(want[i])) || (std::isinf(want[i]) && g[i] == want[i]);
    if (!same_nonfinite && !(std::abs(g[i] - want[i]) <= atol + rtol * std::abs(want[i]))) {
      ++bad;
      FAIL_CHECK("element " << i << ": got " << g[i] << ", expected " << want[i]);
    }
  }
}

void check_values(const Tensor& got, const std::vector<c128>& want, double rtol) {
  auto g = got.to_vector<c128>();
  REQUIRE(g.size() == want.size());
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i)
    if (!(std::abs(g[i] - want[i]) <= rtol * (1.0 + std::abs(want[i])))) {
      ++bad;
      FAIL_CHECK("element " << i << ": got " << g[i] << ", expected " << want[i]);
    }
}

using gs_test::error_of;

using gs_test::contains;

// ---- the ops under test

struct BinaryOp {
  const char* name;
  Tensor (*fn)(const Tensor&, const Tensor&);
  double (*ref)(double, double);
  c128 (*cref)(c128, c128);  // null: real only
  bool positive_base;
};

const std::vector<BinaryOp> kBinary = {
    {"add", [](const Tensor& a, const Tensor& b) { return gs::add(a, b); }, [](double x, double y) { return x + y; },
     [](c128 x, c128 y) { return x + y; }, false},
    {"sub", [](const Tensor& a, const Tensor& b) { return gs::sub(a, b); }, [](double x, double y) { return x - y; },
     [](c128 x, c128 y) { return x - y; }, false},
    {"mul", [](const Tensor& a, const Tensor& b) { return gs::mul(a, b); }, [](double x, double y) { return x * y; },
     [](c128 x, c128 y) { return x * y; }, false},
    {"div", [](const Tensor& a, const Tensor& b) { return gs::div(a, b); }, [](double x, double y) { return x / y; },
     [](c128 x, c128 y) { return x / y; }, false},
    {"pow", [](const Tensor& a, const Tensor& b) { return gs::pow(a, b); },
     [](double x, double y) { return std::pow(x, y); }, nullptr, true},
};

// A pair of operands in some layout. `a` is positive when `positive` (for pow).
struct Layout {
  const char* label;
  std::function<std::pair<Tensor, Tensor>(DType, bool)> make;
};

const std::vector<Layout> kLayouts = {
    {"same odd shape (3,5,7)",
     [](DType d, bool pos) {
       return std::pair{make({3, 5, 7}, d, magnitude_gen(1, pos)), make({3, 5, 7}, d, magnitude_gen(2, false))};
     }},
    {"broadcast (3,1,5) with (4,5)",
     [](DType d, bool pos) {
       return std::pair{make({3, 1, 5}, d, magnitude_gen(3, pos)), make({4, 5}, d, magnitude_gen(4, false))};
     }},
    {"broadcast (4,5) with (3,1,5)",
     [](DType d, bool pos) {
       return std::pair{make({4, 5}, d, magnitude_gen(5, pos)), make({3, 1, 5}, d, magnitude_gen(6, false))};
     }},
    {"transposed (5,7) with contiguous (5,7)",
     [](DType d, bool pos) {
       return std::pair{gs::transpose(make({7, 5}, d, magnitude_gen(7, pos)), 0, 1),
                        make({5, 7}, d, magnitude_gen(8, false))};
     }},
    {"contiguous (3,5) with stepped slice (3,5) of (3,10)",
     [](DType d, bool pos) {
       return std::pair{make({3, 5}, d, magnitude_gen(9, pos)),
                        gs::slice(make({3, 10}, d, magnitude_gen(10, false)), 1, 1, 10, 2)};
     }},
    {"stepped slice (3,5) with broadcast (5,)",
     [](DType d, bool pos) {
       return std::pair{gs::slice(make({6, 5}, d, magnitude_gen(11, pos)), 0, 0, 6, 2),
                        make({5}, d, magnitude_gen(12, false))};
     }},
    {"permuted (3,5,7) with expanded stride-0 (3,5,7)",
     [](DType d, bool pos) {
       return std::pair{gs::permute(make({7, 3, 5}, d, magnitude_gen(13, pos)), {1, 2, 0}),
                        gs::expand(make({5, 1}, d, magnitude_gen(14, false)), {3, 5, 7})};
     }},
    {"0-dim with 0-dim",
     [](DType d, bool pos) {
       return std::pair{make({}, d, magnitude_gen(15, pos)), make({}, d, magnitude_gen(16, false))};
     }},
    {"0-dim with (3,4)",
     [](DType d, bool pos) {
       return std::pair{make({}, d, magnitude_gen(17, pos)), make({3, 4}, d, magnitude_gen(18, false))};
     }},
    {"(3,4) with 0-dim",
     [](DType d, bool pos) {
       return std::pair{make({3, 4}, d, magnitude_gen(19, pos)), make({}, d, magnitude_gen(20, false))};
     }},
    {"empty (0,3) with (3,)",
     [](DType d, bool pos) {
       return std::pair{make({0, 3}, d, magnitude_gen(21, pos)), make({3}, d, magnitude_gen(22, false))};
     }},
    // Large enough for the OpenMP-parallel paths (>= 32768 elements).
    {"large broadcast (20,1,1000) with (2,1000)",
     [](DType d, bool pos) {
       return std::pair{make({20, 1, 1000}, d, magnitude_gen(23, pos)), make({2, 1000}, d, magnitude_gen(24, false))};
     }},
    {"large transposed (40,1000) with contiguous (40,1000)",
     [](DType d, bool pos) {
       return std::pair{gs::transpose(make({1000, 40}, d, magnitude_gen(25, pos)), 0, 1),
                        make({40, 1000}, d, magnitude_gen(26, false))};
     }},
    {"large contiguous (200,200) with (200,200)",
     [](DType d, bool pos) {
       return std::pair{make({200, 200}, d, magnitude_gen(27, pos)), make({200, 200}, d, magnitude_gen(28, false))};
     }},
};

struct UnaryOp {
  const char* name;
  Tensor (*fn)(const Tensor&);
  double (*ref)(double);
  double lo, hi;  // input range
};

double gelu_erf_ref(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

const std::vector<UnaryOp> kUnary = {
    {"neg", [](const Tensor& a) { return gs::neg(a); }, [](double x) { return -x; }, -3, 3},
    {"exp", [](const Tensor& a) { return gs::exp(a); }, [](double x) { return std::exp(x); }, -3, 3},
    {"log", [](const Tensor& a) { return gs::log(a); }, [](double x) { return std::log(x); }, 0.1, 4},
    {"sqrt", [](const Tensor& a) { return gs::sqrt(a); }, [](double x) { return std::sqrt(x); }, 0.0, 4},
    {"rsqrt", [](const Tensor& a) { return gs::rsqrt(a); }, [](double x) { return 1.0 / std::sqrt(x); }, 0.1, 4},
    {"abs", [](const Tensor& a) { return gs::abs(a); }, [](double x) { return std::abs(x); }, -3, 3},
    {"tanh", [](const Tensor& a) { return gs::tanh(a); }, [](double x) { return std::tanh(x); }, -3, 3},
    {"sigmoid", [](const Tensor& a) { return gs::sigmoid(a); }, [](double x) { return 1.0 / (1.0 + std::exp(-x)); },
     -6, 6},
    {"relu", [](const Tensor& a) { return gs::relu(a); }, [](double x) { return x > 0 ? x : 0.0; }, -3, 3},
    {"erf", [](const Tensor& a) { return gs::erf(a); }, [](double x) { return std::erf(x); }, -3, 3},
    {"sign", [](const Tensor& a) { return gs::sign(a); },
     [](double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }, -3, 3},
    {"gelu", [](const Tensor& a) { return gs::gelu(a); }, gelu_erf_ref, -4, 4},
    {"gelu_tanh", [](const Tensor& a) { return gs::gelu(a, gs::GeluApprox::tanh); }, gelu_tanh_ref, -4, 4},
    {"silu", [](const Tensor& a) { return gs::silu(a); }, [](double x) { return x / (1.0 + std::exp(-x)); }, -6, 6},
    {"square", [](const Tensor& a) { return gs::square(a); }, [](double x) { return x * x; }, -3, 3},
};

}  // namespace

TEST_CASE("elementwise: binary ops match naive loops (f32, f64; odd shapes, broadcast, strides, 0-dim)") {
  for (DType dt : {DType::f64, DType::f32}) {
    for (const auto& op : kBinary) {
      for (const auto& layout : kLayouts) {
        // The large layouts exercise the OpenMP paths, which do not depend on the dtype: f32 only.
        if (dt == DType::f64 && std::string(layout.label).rfind("large", 0) == 0) continue;
        INFO(std::string(op.name) << " " << gs::dtype_name(dt) << " on " << std::string(layout.label));
        auto [a, b] = layout.make(dt, op.positive_base);
        Tensor out = op.fn(a, b);
        Shape want_shape = naive_broadcast(a.sizes(), b.sizes());
        CHECK(out.sizes() == want_shape);
        CHECK(out.dtype() == dt);
        CHECK(out.is_contiguous());
        CHECK(!out.requires_grad());
        auto want = ref_binary(a.to_vector<double>(), a.sizes(), b.to_vector<double>(), b.sizes(), op.ref);
        check_values(out, want, tol_for(dt));
      }
    }
  }
}

TEST_CASE("elementwise: complex binary ops (c64, c128) match std::complex") {
  for (DType dt : {DType::c128, DType::c64}) {
    for (const auto& op : kBinary) {
      if (!op.cref) continue;
      struct Case {
        const char* label;
        Tensor a, b;
      };
      std::vector<Case> cases = {
          {"same shape (3,5,7)", make_complex({3, 5, 7}, dt, 1), make_complex({3, 5, 7}, dt, 2)},
          {"broadcast (3,1,5) with (4,5)", make_complex({3, 1, 5}, dt, 3), make_complex({4, 5}, dt, 4)},
          {"transposed with 0-dim", gs::transpose(make_complex({5, 3}, dt, 5), 0, 1), make_complex({}, dt, 6)},
          {"stepped slice with broadcast", gs::slice(make_complex({3, 9}, dt, 7), 1, 0, 9, 3),
           make_complex({3, 1}, dt, 8)},
      };
      for (auto& c : cases) {
        INFO(std::string(op.name) << " " << gs::dtype_name(dt) << " on " << std::string(c.label));
        Tensor out = op.fn(c.a, c.b);
        CHECK(out.dtype() == dt);
        CHECK(out.sizes() == naive_broadcast(c.a.sizes(), c.b.sizes()));
        auto want = ref_binary(c.a.to_vector<c128>(), c.a.sizes(), c.b.to_vector<c128>(), c.b.sizes(), op.cref);
        check_values(out, want, tol_for(dt));
      }
    }
  }
  // complex_mul is mul by name.
  Tensor a = make_complex({2, 3}, DType::c128, 9), b = make_complex({3}, DType::c128, 10);
  check_values(gs::complex_mul(a, b),
               ref_binary(a.to_vector<c128>(), a.sizes(), b.to_vector<c128>(), b.sizes(),
                          [](c128 x, c128 y) { return x * y; }),
               1e-14);
}

TEST_CASE("elementwise: division and pow edge values follow IEEE / std::pow") {
  Tensor num = gs::from_vector(std::vector<double>{1.0, -1.0, 0.0, 2.0});
  Tensor den = gs::from_vector(std::vector<double>{0.0, 0.0, 0.0, -0.5});
  auto q = gs::div(num, den).to_vector<double>();
  CHECK(q[0] == std::numeric_limits<double>::infinity());
  CHECK(q[1] == -std::numeric_limits<double>::infinity());
  CHECK(std::isnan(q[2]));
  CHECK(q[3] == -4.0);
  Tensor base = gs::from_vector(std::vector<double>{-2.0, -2.0, 0.0, 4.0});
  Tensor ex = gs::from_vector(std::vector<double>{3.0, 0.5, 0.0, -0.5});
  auto p = gs::pow(base, ex).to_vector<double>();
  CHECK(p[0] == -8.0);
  CHECK(std::isnan(p[1]));
  CHECK(p[2] == 1.0);
  CHECK(p[3] == doctest::Approx(0.5));
}

TEST_CASE("elementwise: unary ops match std:: functions (f32, f64; odd shapes, strides, 0-dim, large)") {
  for (DType dt : {DType::f64, DType::f32}) {
    for (const auto& op : kUnary) {
      struct Case {
        const char* label;
        Tensor x;
      };
      uint64_t s = 100;
      std::vector<Case> cases = {
          {"(3,5,7)", make({3, 5, 7}, dt, uniform_gen(s++, op.lo, op.hi))},
          {"permuted (3,5,7)", gs::permute(make({7, 3, 5}, dt, uniform_gen(s++, op.lo, op.hi)), {1, 2, 0})},
          {"stepped slice (3,4) of (3,11)", gs::slice(make({3, 11}, dt, uniform_gen(s++, op.lo, op.hi)), 1, 2, 11, 3)},
          {"expanded (4,5) of (1,5)", gs::expand(make({1, 5}, dt, uniform_gen(s++, op.lo, op.hi)), {4, 5})},
          {"0-dim", make({}, dt, uniform_gen(s++, op.lo, op.hi))},
          {"empty (2,0)", make({2, 0}, dt, uniform_gen(s++, op.lo, op.hi))},
          {"large transposed (40,1000)",
           gs::transpose(make({1000, 40}, dt, uniform_gen(s++, op.lo, op.hi)), 0, 1)},
          {"large contiguous (40000,)", make({40000}, dt, uniform_gen(s++, op.lo, op.hi))},
      };
      for (auto& c : cases) {
        if (dt == DType::f64 && std::string(c.label).rfind("large", 0) == 0) continue;  // f32 covers them
        INFO(std::string(op.name) << " " << gs::dtype_name(dt) << " on " << std::string(c.label));
        Tensor out = op.fn(c.x);
        CHECK(out.sizes() == c.x.sizes());
        CHECK(out.dtype() == dt);
        CHECK(out.is_contiguous());
        std::vector<double> want;
        for (double v : c.x.to_vector<double>()) want.push_back(op.ref(v));
        check_values(out, want, dt == DType::f32 ? 2e-6 : 1e-13, dt == DType::f32 ? 2e-6 : 1e-14);
      }
    }
  }
}

TEST_CASE("elementwise: complex unary ops (neg, exp, square, abs, conj) match std::complex") {
  for (DType dt : {DType::c128, DType::c64}) {
    INFO(gs::dtype_name(dt));
    Tensor z = gs::transpose(make_complex({5, 3}, dt, 31), 0, 1);  // non-contiguous (3,5)
    auto v = z.to_vector<c128>();
    auto map = [&](auto f) {
      std::vector<c128> r;
      for (auto x : v) r.push_back(f(x));
      return r;
    };
    check_values(gs::neg(z), map([](c128 x) { return -x; }), tol_for(dt));
    check_values(gs::exp(z), map([](c128 x) { return std::exp(x); }), tol_for(dt));
    check_values(gs::square(z), map([](c128 x) { return x * x; }), tol_for(dt));
    check_values(gs::conj(z), map([](c128 x) { return std::conj(x); }), tol_for(dt));
    Tensor r = gs::abs(z);
    CHECK(r.dtype() == gs::real_dtype(dt));
    CHECK(r.sizes() == z.sizes());
    std::vector<double> want;
    for (auto x : v) want.push_back(std::abs(x));
    check_values(r, want, tol_for(dt));
  }
}

TEST_CASE("elementwise: scalar overloads and operators") {
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(gs::dtype_name(dt));
    Tensor t = gs::slice(make({4, 6}, dt, magnitude_gen(41, false)), 1, 0, 6, 2);  // (4,3), non-contiguous
    auto v = t.to_vector<double>();
    auto map = [&](auto f) {
      std::vector<double> r;
      for (double x : v) r.push_back(f(x));
      return r;
    };
    double tol = tol_for(dt);
    auto check = [&](const char* what, const Tensor& got, const std::vector<double>& want) {
      INFO(std::string(what));
      CHECK(got.dtype() == dt);
      CHECK(got.sizes() == t.sizes());
      check_values(got, want, tol);
    };
    check("add(t, 2.5)", gs::add(t, 2.5), map([](double x) { return x + 2.5; }));
    check("sub(t, 2.5)", gs::sub(t, 2.5), map([](double x) { return x - 2.5; }));
    check("sub(2.5, t)", gs::sub(2.5, t), map([](double x) { return 2.5 - x; }));
    check("mul(t, -1.5)", gs::mul(t, -1.5), map([](double x) { return x * -1.5; }));
    check("div(t, 4)", gs::div(t, 4.0), map([](double x) { return x / 4.0; }));
    check("div(3, t)", gs::div(3.0, t), map([](double x) { return 3.0 / x; }));
    check("t + 1", t + 1.0, map([](double x) { return x + 1.0; }));
    check("1 + t", 1.0 + t, map([](double x) { return 1.0 + x; }));
    check("t - 1", t - 1.0, map([](double x) { return x - 1.0; }));
    check("1 - t", 1.0 - t, map([](double x) { return 1.0 - x; }));
    check("t * 3", t * 3.0, map([](double x) { return x * 3.0; }));
    check("3 * t", 3.0 * t, map([](double x) { return 3.0 * x; }));
    check("t / 3", t / 3.0, map([](double x) { return x / 3.0; }));
    check("3 / t", 3.0 / t, map([](double x) { return 3.0 / x; }));
    check("-t", -t, map([](double x) { return -x; }));
    check("t + t", t + t, map([](double x) { return x + x; }));
    check("t - t", t - t, map([](double) { return 0.0; }));
    check("t * t", t * t, map([](double x) { return x * x; }));
    check("t / t", t / t, map([](double) { return 1.0; }));
    Tensor pos = gs::abs(t);
    auto pv = pos.to_vector<double>();
    for (double e : {2.0, 3.0, 0.5, -1.0, 0.0, 1.0, -2.5}) {
      INFO("pow(|t|, " << e << ")");
      std::vector<double> want;
      for (double x : pv) want.push_back(std::pow(x, e));
      Tensor got = gs::pow(pos, e);
      CHECK(got.dtype() == dt);
      check_values(got, want, dt == DType::f32 ? 4e-6 : 1e-13);
    }
    // pow with a tensor exponent of 0-dim equals the scalar overload.
    check_values(gs::pow(pos, make({}, dt, [](int64_t) { return 1.5; })), gs::pow(pos, 1.5).to_vector<double>(), tol);
  }
  // scalar_like: a 0-dim constant of the tensor's dtype.
  Tensor f = gs::zeros({2, 3}, DType::f32);
  f.set_requires_grad(true);
  Tensor s = gs::scalar_like(f, 2.5);
  CHECK(s.dim() == 0);
  CHECK(s.dtype() == DType::f32);
  CHECK(s.item<double>() == 2.5);
  CHECK(!s.requires_grad());
  // Complex tensors with real scalars.
  Tensor z = make_complex({3, 2}, DType::c128, 42);
  auto zv = z.to_vector<c128>();
  auto zmap = [&](auto fn) {
    std::vector<c128> r;
    for (auto x : zv) r.push_back(fn(x));
    return r;
  };
  check_values(gs::add(z, 1.5), zmap([](c128 x) { return x + 1.5; }), 1e-14);
  check_values(gs::sub(1.5, z), zmap([](c128 x) { return 1.5 - x; }), 1e-14);
  check_values(z * 2.0, zmap([](c128 x) { return x * 2.0; }), 1e-14);
  check_values(gs::div(1.0, z), zmap([](c128 x) { return 1.0 / x; }), 1e-14);
  CHECK((z / 2.0).dtype() == DType::c128);
}

TEST_CASE("elementwise: gelu, both forms, against the formulas") {
  Tensor x = gs::linspace(-6.0, 6.0, 121, DType::f64);
  auto xv = x.to_vector<double>();
  std::vector<double> erf_form, tanh_form;
  for (double v : xv) erf_form.push_back(gelu_erf_ref(v)), tanh_form.push_back(gelu_tanh_ref(v));
  check_values(gs::gelu(x), erf_form, 1e-14);
  check_values(gs::gelu(x, gs::GeluApprox::none), erf_form, 1e-14);
  check_values(gs::gelu(x, gs::GeluApprox::tanh), tanh_form, 1e-14);
  // The two forms are different functions that agree to about 1e-3.
  auto a = gs::gelu(x).to_vector<double>(), b = gs::gelu(x, gs::GeluApprox::tanh).to_vector<double>();
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) max_diff = std::max(max_diff, std::abs(a[i] - b[i]));
  CHECK(max_diff > 1e-6);
  CHECK(max_diff < 1e-3);
  CHECK(gs::gelu(gs::scalar_tensor(0.0, DType::f64)).item<double>() == 0.0);
  // Far tails, f32 and f64: no NaN, x for large x, about 0 for very negative x.
  for (DType dt : {DType::f32, DType::f64}) {
    INFO(gs::dtype_name(dt));
    Tensor big = gs::cast_copy(gs::from_vector(std::vector<double>{-100.0, -30.0, 30.0, 100.0}), dt);
    for (auto approx : {gs::GeluApprox::none, gs::GeluApprox::tanh}) {
      auto g = gs::gelu(big, approx).to_vector<double>();
      for (double v : g) CHECK(std::isfinite(v));
      CHECK(std::abs(g[0]) < 1e-30);
      CHECK(std::abs(g[1]) < 1e-30);
      CHECK(g[2] == doctest::Approx(30.0));
      CHECK(g[3] == doctest::Approx(100.0));
    }
  }
}

TEST_CASE("elementwise: sigmoid and silu are stable for |x| = 100 and beyond") {
  std::vector<double> xs = {-1000.0, -100.0, -30.0, 0.0, 30.0, 100.0, 1000.0};
  for (DType dt : {DType::f64, DType::f32}) {
    INFO(gs::dtype_name(dt));
    Tensor x = gs::cast_copy(gs::from_vector(xs), dt);
    auto s = gs::sigmoid(x).to_vector<double>();
    auto si = gs::silu(x).to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i) {
      CAPTURE(xs[i]);
      CHECK(std::isfinite(s[i]));
      CHECK(s[i] >= 0.0);
      CHECK(s[i] <= 1.0);
      CHECK(std::isfinite(si[i]));
    }
    CHECK(s[0] == 0.0);
    CHECK(s[3] == 0.5);
    CHECK(s[5] == 1.0);
    CHECK(s[6] == 1.0);
    CHECK(si[5] == 100.0);
    CHECK(si[6] == 1000.0);
    CHECK(si[0] == 0.0);  // -0.0 compares equal
    if (dt == DType::f64) {
      // sigmoid(-100) = e^-100 / (1 + e^-100): tiny but accurate, not 0 and not NaN.
      CHECK(s[1] == doctest::Approx(std::exp(-100.0)).epsilon(1e-12));
      CHECK(si[1] == doctest::Approx(-100.0 * std::exp(-100.0)).epsilon(1e-12));
      CHECK(s[2] == doctest::Approx(std::exp(-30.0) / (1 + std::exp(-30.0))).epsilon(1e-12));
    } else {
      CHECK(s[1] >= 0.0);
      CHECK(s[1] < 1e-40);
    }
    // The gradients are finite there too.
    Tensor leaf = gs::cast_copy(gs::from_vector(xs), dt);
    leaf.set_requires_grad(true);
    auto g = gs::grad({gs::sum(gs::add(gs::sigmoid(leaf), gs::silu(leaf)))}, {leaf});
    for (double v : g[0].to_vector<double>()) CHECK(std::isfinite(v));
  }
}

// gs::empty({2, 0}) gets strides (1, 1) from contiguous_strides, and Tensor::is_contiguous() then
// says false (it expects stride 0 for dim 0 after the size-0 dim). PyTorch calls every empty tensor
// contiguous. Engine bug (engine/tensor.cpp is_contiguous / engine/shape.cpp contiguous_strides).
TEST_CASE("elementwise: empty results are contiguous") {
  CHECK(gs::empty({2, 0}, DType::f64).is_contiguous());
  CHECK(gs::exp(gs::zeros({2, 0}, DType::f64)).is_contiguous());
  CHECK(gs::add(gs::zeros({3, 0}, DType::f64), gs::zeros({0}, DType::f64)).is_contiguous());
}

TEST_CASE("elementwise: sign and relu at zero, abs of negative zero") {
  Tensor x = gs::from_vector(std::vector<double>{-0.0, 0.0, -2.0, 3.0});
  CHECK(gs::sign(x).to_vector<double>() == std::vector<double>{0.0, 0.0, -1.0, 1.0});
  CHECK(gs::relu(x).to_vector<double>() == std::vector<double>{0.0, 0.0, 0.0, 3.0});
  auto a = gs::abs(x).to_vector<double>();
  CHECK(!std::signbit(a[0]));
  CHECK(a[2] == 2.0);
}

TEST_CASE("elementwise: outputs are fresh tensors; grad is recorded only when needed") {
  Tensor a = make({3, 4}, DType::f64, magnitude_gen(51, false));
  Tensor b = make({3, 4}, DType::f64, magnitude_gen(52, false));
  Tensor out = gs::add(a, b);
  CHECK(out.storage() != a.storage());
  CHECK(out.storage() != b.storage());
  CHECK(!out.is_view());
  CHECK(gs::exp(a).storage() != a.storage());
  a.set_requires_grad(true);
  CHECK(gs::mul(a, b).requires_grad());
  CHECK(!gs::mul(a, b).is_leaf());
  CHECK(gs::exp(a).requires_grad());
  CHECK(gs::add(a, 1.0).requires_grad());
  {
    gs::NoGradGuard ng;
    CHECK(!gs::mul(a, b).requires_grad());
    CHECK(!gs::exp(a).requires_grad());
  }
  // Masks and sign carry no gradient to the input.
  CHECK(gs::sign(a).to_vector<double>().size() == 12);
}

TEST_CASE("elementwise: dtype mismatch errors say 'same dtype' and name both dtypes") {
  Tensor f = gs::ones({2, 3}, DType::f32), d = gs::ones({2, 3}, DType::f64);
  Tensor z = gs::ones({2, 3}, DType::c128);
  for (const auto& op : kBinary) {
    INFO(std::string(op.name));
    std::string msg = error_of([&] { op.fn(f, d); });
    CHECK(contains(msg, "same dtype"));
    CHECK(contains(msg, op.name));
    CHECK(contains(msg, "f32"));
    CHECK(contains(msg, "f64"));
    msg = error_of([&] { op.fn(d, z); });
    CHECK(contains(msg, "same dtype"));
    CHECK(contains(msg, "c128"));
  }
}

TEST_CASE("elementwise: bad broadcasts name both shapes") {
  struct Case {
    Shape a, b;
    const char *sa, *sb;
  };
  std::vector<Case> cases = {{{3, 4}, {5}, "(3, 4)", "(5,)"},
                             {{2, 3}, {3, 2}, "(2, 3)", "(3, 2)"},
                             {{3, 1, 5}, {4, 6}, "(3, 1, 5)", "(4, 6)"}};
  for (const auto& op : kBinary) {
    for (const auto& c : cases) {
      INFO(std::string(op.name) << " " << std::string(c.sa) << " with " << std::string(c.sb));
      Tensor a = gs::ones(c.a, DType::f64), b = gs::ones(c.b, DType::f64);
      std::string msg = error_of([&] { op.fn(a, b); });
      CHECK(contains(msg, op.name));
      CHECK(contains(msg, c.sa));
      CHECK(contains(msg, c.sb));
      CHECK(contains(msg, "broadcast"));
    }
  }
}

TEST_CASE("elementwise: complex inputs to real-only ops are errors that name the op and dtype") {
  Tensor z = make_complex({2, 2}, DType::c128, 61);
  Tensor z64 = make_complex({2, 2}, DType::c64, 62);
  for (const auto& op : kUnary) {
    std::string name = op.name;
    if (name == "neg" || name == "exp" || name == "abs" || name == "square") continue;  // complex-capable
    INFO(name);
    std::string msg = error_of([&] { op.fn(z); });
    CHECK(contains(msg, name == "gelu_tanh" ? "gelu" : name));
    CHECK(contains(msg, "c128"));
    CHECK(contains(error_of([&] { op.fn(z64); }), "c64"));
  }
  std::string msg = error_of([&] { gs::pow(z, z); });
  CHECK(contains(msg, "pow"));
  CHECK(contains(msg, "c128"));
  msg = error_of([&] { gs::pow(z, 2.0); });
  CHECK(contains(msg, "pow"));
  CHECK(contains(msg, "c128"));
}

TEST_CASE("elementwise: integer and bool inputs are rejected with the dtype named") {
  Tensor i = gs::arange(6, DType::i64);
  Tensor m = gs::from_vector(std::vector<bool>{true, false});
  for (const auto& op : kBinary) {
    INFO(std::string(op.name));
    std::string msg = error_of([&] { op.fn(i, i); });
    CHECK(contains(msg, op.name));
    CHECK(contains(msg, "i64"));
  }
  for (const auto& op : kUnary) {
    INFO(std::string(op.name));
    CHECK(contains(error_of([&] { op.fn(i); }), "i64"));
    CHECK(contains(error_of([&] { op.fn(m); }), "bool"));
  }
}

TEST_CASE("elementwise: undefined tensors are errors, not crashes") {
  Tensor u, t = gs::ones({2}, DType::f64);
  for (const auto& op : kBinary) {
    INFO(std::string(op.name));
    std::string msg = error_of([&] { op.fn(u, t); });
    CHECK(contains(msg, "undefined"));
    CHECK(contains(msg, op.name));
    CHECK(contains(error_of([&] { op.fn(t, u); }), "undefined"));
    CHECK(contains(error_of([&] { op.fn(u, u); }), "undefined"));
  }
  for (const auto& op : kUnary) {
    INFO(std::string(op.name));
    CHECK(contains(error_of([&] { op.fn(u); }), "undefined"));
  }
  CHECK(contains(error_of([&] { gs::add(u, 1.0); }), "undefined"));
  CHECK(contains(error_of([&] { gs::sub(1.0, u); }), "undefined"));
  CHECK(contains(error_of([&] { gs::div(1.0, u); }), "undefined"));
  CHECK(contains(error_of([&] { gs::pow(u, 2.0); }), "undefined"));
  CHECK(contains(error_of([&] { gs::scalar_like(u, 2.0); }), "undefined"));
  CHECK(contains(error_of([&] { gs::conj(u); }), "undefined"));
}

TEST_CASE("pow: gradients at the edges of the domain follow torch.pow") {
  // a^b at (a, b) = (0, 0), (0, 1), (2, 0), (0, 2), (-2, 2)
  Tensor a = gs::from_vector(std::vector<double>{0, 0, 2, 0, -2}).set_requires_grad();
  Tensor b = gs::from_vector(std::vector<double>{0, 1, 0, 2, 2}).set_requires_grad();
  gs::sum(gs::pow(a, b)).backward();
  auto ga = a.grad().to_vector<double>(), gb = b.grad().to_vector<double>();
  // d/da = b a^(b-1), 0 where b == 0 (torch masks it; b a^(b-1) would be 0 * inf = NaN at a = 0)
  CHECK(ga == std::vector<double>{0, 1, 0, 0, -4});
  // d/db = a^b log a: 0 where a == 0 and b >= 0, log(2) at (2, 0), NaN for a negative base
  CHECK(gb[0] == 0.0);
  CHECK(gb[1] == 0.0);
  CHECK(gb[2] == std::log(2.0));
  CHECK(gb[3] == 0.0);
  CHECK(std::isnan(gb[4]));
  // the scalar exponent: d(a^0)/da = 0 and d(a^1)/da = 1 at a = 0
  Tensor z = gs::from_vector(std::vector<double>{0.0}).set_requires_grad();
  gs::sum(gs::add(gs::pow(z, 0.0), gs::pow(z, 1.0))).backward();
  CHECK(z.grad().to_vector<double>()[0] == 1.0);
}

TEST_CASE("gradients at the edges of each op's domain are torch's (0, negative arguments, infinities)") {
  // torch's backward formulas evaluated at these points (torch 2.x): inf, -inf and NaN where the
  // formula gives them, the conventions (0 at kinks, ties split evenly) elsewhere.
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  using F = std::function<Tensor(const Tensor&)>;
  struct Edge {
    const char* what;
    F f;
    double x, grad;
  };
  const Edge edges[] = {
      {"sqrt at 0", [](const Tensor& t) { return gs::sqrt(t); }, 0.0, inf},
      {"sqrt at -1", [](const Tensor& t) { return gs::sqrt(t); }, -1.0, nan},
      {"log at 0", [](const Tensor& t) { return gs::log(t); }, 0.0, inf},
      {"log at -1", [](const Tensor& t) { return gs::log(t); }, -1.0, -1.0},
      {"rsqrt at 0", [](const Tensor& t) { return gs::rsqrt(t); }, 0.0, -inf},
      {"abs at 0", [](const Tensor& t) { return gs::abs(t); }, 0.0, 0.0},
      {"relu at 0", [](const Tensor& t) { return gs::relu(t); }, 0.0, 0.0},
      {"sign at 0", [](const Tensor& t) { return gs::sign(t); }, 0.0, 0.0},
      {"tanh at inf", [](const Tensor& t) { return gs::tanh(t); }, inf, 0.0},
      {"sigmoid at -inf", [](const Tensor& t) { return gs::sigmoid(t); }, -inf, 0.0},
      {"exp at -inf", [](const Tensor& t) { return gs::exp(t); }, -inf, 0.0},
      {"erf at inf", [](const Tensor& t) { return gs::erf(t); }, inf, 0.0},
      {"silu at -inf (0 * -inf)", [](const Tensor& t) { return gs::silu(t); }, -inf, nan},
      {"gelu at -inf (-inf * 0)", [](const Tensor& t) { return gs::gelu(t); }, -inf, nan},
      {"pow 0.5 at 0", [](const Tensor& t) { return gs::pow(t, 0.5); }, 0.0, inf},
      {"pow 2 at 0", [](const Tensor& t) { return gs::pow(t, 2.0); }, 0.0, 0.0},
      {"1 / x at 0", [](const Tensor& t) { return gs::div(1.0, t); }, 0.0, -inf},
  };
  for (const Edge& e : edges) {
    CAPTURE(e.what);
    Tensor x = gs::from_vector(std::vector<double>{e.x}).set_requires_grad();
    gs::sum(e.f(x)).backward();
    const double g = x.grad().to_vector<double>()[0];
    if (std::isnan(e.grad)) CHECK(std::isnan(g));
    else CHECK(g == e.grad);
  }
  // Reductions: ties split evenly (torch's max/amax), an all -inf logsumexp gives NaN (exp(-inf + inf)).
  Tensor m = gs::from_vector(std::vector<double>{1.0, 1.0}).set_requires_grad();
  gs::sum(gs::max(m)).backward();
  CHECK(m.grad().to_vector<double>() == std::vector<double>{0.5, 0.5});
  Tensor l = gs::from_vector(std::vector<double>{-inf, -inf}).set_requires_grad();
  gs::sum(gs::logsumexp(l)).backward();
  CHECK(std::isnan(l.grad().to_vector<double>()[0]));
  // Complex abs at 0: torch's sgn(0) = 0.
  Tensor z = gs::from_vector(std::vector<c128>{{0, 0}}).set_requires_grad();
  gs::sum(gs::abs(z)).backward();
  CHECK(z.grad().to_vector<c128>()[0] == c128(0, 0));
}
