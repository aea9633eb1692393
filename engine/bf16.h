// bfloat16: the storage element of DType::bf16. The top 16 bits of an IEEE f32 (1 sign, 8 exponent,
// 7 mantissa bits): f32's range, 8 bits of precision. gradsphere stores tensors in it (activations
// kept for backward, checkpoints, communication) and computes in f32: widening is exact, narrowing
// rounds to nearest, ties to even (RNE); NaN stays NaN (quiet), overflow rounds to +-inf as IEEE does.
//
// Plain header (no fmt): the CUDA sources convert with the same functions, so the CPU tests check
// the rounding that the GPU's copies use.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__CUDACC__)
#define GS_BF16_HD __host__ __device__
#else
#define GS_BF16_HD
#endif

namespace gs {

namespace bf16_bits {

GS_BF16_HD inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
GS_BF16_HD inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// f32 -> bf16 bits, round to nearest even. Adding 0x7fff plus the kept part's lowest bit rounds the
// dropped 16 bits: above half carries, below half does not, exactly half carries only onto an odd
// kept value. A carry out of the mantissa steps the exponent (up to inf), which is IEEE rounding.
GS_BF16_HD inline uint16_t from_float(float f) {
  const uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN: keep it quiet
  const uint32_t lsb = (u >> 16) & 1u;
  return static_cast<uint16_t>((u + 0x7fffu + lsb) >> 16);
}

// f64 -> bf16 bits without double rounding: narrowing to f32 first with round-to-odd (truncate,
// then set the lowest bit when anything was dropped) keeps the sticky information that the second
// rounding needs; f32's 24 bits are more than the 8 + 2 that makes this exact.
GS_BF16_HD inline uint16_t from_double(double d) {
  float f = static_cast<float>(d);  // nearest
  if (f != f || static_cast<double>(f) == d) return from_float(f);
  const double a = d < 0 ? -d : d;
  const float af = f < 0 ? -f : f;
  uint32_t u = float_bits(f);
  if (static_cast<double>(af) > a) --u;  // rounded away from zero: step back toward it (truncation)
  // The truncation cannot be inf: a finite d just below f32's max truncates to max.
  return from_float(bits_float(u | 1u));
}

// An integer -> bf16 bits, rounded once: beyond 2^53 it is first rounded to odd at 53 bits (the
// dropped bits ORed into the lowest kept one), which double holds exactly.
template <typename I>
GS_BF16_HD inline uint16_t from_integer(I i) {
  bool negative = false;
  if constexpr (std::is_signed_v<I>) negative = i < 0;
  uint64_t m = negative ? uint64_t{0} - static_cast<uint64_t>(i) : static_cast<uint64_t>(i);
  int shift = 0;
  while ((m >> shift) >= (uint64_t{1} << 53)) ++shift;
  if (shift > 0) {
    const uint64_t dropped = m & ((uint64_t{1} << shift) - 1);
    const uint64_t kept = (m >> shift) | (dropped != 0 ? 1u : 0u);
    m = kept << shift;
  }
  const double d = static_cast<double>(m);
  return from_double(negative ? -d : d);
}

GS_BF16_HD inline float to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

}  // namespace bf16_bits

struct bfloat16 {
  uint16_t bits = 0;

  bfloat16() = default;
  GS_BF16_HD explicit bfloat16(float f) : bits(bf16_bits::from_float(f)) {}
  GS_BF16_HD explicit bfloat16(double d) : bits(bf16_bits::from_double(d)) {}
  GS_BF16_HD explicit bfloat16(bool b) : bits(b ? 0x3f80u : 0u) {}
  template <typename I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  GS_BF16_HD explicit bfloat16(I i) : bits(bf16_bits::from_integer(i)) {}

  static GS_BF16_HD bfloat16 from_bits(uint16_t b) {
    bfloat16 r;
    r.bits = b;
    return r;
  }
  GS_BF16_HD float to_float() const { return bf16_bits::to_float(bits); }
  // Every conversion out goes through f32, which holds every bf16 value exactly.
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  GS_BF16_HD explicit operator T() const {
    if constexpr (std::is_same_v<T, bool>) return (bits & 0x7fffu) != 0;
    else return static_cast<T>(to_float());
  }
};

static_assert(sizeof(bfloat16) == 2, "bfloat16 must be two bytes (safetensors BF16, MPI 16-bit words)");

}  // namespace gs

#undef GS_BF16_HD
