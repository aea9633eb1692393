// The pole-aware neighbourhood of local_conv3x3 (sfno_blocks.h: sphere_neighbour_index) as plain
// arithmetic, shared by the CPU op and the CUDA gather / scatter kernels (neighbours_cuda.cu), so
// the CPU suites test the index rules the GPU runs. No checks here: callers validate first.
#pragma once
#include <cstdint>

#include "ops/elementwise_math.h"  // GS_HD

namespace gs::sphere::neighbours {

struct Source {
  int64_t row, col;
};

// The grid point that neighbour (dh, dw) of (h, w) reads, for an odd kernel size k on an H x W grid
// (W even, the kernel reaching at most H rows past a pole): rows beyond a pole reflect through it
// with the column turned by W/2; columns wrap.
GS_HD inline Source source(int64_t h, int64_t w, int64_t dh, int64_t dw, int64_t H, int64_t W, int64_t k) {
  const int64_t half = k / 2;
  int64_t r = h + dh - half, c = w + dw - half;
  if (r < 0) {
    r = -1 - r;
    c += W / 2;
  } else if (r >= H) {
    r = 2 * H - 1 - r;
    c += W / 2;
  }
  return {r, ((c % W) + W) % W};
}

// The 3x3 gather's adjoint at grid point (r, c) of one plane: the sum of g over every (tap, h, w)
// whose source is (r, c), g being that plane's (9, H, W) gradient (tap t = dh * 3 + dw major). Each
// tap row dh reaches row r from at most three rows h: directly (h + dh - 1 = r), or over the north
// or the south pole; each (tap, h) reads (r, c) from exactly one column w, as columns only rotate.
// The terms are added in a fixed order (dh, then h as listed, then dw): run to run the same.
template <typename T>
GS_HD inline T scatter_point(const T* g, int64_t r, int64_t c, int64_t H, int64_t W) {
  T acc = T(0);
  for (int64_t dh = 0; dh < 3; ++dh) {
    const int64_t rows[3] = {r + 1 - dh, -r - dh, 2 * H - r - dh};  // direct, north pole, south pole
    for (int i = 0; i < 3; ++i) {
      const int64_t h = rows[i];
      if (h < 0 || h >= H) continue;
      const int64_t turn = i == 0 ? 0 : W / 2;
      for (int64_t dw = 0; dw < 3; ++dw) {
        const int64_t w = (((c - dw + 1 - turn) % W) + W) % W;
        acc += g[((dh * 3 + dw) * H + h) * W + w];
      }
    }
  }
  return acc;
}

}  // namespace gs::sphere::neighbours
