// bf16 storage: the rounding of f32 and f64 into bf16 (bit by bit, against a reference that
// picks the nearest neighbour directly), casts between bf16 and every dtype, the ops that move it,
// the refusal of every op that would compute in it, and gradients through bf16 storage (f32,
// never rounded).
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include "tests/engine/engine_test_util.h"

using namespace gs;
using namespace gs_test;

namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
double bf16_value(uint16_t b) { return static_cast<double>(float_of(static_cast<uint32_t>(b) << 16)); }
bool is_nan_bits(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x007fu) != 0; }

// The reference rounding of a finite double: among the bf16 values of its sign (ordered by
// magnitude, bit patterns 0 .. 0x7f80 with inf as the value past the largest), the nearest to v,
// ties to the even pattern. Independent of the bit trick in engine/bf16.h.
uint16_t reference_round(double v) {
  const uint16_t sign = std::signbit(v) ? 0x8000u : 0u;
  const double a = std::fabs(v);
  // The largest pattern whose value does not exceed a (binary search over magnitudes).
  uint32_t lo = 0, hi = 0x7f80u;
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (bf16_value(static_cast<uint16_t>(mid)) <= a) lo = mid;
    else hi = mid - 1;
  }
  if (bf16_value(static_cast<uint16_t>(lo)) == a || lo == 0x7f80u) return static_cast<uint16_t>(sign | lo);
  // Above the largest finite bf16 the upper neighbour is 2^128 (what inf stands in for).
  const double below = bf16_value(static_cast<uint16_t>(lo));
  const double above = lo + 1 == 0x7f80u ? std::ldexp(1.0, 128) : bf16_value(static_cast<uint16_t>(lo + 1));
  const double dlo = a - below, dhi = above - a;
  uint32_t pick = dlo < dhi ? lo : dhi < dlo ? lo + 1 : (lo % 2 == 0 ? lo : lo + 1);
  return static_cast<uint16_t>(sign | pick);
}

}  // namespace

TEST_CASE("bf16: f32 rounds to nearest, ties to even, at the edges of the format") {
  struct Case {
    uint32_t f32;
    uint16_t bf16;
    const char* what;
  };
  for (const Case& c : {
           Case{0x3f800000u, 0x3f80u, "1 is exact"},
           Case{0x3f808000u, 0x3f80u, "1 + 2^-8: a tie, kept 1 (even)"},
           Case{0x3f818000u, 0x3f82u, "1 + 3 2^-8: a tie, rounds up to the even 1 + 2^-6"},
           Case{0x3f808001u, 0x3f81u, "just above half: up"},
           Case{0x3f807fffu, 0x3f80u, "just below half: down"},
           Case{0xbf808001u, 0xbf81u, "negative: away from zero above half"},
           Case{0x80000000u, 0x8000u, "-0 keeps its sign"},
           Case{0x7f800000u, 0x7f80u, "inf"},
           Case{0xff800000u, 0xff80u, "-inf"},
           Case{0x7f7f7fffu, 0x7f7fu, "below the overflow threshold: the largest finite bf16"},
           Case{0x7f7f8000u, 0x7f80u, "the overflow tie: inf (0x7f7f is odd)"},
           Case{0x7f7fffffu, 0x7f80u, "f32's largest: inf"},
           Case{0x00000001u, 0x0000u, "the smallest f32 subnormal: 0"},
           Case{0x00008000u, 0x0000u, "a subnormal tie: 0 (even)"},
           Case{0x00018000u, 0x0002u, "a subnormal tie: up to even"},
           Case{0x00010000u, 0x0001u, "bf16's smallest subnormal is exact"},
           Case{0x007fffffu, 0x0080u, "the largest f32 subnormal carries into the normals"},
       }) {
    CAPTURE(c.what);
    CHECK(bf16_bits::from_float(float_of(c.f32)) == c.bf16);
    CHECK(bfloat16(float_of(c.f32)).bits == c.bf16);
  }
  // NaN stays NaN, quiet, with its sign; a signalling NaN whose payload is in the dropped bits does
  // not turn into inf.
  for (uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fa00000u}) {
    CAPTURE(nan);
    const uint16_t b = bf16_bits::from_float(float_of(nan));
    CHECK(is_nan_bits(b));
    CHECK((b & 0x8000u) == ((nan >> 16) & 0x8000u));
    CHECK((b & 0x0040u) != 0);
  }
}

TEST_CASE("bf16: every pattern widens exactly and narrows back to itself; random f32 match the reference") {
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    const uint16_t p = static_cast<uint16_t>(b);
    const float f = bf16_bits::to_float(p);
    const bool ok = is_nan_bits(p) ? std::isnan(f) : bits_of(f) == (b << 16) && bf16_bits::from_float(f) == p;
    if (!ok) {
      FAIL_CHECK("pattern " << b << " does not round-trip");
      break;
    }
  }
  // One assertion for the whole sample (doctest's per-assertion cost dominates under ASan); the
  // first mismatch is reported.
  std::mt19937 gen(7);
  int checked = 0, wrong = 0;
  uint32_t first_wrong = 0;
  for (int i = 0; i < 200000; ++i) {
    const float f = float_of(gen());
    if (!std::isfinite(f)) continue;
    if (bf16_bits::from_float(f) != reference_round(static_cast<double>(f)) && wrong++ == 0) first_wrong = bits_of(f);
    ++checked;
  }
  CHECK_MESSAGE(wrong == 0, "first mismatch at f32 bits " << first_wrong);
  CHECK(checked > 190000);
}

TEST_CASE("bf16: f64 rounds once, not through f32's rounding") {
  // 1 + 2^-8 + 2^-40: above the midpoint of 1 and 1 + 2^-7, so it rounds up; through f32's nearest
  // (1 + 2^-8, an exact tie) it would round down to 1.
  const double up = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  CHECK(bf16_bits::from_float(static_cast<float>(up)) == 0x3f80u);  // the double rounding, for contrast
  CHECK(bf16_bits::from_double(up) == 0x3f81u);
  CHECK(bf16_bits::from_double(-up) == 0xbf81u);
  // And below a midpoint that f32 would round onto: 1 + 3 2^-8 - 2^-40 rounds down to 1 + 2^-7.
  CHECK(bf16_bits::from_double(1.0 + 3 * std::ldexp(1.0, -8) - std::ldexp(1.0, -40)) == 0x3f81u);
  CHECK(bf16_bits::from_double(1e39) == 0x7f80u);
  CHECK(bf16_bits::from_double(-1e300) == 0xff80u);
  CHECK(bf16_bits::from_double(1e-300) == 0x0000u);
  CHECK(is_nan_bits(bf16_bits::from_double(std::numeric_limits<double>::quiet_NaN())));
  std::mt19937_64 gen(11);
  std::uniform_real_distribution<double> mant(1.0, 2.0);
  std::uniform_int_distribution<int> expo(-140, 130);
  int wrong = 0;
  double first_wrong = 0;
  for (int i = 0; i < 100000; ++i) {
    const double d = (gen() & 1 ? -1.0 : 1.0) * std::ldexp(mant(gen), expo(gen));
    if (bf16_bits::from_double(d) != reference_round(d) && wrong++ == 0) first_wrong = d;
  }
  CHECK_MESSAGE(wrong == 0, "first mismatch at " << first_wrong);
}

TEST_CASE("bf16 tensors: factories, casts to and from every dtype, copies and joins") {
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_name(DType::bf16) == "bf16");
  CHECK(is_storage_only(DType::bf16));
  CHECK_FALSE(is_floating(DType::bf16));
  CHECK(gradient_dtype(DType::bf16) == DType::f32);

  Tensor z = zeros({2, 3}, DType::bf16);
  CHECK(z.dtype() == DType::bf16);
  CHECK(z.storage()->nbytes() == 12);
  check_values(full({2}, 1.0 / 3.0, DType::bf16), {bf16_value(0x3eab), bf16_value(0x3eab)}, 0);

  // f64 -> bf16 -> f64 rounds once (0.1's nearest bf16 is 0x3dcd).
  Tensor x = from_vector(std::vector<double>{0.1, -2.5, 1e39, 3.0, 0.0}, {5});
  Tensor b = to(x, DType::bf16);
  CHECK(b.dtype() == DType::bf16);
  const std::vector<bfloat16> raw(b.data<bfloat16>(), b.data<bfloat16>() + 5);
  CHECK(raw[0].bits == 0x3dcdu);
  CHECK(raw[1].bits == 0xc020u);
  CHECK(raw[2].bits == 0x7f80u);
  const std::vector<double> back = to(b, DType::f64).to_vector<double>();
  CHECK(back[0] == bf16_value(0x3dcd));
  CHECK(back[1] == -2.5);
  CHECK(std::isinf(back[2]));
  // Other dtypes: the real part of complex values, integers and bools as numbers.
  CHECK(to(to(from_vector(std::vector<c64>{{1.5f, 7.0f}}, {1}), DType::bf16), DType::f32).item<float>() == 1.5f);
  CHECK(to(to(from_vector(std::vector<int64_t>{257}, {1}), DType::bf16), DType::i64).item<int64_t>() == 256);
  CHECK(to(from_vector(std::vector<bool>{true, false}, {2}), DType::bf16).to_vector<double>() ==
        std::vector<double>{1.0, 0.0});
  CHECK(to(b, DType::b8).to_vector<bool>() == std::vector<bool>{true, true, true, true, false});
  CHECK(to(b, DType::c128).to_vector<c128>()[1] == c128(-2.5, 0.0));

  // Strided copies, clone, cat and printing move the 16-bit values untouched.
  Tensor m = to(from_vector(std::vector<double>{1, 2, 3, 4, 5, 6}, {2, 3}), DType::bf16);
  Tensor mt = contiguous(transpose(m, 0, 1));
  CHECK(mt.dtype() == DType::bf16);
  CHECK(mt.to_vector<double>() == std::vector<double>{1, 4, 2, 5, 3, 6});
  Tensor joined = cat({m, m}, 0);
  CHECK(joined.dtype() == DType::bf16);
  CHECK(joined.sizes() == Shape{4, 3});
  CHECK(joined.to_vector<double>()[5] == 6.0);
  CHECK(has(m.str(), "dtype=bf16"));
  CHECK(has(m.str(), "[1, 2, 3]"));
}

TEST_CASE("bf16: ops that would compute in it refuse it, naming the cast") {
  Tensor b = zeros({3}, DType::bf16);
  for (const std::string& msg :
       {error_of([&] { add(b, b); }), error_of([&] { exp(b); }), error_of([&] { sum(b); }),
        error_of([&] { mean(b); }), error_of([&] { mul(b, 2.0); }), error_of([&] { isfinite(b); })}) {
    CAPTURE(msg);
    CHECK(has(msg, "bf16 is a storage dtype"));
    CHECK(has(msg, "cast it to f32 first"));
  }
  const std::string leaf_msg = error_of([&] { zeros({2}, DType::bf16).set_requires_grad(true); });
  CHECK(has(leaf_msg, "cannot be a leaf that requires gradients"));
  CHECK(has(leaf_msg, "f32 master copy"));
  CHECK(has(error_of([&] { randn({2}, {1, 1}, DType::bf16); }), "bf16 is a storage dtype"));
}

TEST_CASE("bf16: gradients through bf16 storage are f32 and pass through unrounded") {
  Tensor x = from_vector(std::vector<float>{0.1f, -3.7f, 1e-3f}, {3});
  x.set_requires_grad(true);
  Tensor s = to(x, DType::bf16);
  CHECK(s.requires_grad());
  CHECK(s.grad_fn() != nullptr);
  // A weight that bf16 cannot hold: its gradient must come back as the exact f32 value.
  const Tensor w = from_vector(std::vector<float>{1.0f / 3.0f, 0.7f, -1e-5f}, {3});
  Tensor loss = sum(mul(to(s, DType::f32), w));
  loss.backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == DType::f32);
  CHECK(x.grad().to_vector<float>() == w.to_vector<float>());

  // A bf16 root's implicit gradient is an f32 one; an explicit one must be f32 too.
  Tensor y = from_vector(std::vector<float>{2.0f}, {1});
  y.set_requires_grad(true);
  Tensor r = to(mul(y, 3.0), DType::bf16);
  r.backward();
  CHECK(y.grad().to_vector<float>() == std::vector<float>{3.0f});
  Tensor r2 = to(mul(y, 3.0), DType::bf16);
  const std::string msg = error_of([&] { r2.backward(ones({1}, DType::bf16)); });
  CHECK(has(msg, "dtype f32"));
  // A view of bf16 storage carries the gradient too.
  Tensor v = from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2});
  v.set_requires_grad(true);
  Tensor vt = transpose(to(v, DType::bf16), 0, 1);
  sum(mul(to(vt, DType::f32), from_vector(std::vector<float>{1, 2, 3, 4}, {2, 2}))).backward();
  CHECK(v.grad().to_vector<float>() == std::vector<float>{1, 3, 2, 4});
}

TEST_CASE("bf16: integers round once, however large") {
  // 2^60 + 2^52 + 1 lies just above the midpoint of 2^60 and 2^60 + 2^53; through double (which
  // rounds it onto the midpoint) it would tie down to 2^60.
  const int64_t big = (int64_t{1} << 60) + (int64_t{1} << 52) + 1;
  const uint16_t up = bf16_bits::from_double(std::ldexp(1.0, 60) + std::ldexp(1.0, 53));
  CHECK(bfloat16(big).bits == up);
  CHECK(bfloat16(-big).bits == (up | 0x8000u));
  CHECK(bfloat16(uint64_t{0xffffffffffffffffu}).bits == bf16_bits::from_double(std::ldexp(1.0, 64)));
  CHECK(bfloat16(int64_t{257}).bits == 0x4380u);  // a tie: 256, the even neighbour
  CHECK(bfloat16(int64_t{259}).bits == 0x4382u);  // a tie: 260
  CHECK(to(from_vector(std::vector<int64_t>{big}, {1}), DType::bf16).data<bfloat16>()[0].bits == up);
}

TEST_CASE("bf16: in-place writes into and from bf16 storage keep f32 gradients") {
  const Tensor w = from_vector(std::vector<float>{1.0f / 3.0f, 0.7f, -1e-5f}, {3});
  // copy_ from a bf16 source with history: the source's gradient is f32 and unrounded.
  Tensor x = from_vector(std::vector<float>{0.5f, 1.5f, -2.0f}, {3});
  x.set_requires_grad(true);
  Tensor d = mul(zeros({3}, DType::f32), 1.0);
  copy_(d, to(x, DType::bf16));
  sum(mul(d, w)).backward();
  CHECK(x.grad().to_vector<float>() == w.to_vector<float>());
  // A write into a view of a bf16 non-leaf: the base's history is rebased (copy_slices), and the
  // view relation routes f32 gradients.
  Tensor x2 = from_vector(std::vector<float>{0.5f, 1.5f, -2.0f}, {3});
  x2.set_requires_grad(true);
  Tensor y = from_vector(std::vector<float>{4.0f}, {1});
  y.set_requires_grad(true);
  Tensor h = to(x2, DType::bf16);
  Tensor first = narrow(h, 0, 0, 1);
  copy_(first, y);
  sum(mul(to(h, DType::f32), w)).backward();
  CHECK(x2.grad().to_vector<float>() == std::vector<float>{0.0f, 0.7f, -1e-5f});
  CHECK(y.grad().to_vector<float>() == std::vector<float>{1.0f / 3.0f});
  // fill_ writes bf16 (a fill computes nothing).
  Tensor b = zeros({2}, DType::bf16);
  fill_(b, 0.1);
  CHECK(b.data<bfloat16>()[1].bits == 0x3dcdu);
}
