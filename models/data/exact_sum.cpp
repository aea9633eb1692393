#include "models/data/exact_sum.h"

#include <cmath>
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
  if (negative) {  // sign and magnitude, so the conversion below adds non-negative terms only
    for (auto& l : c.limb_) l = -l;
    c.normalize();
  }
  double r = 0;
  for (int i = kLimbs - 1; i >= 0; --i)
    if (c.limb_[i] != 0) r += std::ldexp(static_cast<double>(c.limb_[i]), 32 * i + kMinExponent);
  return negative ? -r : r;
}

}  // namespace gs::models
