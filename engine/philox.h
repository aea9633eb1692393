// Philox-4x32-10 as inline __host__ __device__ arithmetic: the one definition behind
// gs::philox4x32 (engine/random.h) and the CUDA kernels that draw by global index (ops/dropout),
// so a mask drawn on the GPU is the CPU's bit for bit. Plain C++ (no std::array, no fmt), so nvcc
// compiles it in device code.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define GS_HD_PHILOX __host__ __device__
#else
#define GS_HD_PHILOX
#endif

namespace gs::philox {

struct Words {
  uint32_t w[4];
};

// Counter = (index, stream); key = seed. Constants from Salmon et al., SC'11.
GS_HD_PHILOX inline Words draw(uint64_t seed, uint64_t stream, uint64_t index) {
  uint32_t c0 = static_cast<uint32_t>(index), c1 = static_cast<uint32_t>(index >> 32);
  uint32_t c2 = static_cast<uint32_t>(stream), c3 = static_cast<uint32_t>(stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(M0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(M1) * c2;
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    const uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += W0, k1 += W1;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 53 random bits from two words (gs::uniform_f64's rule).
GS_HD_PHILOX inline double uniform53(uint32_t hi, uint32_t lo) {
  const uint64_t bits = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
  return static_cast<double>(bits & ((1ULL << 53) - 1)) * (1.0 / 9007199254740992.0);
}

}  // namespace gs::philox
