// The unpacked GEMM of gemm_direct.h. The output is cut into tiles of kRows rows by kVecs vectors;
// a tile's sums stay in registers while the depth runs, each step broadcasting one element of a
// per row and loading kVecs vectors of b's row. a is read in place whichever way it is stored (its
// rows, or its columns); b must have contiguous rows, so a b stored by columns (a transposed
// weight in an input gradient) is copied once per call, which gemm_direct_suits allows only when b
// is small. Tiles run panel by panel (kPanel column blocks, every row tile of the panel); the depth
// is taken in chunks so that a panel's rows of b for one chunk stay in L2 while its row tiles use
// them; a tile's sums go through c between chunks (exactly: a store and a load).
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
// The tiles are sized for 512-bit vectors; GCC's tuning for AVX-512 CPUs defaults to 256.
#pragma GCC target("prefer-vector-width=512")
#endif
#include "ops/gemm_direct.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "ops/sphere/vec512.h"

namespace gs::gemm_cpu {
namespace {

constexpr int kRows = 6;   // output rows per tile
constexpr int kVecs = 4;   // output vectors per tile row: 6 x 4 sums in 24 of the 32 registers
constexpr int64_t kDepthChunk = 256;
// Tiles run panel by panel: kPanel column blocks (8 x 64 floats), all row tiles of the panel, each
// row tile across its columns. On a channels-first product over a whole field (b and c rows of
// 65536 points, 256 KB apart), visiting one column block at a time read b and wrote c in 256-byte
// runs per row, and the product ran at 55 GFLOP/s against 93 on a field that stays in cache;
// runs of 2 KB per row brought it to 66-70 (128 x 64 x 65536; ops/BENCHMARKS.md). The panel's
// rows of b (2 KB each) stay in L2 across its row tiles.
constexpr int64_t kPanel = 8;
constexpr int64_t kParallelWork = 64 * 64 * 64;  // multiply-adds below which one thread does it all
// Elements of a column-major b worth copying: a weight matrix (up to 256 x 256). A weight gradient
// over a coarse grid's points (64 x 3528 x 32: b is the input's 3528 x 32, transposed) spent as long
// in the scalar copy as in the product, on one thread while the others waited; Eigen packs it
// faster (1.0-1.9x, ops/BENCHMARKS.md).
constexpr int64_t kSmallOperand = 256 * 256;

template <typename T>
using Vec = sphere::simd::Vec<T>;
template <typename T>
constexpr int kLanes = sphere::simd::kLanes<T>;

using sphere::simd::load;
using sphere::simd::store;

// Where the operands are: a's element (i, p) at a[i * a_rs + p * a_cs], b's row p at b + p * b_rs.
template <typename T>
struct Geometry {
  const T* a;
  int64_t a_rs, a_cs;
  const T* b;
  int64_t b_rs;
  T* c;
  int64_t c_rs;
};

// Rows [i0, i0 + R) by vectors [j0, j0 + NV * lanes) of c, over depth [p0, p1). from_c: start from
// c's values (accumulating, or a later depth chunk), else from zero.
template <typename T, int R, int NV>
void tile(const Geometry<T>& g, int64_t i0, int64_t j0, int64_t p0, int64_t p1, bool from_c) {
  constexpr int L = kLanes<T>;
  Vec<T> acc[R][NV];
  T* c = g.c + i0 * g.c_rs + j0;
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = from_c ? load(c + r * g.c_rs + v * L) : Vec<T>{};
  const T* a = g.a + i0 * g.a_rs;
  for (int64_t p = p0; p < p1; ++p) {
    const T* bp = g.b + p * g.b_rs + j0;
    Vec<T> bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = load(bp + v * L);
    const T* ap = a + p * g.a_cs;
    for (int r = 0; r < R; ++r) {
      const T av = ap[r * g.a_rs];
      for (int v = 0; v < NV; ++v) acc[r][v] += av * bv[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) store(c + r * g.c_rs + v * L, acc[r][v]);
}

template <typename T, int R>
void tile_rows(const Geometry<T>& g, int nv, int64_t i0, int64_t j0, int64_t p0, int64_t p1, bool from_c) {
  switch (nv) {
    case 1: return tile<T, R, 1>(g, i0, j0, p0, p1, from_c);
    case 2: return tile<T, R, 2>(g, i0, j0, p0, p1, from_c);
    case 3: return tile<T, R, 3>(g, i0, j0, p0, p1, from_c);
    default: return tile<T, R, kVecs>(g, i0, j0, p0, p1, from_c);
  }
}

template <typename T>
void any_tile(const Geometry<T>& g, int rows, int nv, int64_t i0, int64_t j0, int64_t p0, int64_t p1, bool from_c) {
  switch (rows) {
    case 1: return tile_rows<T, 1>(g, nv, i0, j0, p0, p1, from_c);
    case 2: return tile_rows<T, 2>(g, nv, i0, j0, p0, p1, from_c);
    case 3: return tile_rows<T, 3>(g, nv, i0, j0, p0, p1, from_c);
    case 4: return tile_rows<T, 4>(g, nv, i0, j0, p0, p1, from_c);
    case 5: return tile_rows<T, 5>(g, nv, i0, j0, p0, p1, from_c);
    default: return tile_rows<T, kRows>(g, nv, i0, j0, p0, p1, from_c);
  }
}

// The columns past the last whole vector: b's are copied into one zero-padded vector per depth step
// (b_tail, k x lanes) and each row tile runs the vector kernel on a padded copy of its piece of c,
// so the tail is summed in the same order as every other column (a scalar loop here was 16 times
// slower per element: a 12-column tail of a 924-column product cost a fifth of it).
template <typename T>
void tail_tile(const Geometry<T>& g, const T* b_tail, int64_t i0, int rows, int64_t j0, int width, int64_t k,
               bool accumulate) {
  constexpr int L = kLanes<T>;
  T c_tail[kRows * L] = {};
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < width; ++j) c_tail[r * L + j] = accumulate ? g.c[(i0 + r) * g.c_rs + j0 + j] : T(0);
  const Geometry<T> padded{g.a + i0 * g.a_rs, g.a_rs, g.a_cs, b_tail, L, c_tail, L};
  any_tile(padded, rows, 1, 0, 0, 0, k, accumulate);
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < width; ++j) g.c[(i0 + r) * g.c_rs + j0 + j] = c_tail[r * L + j];
}

}  // namespace

bool gemm_direct_suits(int64_t n, int64_t k, int64_t m, int64_t element_bytes, bool b_row_major) {
  const int64_t lanes = 64 / element_bytes;
  // Depth up to 32: in a training step (operands from memory, not a warm cache) Eigen was 10-15%
  // faster on the 64 x 32 x points products and as fast on an encoder from 3 channels; from depth
  // 64 on this kernel was faster (ops/BENCHMARKS.md).
  if (n < 1 || k <= 32 || m < lanes) return false;
  // Copying a b stored by columns costs as much as a few output rows: not for a thin output (the
  // weight gradient of a 3-channel decoder, n = 3, was 8 times slower than Eigen's).
  if (!b_row_major && n < 16) return false;
  // A b stored by columns is copied first: worth it only for a small one. (A larger one, a
  // channels-first weight gradient, goes to gemm_dots when its output is thin, else to Eigen.)
  if (!b_row_major && k * m > kSmallOperand) return false;
  if (m % lanes != 0 && m < 4 * lanes) return false;  // most of the output would be the scalar tail
  // Small depth (channel mixing forward and input gradient), or a small output (weight gradient):
  // then the operand Eigen would pack is the large one.
  return k <= 256 || (n <= 512 && m <= 512);
}

template <typename T>
void gemm_direct(T* c, int64_t c_outer, const Operand<T>& a, const Operand<T>& b, int64_t n, int64_t k, int64_t m,
                 bool accumulate) {
  constexpr int L = kLanes<T>;
  if (k == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < n; ++i) std::fill(c + i * c_outer, c + i * c_outer + m, T(0));
    return;
  }
  std::vector<T> b_rows;  // b with contiguous rows, when it is stored by columns
  Geometry<T> g{a.data, a.row_major ? a.outer : 1, a.row_major ? 1 : a.outer, b.data, b.outer, c, c_outer};
  const bool parallel = n * k * m >= kParallelWork && omp_get_max_threads() > 1 && !omp_in_parallel();
  if (!b.row_major) {
    b_rows.resize(static_cast<size_t>(k * m));
    for (int64_t j = 0; j < m; ++j)
      for (int64_t p = 0; p < k; ++p) b_rows[p * m + j] = b.data[j * b.outer + p];
    g.b = b_rows.data();
    g.b_rs = m;
  }
  const int64_t m_vec = m / L * L;
  std::vector<T> b_tail;  // the columns past m_vec, zero-padded to one vector per depth step
  if (m_vec < m) {
    b_tail.assign(static_cast<size_t>(k * L), T(0));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = m_vec; j < m; ++j) b_tail[p * L + (j - m_vec)] = g.b[p * g.b_rs + j];
  }
  const int64_t col_width = kVecs * L;
  const int64_t col_blocks = (m_vec + col_width - 1) / col_width, row_blocks = (n + kRows - 1) / kRows;
  const int64_t tiles = col_blocks * row_blocks;
#pragma omp parallel if (parallel)
  {
    // Each thread takes a contiguous run of tiles, panel by panel, so consecutive tiles share a's
    // rows and the panel's rows of b; each tile has one owner, so sums do not depend on the thread
    // count.
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t t_begin = tiles * t / threads, t_end = tiles * (t + 1) / threads;
    for (int64_t p0 = 0; p0 < k; p0 += kDepthChunk) {
      const int64_t p1 = std::min(k, p0 + kDepthChunk);
      for (int64_t tile_index = t_begin; tile_index < t_end; ++tile_index) {
        const int64_t per_panel = row_blocks * kPanel, panel = tile_index / per_panel, rem = tile_index % per_panel;
        const int64_t width = std::min(kPanel, col_blocks - panel * kPanel);  // column blocks in this panel
        const int64_t ib = rem / width, jb = panel * kPanel + rem % width;
        const int64_t i0 = ib * kRows, j0 = jb * col_width;
        const int rows = static_cast<int>(std::min<int64_t>(kRows, n - i0));
        const int nv = static_cast<int>(std::min<int64_t>(col_width, m_vec - j0) / L);
        any_tile(g, rows, nv, i0, j0, p0, p1, accumulate || p0 > 0);
      }
    }
    if (m_vec < m) {
#pragma omp for schedule(static)
      for (int64_t ib = 0; ib < row_blocks; ++ib) {
        const int64_t i0 = ib * kRows;
        tail_tile(g, b_tail.data(), i0, static_cast<int>(std::min<int64_t>(kRows, n - i0)), m_vec,
                  static_cast<int>(m - m_vec), k, accumulate);
      }
    }
  }
}

template void gemm_direct<float>(float*, int64_t, const Operand<float>&, const Operand<float>&, int64_t, int64_t,
                                 int64_t, bool);
template void gemm_direct<double>(double*, int64_t, const Operand<double>&, const Operand<double>&, int64_t, int64_t,
                                  int64_t, bool);

}  // namespace gs::gemm_cpu
