// Counter-based random numbers (Philox-4x32-10): the value of element i depends only on
// (seed, stream, i), so a field drawn block by block on a decomposed grid equals the field drawn
// whole on one process, and no generator state has to be carried between calls.
#pragma once
#include <array>
#include <cstdint>

namespace gs {

struct RandomKey {
  uint64_t seed = 0;
  uint64_t stream = 0;
};

// Four 32-bit words for counter `index` under `key`.
std::array<uint32_t, 4> philox4x32(RandomKey key, uint64_t index);

// Uniform in [0, 1) with 24 (float) or 53 (double) random bits, from the words of one counter.
inline float uniform_f32(uint32_t w) { return static_cast<float>(w >> 8) * (1.0f / 16777216.0f); }
inline double uniform_f64(uint32_t hi, uint32_t lo) {
  uint64_t bits = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(bits & ((1ULL << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace gs
