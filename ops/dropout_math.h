// The dropout mask as __host__ __device__ arithmetic, run by the CPU loop (ops/dropout.cpp) and
// the CUDA kernel (ops/dropout_cuda.cu) alike. An element's decision depends only on (seed,
// stream) and its GLOBAL mask index: drop with probability p when the 53-bit uniform of Philox's
// first two words is below p, i.e. gs::rand(f64) < p of the same key and index. The decision is
// the same in f32 and f64.
#pragma once
#include <cstdint>

#include "engine/philox.h"
#include "ops/elementwise_math.h"

namespace gs::math {

struct DropoutMask {
  uint64_t seed = 0, stream = 0;
  double p = 0;      // drop probability, in [0, 1]
  double scale = 1;  // 1 / (1 - p) for kept elements (unused when p = 1: nothing is kept)

  GS_HD bool keep(uint64_t index) const {
    const philox::Words r = philox::draw(seed, stream, index);
    return philox::uniform53(r.w[0], r.w[1]) >= p;
  }
  // x times the mask value, as torch: a dropped NaN stays NaN (x * 0).
  template <typename T>
  GS_HD T apply(T x, uint64_t index) const {
    return x * (keep(index) ? static_cast<T>(scale) : T(0));
  }
};

}  // namespace gs::math
