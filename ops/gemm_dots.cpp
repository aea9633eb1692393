// The dot-product GEMM of gemm_direct.h: c (n x m) = a (n x k) @ b (k x m) where a has contiguous
// rows and b contiguous columns, so every output is the dot product of a row of a and a column of
// b, both read in place. This is a channels-first weight gradient, g (C_out x points) @ x^T
// (points x C_in): a long depth, a small output. Eigen packs both operands for it, and for a thin
// output (a decoder to 3 channels, an encoder from 3) its kernel ran at a tenth of the FMA rate.
//
// A tile of kRows x kCols outputs keeps one vector of partial sums per output in registers while
// the depth runs: per step it loads kRows + kCols vectors for kRows * kCols multiply-adds (10 loads
// for 24 FMAs), so it is bound by the FMA units, not the loads. The depth is cut into chunks of
// kChunkBytes per row: a column block's kCols rows of b for one chunk stay in L1 (in L2 where the
// rows are a multiple of 4 KiB apart and share L1 sets) while the row tiles pass over them, and
// both operands come from memory once. Between chunks a tile's partial
// sums wait in a scratch array of vectors; after the last chunk each is summed across its lanes
// (a fixed tree) and the result goes to c. The depth's last k % lanes terms join the partial sums
// as zero-padded vectors.
// Tiles are split across threads whole, so the sums do not depend on the thread count.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
// The tiles are sized for 512-bit vectors; GCC's tuning for AVX-512 CPUs defaults to 256.
#pragma GCC target("prefer-vector-width=512")
#endif
#include <omp.h>

#include <algorithm>
#include <vector>

#include "ops/gemm_direct.h"
#include "ops/sphere/vec512.h"

namespace gs::gemm_cpu {
namespace {

constexpr int kRows = 4;  // rows of a per tile
constexpr int kCols = 6;  // columns of b per tile: 24 sums + 4 + 1 operand vectors in 29 of 32 registers
constexpr int64_t kChunkBytes = 2048;
constexpr int64_t kParallelWork = 64 * 64 * 64;
constexpr int64_t kTileSums = kRows * kCols;

template <typename T>
using Vec = sphere::simd::Vec<T>;
using sphere::simd::load;
using sphere::simd::store;

template <typename T>
struct DotGeometry {
  const T* a;  // a's element (i, p) at a[i * a_rs + p]
  int64_t a_rs;
  const T* b;  // b's element (p, j) at b[j * b_cs + p]
  int64_t b_cs;
};

// Rows [i0, i0 + R) of a against columns [j0, j0 + C) of b over depth [p0, p1) (whole vectors),
// then `tail` (< lanes) more terms from p1 on, read into zero-padded vectors; `sums` holds the
// tile's kTileSums partial-sum vectors (row r, column c at r * kCols + c).
template <typename T, int R, int C>
void dot_tile(const DotGeometry<T>& g, int64_t i0, int64_t j0, int64_t p0, int64_t p1, int tail, Vec<T>* sums,
              bool first) {
  constexpr int L = sphere::simd::kLanes<T>;
  Vec<T> acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = first ? Vec<T>{} : sums[r * kCols + c];
  const T* a = g.a + i0 * g.a_rs;
  const T* b = g.b + j0 * g.b_cs;
  for (int64_t p = p0; p < p1; p += L) {
    Vec<T> av[R];
    for (int r = 0; r < R; ++r) av[r] = load(a + r * g.a_rs + p);
    for (int c = 0; c < C; ++c) {
      Vec<T> bv = load(b + c * g.b_cs + p);
#if defined(__GNUC__) && defined(__AVX512F__)  // "v": one zmm register; without AVX-512 a Vec is two
      // One load per column vector: left alone, GCC folds the load into each of the R
      // multiply-adds, and the kernel was bound by the loads (28 per 24 FMAs instead of 10).
      asm("" : "+v"(bv));
#endif
      for (int r = 0; r < R; ++r) acc[r][c] += av[r] * bv;
    }
  }
  if (tail > 0) {
    T part[L] = {};
    Vec<T> av[R];
    for (int r = 0; r < R; ++r) {
      std::copy_n(a + r * g.a_rs + p1, tail, part);
      av[r] = load(part);
    }
    for (int c = 0; c < C; ++c) {
      std::copy_n(b + c * g.b_cs + p1, tail, part);
      const Vec<T> bv = load(part);
      for (int r = 0; r < R; ++r) acc[r][c] += av[r] * bv;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) sums[r * kCols + c] = acc[r][c];
}

template <typename T, int R>
void dot_tile_cols(const DotGeometry<T>& g, int cols, int64_t i0, int64_t j0, int64_t p0, int64_t p1, int tail,
                   Vec<T>* sums, bool first) {
  switch (cols) {
    case 1: return dot_tile<T, R, 1>(g, i0, j0, p0, p1, tail, sums, first);
    case 2: return dot_tile<T, R, 2>(g, i0, j0, p0, p1, tail, sums, first);
    case 3: return dot_tile<T, R, 3>(g, i0, j0, p0, p1, tail, sums, first);
    case 4: return dot_tile<T, R, 4>(g, i0, j0, p0, p1, tail, sums, first);
    case 5: return dot_tile<T, R, 5>(g, i0, j0, p0, p1, tail, sums, first);
    default: return dot_tile<T, R, kCols>(g, i0, j0, p0, p1, tail, sums, first);
  }
}

template <typename T>
void any_dot_tile(const DotGeometry<T>& g, int rows, int cols, int64_t i0, int64_t j0, int64_t p0, int64_t p1,
                  int tail, Vec<T>* sums, bool first) {
  switch (rows) {
    case 1: return dot_tile_cols<T, 1>(g, cols, i0, j0, p0, p1, tail, sums, first);
    case 2: return dot_tile_cols<T, 2>(g, cols, i0, j0, p0, p1, tail, sums, first);
    case 3: return dot_tile_cols<T, 3>(g, cols, i0, j0, p0, p1, tail, sums, first);
    default: return dot_tile_cols<T, kRows>(g, cols, i0, j0, p0, p1, tail, sums, first);
  }
}

// The lanes of v summed as a balanced tree (the same order on every call).
template <typename T>
T lane_sum(const Vec<T>& v) {
  constexpr int L = sphere::simd::kLanes<T>;
  T s[L];
  store(s, v);
  for (int w = L / 2; w >= 1; w /= 2)
    for (int i = 0; i < w; ++i) s[i] += s[i + w];
  return s[0];
}

}  // namespace

bool gemm_dots_suits(int64_t n, int64_t k, int64_t m, bool a_row_major, bool b_row_major) {
  // Asked after gemm_direct_suits (gemm_cpu.cpp), so what is taken here would otherwise go to
  // Eigen. A long depth against a thin output: fewer than 32 rows or 8 columns, where Eigen's
  // packed kernel ran at 5-28 GFLOP/s against this one's 20-73 (a 3-channel decoder's weight gradient,
  // 3 x 65536 x 67: 5 against 19-29). On balanced outputs (64 x 65536 x 128, 128 x 3570 x 64)
  // the two were within 15% of each other, either way round, and Eigen keeps them
  // (ops/BENCHMARKS.md). Below a depth of 2048 the sums across lanes at the end cost too much
  // against the dot products (at 924, 20% slower than Eigen). The scratch of partial sums (n * m
  // vectors) stays small.
  return a_row_major && !b_row_major && n >= 1 && m >= 1 && k >= 2048 && (n < 32 || m < 8) && n * m <= 256 * 256;
}

template <typename T>
void gemm_dots(T* c, int64_t c_outer, const Operand<T>& a, const Operand<T>& b, int64_t n, int64_t k, int64_t m,
               bool accumulate) {
  constexpr int L = sphere::simd::kLanes<T>;
  constexpr int64_t chunk = kChunkBytes / static_cast<int64_t>(sizeof(T));
  static_assert(chunk % L == 0, "a depth chunk is whole vectors");
  const int64_t k_vec = k / L * L;
  const int tail = static_cast<int>(k - k_vec);
  const int64_t row_blocks = (n + kRows - 1) / kRows, col_blocks = (m + kCols - 1) / kCols;
  const int64_t tiles = row_blocks * col_blocks;
  std::vector<Vec<T>> sums(static_cast<size_t>(tiles * kTileSums));
  const bool parallel = n * k * m >= kParallelWork && omp_get_max_threads() > 1 && !omp_in_parallel();
#pragma omp parallel if (parallel)
  {
    // A contiguous run of tiles per thread, column block by column block: consecutive tiles share
    // b's columns, which stay in L1 for the chunk.
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t t_begin = tiles * t / threads, t_end = tiles * (t + 1) / threads;
    auto tile_origin = [&](int64_t index, int64_t& i0, int64_t& j0, int& rows, int& cols) {
      i0 = index % row_blocks * kRows, j0 = index / row_blocks * kCols;
      rows = static_cast<int>(std::min<int64_t>(kRows, n - i0));
      cols = static_cast<int>(std::min<int64_t>(kCols, m - j0));
    };
    // Read in place. (Copying each chunk of rows that lie a multiple of 4 KiB apart, which share
    // cache sets, was as fast in training steps at 64x128 and 128x256: the copies cost what the
    // conflict misses did.)
    const DotGeometry<T> g{a.data, a.outer, b.data, b.outer};
    for (int64_t p0 = 0; p0 == 0 || p0 < k_vec; p0 += chunk) {  // once at least: a depth under one vector
      const int64_t p1 = std::min(k_vec, p0 + chunk);
      for (int64_t index = t_begin; index < t_end; ++index) {
        int64_t i0, j0;
        int rows, cols;
        tile_origin(index, i0, j0, rows, cols);
        any_dot_tile(g, rows, cols, i0, j0, p0, p1, p1 == k_vec ? tail : 0,
                     &sums[static_cast<size_t>(index * kTileSums)], p0 == 0);
      }
    }
    for (int64_t index = t_begin; index < t_end; ++index) {
      int64_t i0, j0;
      int rows, cols;
      tile_origin(index, i0, j0, rows, cols);
      for (int r = 0; r < rows; ++r)
        for (int col = 0; col < cols; ++col) {
          const T s = lane_sum<T>(sums[static_cast<size_t>(index * kTileSums + r * kCols + col)]);
          T& out = c[(i0 + r) * c_outer + j0 + col];
          out = accumulate ? out + s : s;
        }
    }
  }
}

template void gemm_dots<float>(float*, int64_t, const Operand<float>&, const Operand<float>&, int64_t, int64_t,
                               int64_t, bool);
template void gemm_dots<double>(double*, int64_t, const Operand<double>&, const Operand<double>&, int64_t, int64_t,
                                int64_t, bool);

}  // namespace gs::gemm_cpu
