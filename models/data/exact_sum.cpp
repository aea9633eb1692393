#include "models/data/exact_sum.h"

#include <cmath>
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "engine/error.h"

namespace gs::models {
namespace {

constexpr int kMinExponent = -1074;  // the exponent of the smallest subnormal's unit
constexpr int64_t kMask = (int64_t{1} << 32) - 1;

}  // namespace

ExactSum::ExactSum() : limb_(kLimbs, 0) {}

void ExactSum::add(double x) {
  GS_CHECK(std::isfinite(x), "ExactSum: expected a finite value, got {}", x);
  if (x == 0) return;
  int e = 0;
  const double frac = std::frexp(x, &e);  // x = frac * 2^e, 0.5 <= |frac| < 1
  // x = m * 2^(e - 53) with m an integer of at most 53 bits; subnormals have fewer bits.
  int shift = e - 53;
  int64_t m = static_cast<int64_t>(std::ldexp(frac, 53));
  if (shift < kMinExponent) {
    m >>= (kMinExponent - shift);  // exact: those low bits are zero for a subnormal
    shift = kMinExponent;
  }
  const int position = shift - kMinExponent, index = position / 32, offset = position % 32;
  const bool negative = m < 0;
  const unsigned __int128 v = static_cast<unsigned __int128>(negative ? -m : m) << offset;
  for (int k = 0; k < 3; ++k) {
    const auto part = static_cast<int64_t>((v >> (32 * k)) & static_cast<unsigned __int128>(kMask));
    limb_[index + k] += negative ? -part : part;
  }
  if (++pending_ >= (int64_t{1} << 29)) normalize();
}

void ExactSum::merge(const ExactSum& other) {
  ExactSum o = other;
  o.normalize();
  normalize();
  for (int i = 0; i < kLimbs; ++i) limb_[i] += o.limb_[i];
  normalize();
}

void ExactSum::normalize() {
  for (int i = 0; i + 1 < kLimbs; ++i) {
    const int64_t carry = limb_[i] >> 32;  // floor division by 2^32
    limb_[i] -= carry * (int64_t{1} << 32);
    limb_[i + 1] += carry;
  }
  pending_ = 0;
}

std::vector<int64_t> ExactSum::limbs() const {
  ExactSum c = *this;
  c.normalize();
  return c.limb_;
}

ExactSum ExactSum::from_limbs(const std::vector<int64_t>& limbs) {
  GS_CHECK(limbs.size() == static_cast<size_t>(kLimbs), "ExactSum::from_limbs: expected {} limbs, got {}", kLimbs,
           limbs.size());
  ExactSum s;
  s.limb_ = limbs;
  s.normalize();
  return s;
}

double ExactSum::value() const {
  ExactSum c = *this;
  c.normalize();
  const bool negative = c.limb_.back() < 0;
  if (negative) {  // sign and magnitude: the limbs then hold |sum|, each in [0, 2^32)
    for (auto& l : c.limb_) l = -l;
    c.normalize();
  }
  int top = kLimbs - 1;
  while (top >= 0 && c.limb_[top] == 0) --top;
  if (top < 0) return 0.0;
  // The top three limbs (96 bits, at least 65 of them significant) and a sticky bit for the rest
  // round correctly to nearest, ties to even, in one step.
  unsigned __int128 m = 0;
  for (int i = top; i > top - 3; --i)
    m = (m << 32) | static_cast<uint64_t>(i >= 0 ? c.limb_[i] : 0);
  bool sticky = false;
  for (int i = top - 3; i >= 0; --i) sticky = sticky || c.limb_[i] != 0;
  int bits = 0;
  for (unsigned __int128 t = m; t != 0; t >>= 1) ++bits;
  int exponent = 32 * (top - 2) + kMinExponent;  // of m's lowest bit
  // Subnormal results keep fewer than 53 bits: the lowest representable bit is 2^kMinExponent.
  const int keep = std::min(53, bits - std::max(0, kMinExponent - exponent));
  const int drop = bits - keep;
  uint64_t kept = static_cast<uint64_t>(m >> drop);
  if (drop > 0) {
    const unsigned __int128 rest = m & ((static_cast<unsigned __int128>(1) << drop) - 1);
    const unsigned __int128 half = static_cast<unsigned __int128>(1) << (drop - 1);
    const bool above_half = rest > half || (rest == half && sticky);
    const bool tie = rest == half && !sticky;
    if (above_half || (tie && (kept & 1))) ++kept;
  }
  const double r = std::ldexp(static_cast<double>(kept), exponent + drop);  // exact: kept has <= 54 bits
  return negative ? -r : r;
}

}  // namespace gs::models
