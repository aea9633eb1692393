// The register-tile GEMM of gemm_direct.h. The output is cut into tiles of kRows rows by kVecs vectors;
// a tile's sums stay in registers while the depth runs, each step broadcasting one element of a
// per row and loading kVecs vectors of b's row. a is read in place whichever way it is stored (its
// rows, or its columns; a weight gradient run as its transpose copies a into the panels as b^T's
// role). Tiles run panel by panel (kPanel column blocks, every row tile of the
// panel) and the depth in chunks; a panel's rows of b for one chunk are copied into contiguous
// column blocks first (PackedPanel: rows of a channels-first b lie a whole field apart and share
// L2 sets in place), and a b stored by columns (a channels-first weight gradient) is transposed
// into them. Each depth chunk's sums are added to c on their own.
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
// runs of 2 KB per row brought it to 66-70 (128 x 64 x 65536; ops/BENCHMARKS.md), and copying the
// panel's rows (PackedPanel below) to 82-83.
constexpr int64_t kPanel = 8;
// Row tiles per column block from which b's panel is copied (PackedPanel): the copy costs about
// what one row tile's reads do, so with fewer tiles to share it the product reads b in place.
constexpr int64_t kPackRowBlocks = 4;
constexpr int64_t kParallelWork = 64 * 64 * 64;  // multiply-adds below which one thread does it all
constexpr int64_t kTransposedOutput = 512 * 512;  // outputs a weight gradient's transposed copy may have

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

// How a tile's sums meet c: start from zero and store (the first depth chunk), start from c's values
// and store (the first chunk when accumulating), or start from zero and add to c (every later chunk:
// each chunk of kDepthChunk terms is summed on its own, so a weight gradient over 32768 points
// carries the rounding of 256 + 128 additions per output, not of 32768 in a row).
enum class Sums { fresh, from_c, added_to_c };

inline Sums chunk_sums(int64_t p0, bool accumulate) {
  return p0 > 0 ? Sums::added_to_c : accumulate ? Sums::from_c : Sums::fresh;
}

// Rows [i0, i0 + R) by vectors [j0, j0 + NV * lanes) of c, over depth [p0, p1).
template <typename T, int R, int NV>
void tile(const Geometry<T>& g, int64_t i0, int64_t j0, int64_t p0, int64_t p1, Sums sums) {
  constexpr int L = kLanes<T>;
  Vec<T> acc[R][NV];
  T* c = g.c + i0 * g.c_rs + j0;
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = sums == Sums::from_c ? load(c + r * g.c_rs + v * L) : Vec<T>{};
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
    for (int v = 0; v < NV; ++v) {
      T* out = c + r * g.c_rs + v * L;
      store(out, sums == Sums::added_to_c ? load(out) + acc[r][v] : acc[r][v]);
    }
}

// One panel's rows of b for one depth chunk, copied into contiguous column blocks: block q's depth
// step p at data[(q * depth + p - p0) * col_width]. In place, b's rows of a channels-first product
// lie a whole field apart (128-256 KB, a multiple of L2's set period): on the 2 MB pages of the
// library's tensors a panel's 64-128 runs of 2 KB fall into the same L2 sets, on 4 KB pages each
// run is a TLB miss. Copied once per panel and chunk, the runs are contiguous and each tile reads its
// block as one stream: 3-5% on tensors, 45-49 -> 70 GFLOP/s (64 x 128 x 65536) on 4 KB pages
// (ops/BENCHMARKS.md). A b stored by columns has to be transposed for the tiles anyway.
template <typename T>
struct PackedPanel {
  std::vector<T> data;
  int64_t depth = 0;  // depth steps per block: the chunk's length

  void fill(const Operand<T>& b, int64_t col_begin, int64_t col_end, int64_t p0, int64_t p1) {
    constexpr int64_t col_width = kVecs * kLanes<T>;
    depth = p1 - p0;
    const int64_t blocks = (col_end - col_begin + col_width - 1) / col_width;
    if (data.size() < static_cast<size_t>(blocks * depth * col_width))
      data.resize(static_cast<size_t>(blocks * depth * col_width));
    if (b.row_major)
      fill_from_rows(b, col_begin, col_end, p0, p1, blocks);
    else
      fill_from_columns(b, col_begin, col_end, p0, p1, blocks);
  }

  // Row by row, each row's run read front to back. (The copy waits on memory, 15-20% of a product
  // over a whole field; prefetching rows ahead, or copying inside the first row tile, did not
  // shorten it: ops/BENCHMARKS.md.)
  void fill_from_rows(const Operand<T>& b, int64_t col_begin, int64_t col_end, int64_t p0, int64_t p1,
                      int64_t blocks) {
    constexpr int64_t col_width = kVecs * kLanes<T>;
    for (int64_t p = p0; p < p1; ++p) {
      const T* row = b.data + p * b.outer;
      for (int64_t q = 0; q < blocks; ++q) {
        const int64_t j = col_begin + q * col_width, w = std::min(col_width, col_end - j);
        std::memcpy(data.data() + (q * depth + p - p0) * col_width, row + j, w * sizeof(T));
      }
    }
  }

  // b stored by columns (a channels-first weight gradient: b is the input's points x channels, each
  // channel's points contiguous): transposed lanes x lanes at a time in registers, the depth past
  // the last whole vector one value at a time. The columns are whole vectors (gemm_direct's tail
  // columns go through b_tail).
  void fill_from_columns(const Operand<T>& b, int64_t col_begin, int64_t col_end, int64_t p0, int64_t p1,
                         int64_t blocks) {
    constexpr int L = kLanes<T>;
    constexpr int64_t col_width = kVecs * L;
    const int64_t p_vec = p0 + (p1 - p0) / L * L;
    for (int64_t q = 0; q < blocks; ++q) {
      const int64_t j_block = col_begin + q * col_width, w = std::min(col_width, col_end - j_block);
      T* out = data.data() + q * depth * col_width;
      for (int64_t jj = 0; jj < w; jj += L) {
        const T* column = b.data + (j_block + jj) * b.outer;
        for (int64_t p = p0; p < p_vec; p += L) {
          Vec<T> v[L];
          for (int r = 0; r < L; ++r) v[r] = load(column + r * b.outer + p);
          sphere::simd::transpose_block<T>(v);
          for (int r = 0; r < L; ++r) store(out + (p - p0 + r) * col_width + jj, v[r]);
        }
        for (int64_t p = p_vec; p < p1; ++p)
          for (int r = 0; r < L; ++r) out[(p - p0) * col_width + jj + r] = column[r * b.outer + p];
      }
    }
  }

  // g for a tile of column block q over depth [0, depth): b is the block, a starts at the chunk's
  // first depth step p0 and c at the block's first column j0 (so the tile's origin there is 0).
  Geometry<T> block(const Geometry<T>& g, int64_t q, int64_t j0, int64_t p0) const {
    constexpr int64_t col_width = kVecs * kLanes<T>;
    Geometry<T> out = g;
    out.a = g.a + p0 * g.a_cs;
    out.b = data.data() + q * depth * col_width;
    out.b_rs = col_width;
    out.c = g.c + j0;
    return out;
  }
};

// Each thread's panel, kept between calls (up to 512 KB: allocating it per call faulted its pages
// in every time).
template <typename T>
PackedPanel<T>& thread_panel() {
  thread_local PackedPanel<T> panel;
  return panel;
}

template <typename T, int R>
void tile_rows(const Geometry<T>& g, int nv, int64_t i0, int64_t j0, int64_t p0, int64_t p1, Sums sums) {
  switch (nv) {
    case 1: return tile<T, R, 1>(g, i0, j0, p0, p1, sums);
    case 2: return tile<T, R, 2>(g, i0, j0, p0, p1, sums);
    case 3: return tile<T, R, 3>(g, i0, j0, p0, p1, sums);
    default: return tile<T, R, kVecs>(g, i0, j0, p0, p1, sums);
  }
}

template <typename T>
void any_tile(const Geometry<T>& g, int rows, int nv, int64_t i0, int64_t j0, int64_t p0, int64_t p1, Sums sums) {
  switch (rows) {
    case 1: return tile_rows<T, 1>(g, nv, i0, j0, p0, p1, sums);
    case 2: return tile_rows<T, 2>(g, nv, i0, j0, p0, p1, sums);
    case 3: return tile_rows<T, 3>(g, nv, i0, j0, p0, p1, sums);
    case 4: return tile_rows<T, 4>(g, nv, i0, j0, p0, p1, sums);
    case 5: return tile_rows<T, 5>(g, nv, i0, j0, p0, p1, sums);
    default: return tile_rows<T, kRows>(g, nv, i0, j0, p0, p1, sums);
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
  for (int64_t p0 = 0; p0 < k; p0 += kDepthChunk)
    any_tile(padded, rows, 1, 0, 0, p0, std::min(k, p0 + kDepthChunk), chunk_sums(p0, accumulate));
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < width; ++j) g.c[(i0 + r) * g.c_rs + j0 + j] = c_tail[r * L + j];
}

// c = a @ b (or c += when accumulating) by tiles, as the file's comment says; k > 0.
template <typename T>
void direct_product(T* c, int64_t c_outer, const Operand<T>& a, const Operand<T>& b, int64_t n, int64_t k, int64_t m,
                    bool accumulate) {
  constexpr int L = kLanes<T>;
  // g.b is read in place only when b has contiguous rows and is not packed (below).
  Geometry<T> g{a.data, a.row_major ? a.outer : 1, a.row_major ? 1 : a.outer, b.data, b.outer, c, c_outer};
  const bool parallel = n * k * m >= kParallelWork && omp_get_max_threads() > 1 && !omp_in_parallel();
  const int64_t m_vec = m / L * L;
  std::vector<T> b_tail;  // the columns past m_vec, zero-padded to one vector per depth step
  if (m_vec < m) {
    b_tail.assign(static_cast<size_t>(k * L), T(0));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = m_vec; j < m; ++j)
        b_tail[p * L + (j - m_vec)] = b.row_major ? b.data[p * b.outer + j] : b.data[j * b.outer + p];
  }
  const int64_t col_width = kVecs * L;
  const int64_t col_blocks = (m_vec + col_width - 1) / col_width, row_blocks = (n + kRows - 1) / kRows;
  const int64_t tiles = col_blocks * row_blocks;
  // A b stored by columns is always packed (transposed panel by panel).
  const bool pack = !b.row_major || row_blocks >= kPackRowBlocks;
#pragma omp parallel if (parallel)
  {
    // Each thread takes a contiguous run of tiles, panel by panel, so consecutive tiles share a's
    // rows and the panel's rows of b; each tile has one owner, so sums do not depend on the thread
    // count.
    const int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t t_begin = tiles * t / threads, t_end = tiles * (t + 1) / threads;
    PackedPanel<T>& packed = thread_panel<T>();
    for (int64_t p0 = 0; p0 < k; p0 += kDepthChunk) {
      const int64_t p1 = std::min(k, p0 + kDepthChunk);
      int64_t packed_panel = -1;
      for (int64_t tile_index = t_begin; tile_index < t_end; ++tile_index) {
        const int64_t per_panel = row_blocks * kPanel, panel = tile_index / per_panel, rem = tile_index % per_panel;
        const int64_t width = std::min(kPanel, col_blocks - panel * kPanel);  // column blocks in this panel
        const int64_t ib = rem / width, jb = panel * kPanel + rem % width;
        const int64_t i0 = ib * kRows, j0 = jb * col_width;
        const int rows = static_cast<int>(std::min<int64_t>(kRows, n - i0));
        const int nv = static_cast<int>(std::min<int64_t>(col_width, m_vec - j0) / L);
        if (!pack) {
          any_tile(g, rows, nv, i0, j0, p0, p1, chunk_sums(p0, accumulate));
          continue;
        }
        if (panel != packed_panel) {
          packed.fill(b, panel * kPanel * col_width, std::min(m_vec, (panel + 1) * kPanel * col_width), p0, p1);
          packed_panel = panel;
        }
        any_tile(packed.block(g, jb - panel * kPanel, j0, p0), rows, nv, i0, 0, 0, p1 - p0, chunk_sums(p0, accumulate));
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

// Whether gemm_direct runs a weight gradient (a by rows, b by columns, both along the depth) as its
// transpose: when b has more columns than a has rows, transposing a into the panels is the smaller
// copy (64 x 32768 x 128: 78 GFLOP/s directly, 92-95 as the transpose), and the transposed output
// (m x n, small) goes back through a scratch copy. The transpose runs direct_product, which does not
// ask again. (For a narrow output, 64 x 32768 x 32, the transpose was slower: 58-69 against 73-87:
// four output vectors a tile do not pay for transposing twice the rows.)
template <typename T>
bool transposed_suits(int64_t n, int64_t k, int64_t m, const Operand<T>& a, const Operand<T>& b) {
  constexpr int64_t lanes = kLanes<T>;
  return a.row_major && !b.row_major && m > n && n % lanes == 0 && n * m <= kTransposedOutput && k >= 4 * kDepthChunk;
}

}  // namespace

bool gemm_direct_suits(int64_t n, int64_t k, int64_t m, int64_t element_bytes, bool b_row_major) {
  const int64_t lanes = 64 / element_bytes;
  // Depth under 16 (an encoder from 3 channels): memory-bound either way, and Eigen was faster at
  // depth 4. Depth 32 came here once b's panels were copied: a 64x128 training step 5% faster at
  // one thread, 13% at two (ops/BENCHMARKS.md; before that copy Eigen was 10-15% faster there).
  if (n < 1 || k < 16 || m < lanes) return false;
  // Transposing a b stored by columns costs as much as a few output rows: not for a thin output
  // (the weight gradient of a 3-channel decoder, n = 3, was 8 times slower than Eigen's; gemm_dots
  // takes it).
  if (!b_row_major && n < 16) return false;
  if (m % lanes != 0 && m < 4 * lanes) return false;  // most of the output would be the scalar tail
  // Small depth (channel mixing forward and input gradient), or a small output (weight gradient):
  // then the operand Eigen would pack is the large one.
  return k <= 256 || (n <= 512 && m <= 512);
}

template <typename T>
void gemm_direct(T* c, int64_t c_outer, const Operand<T>& a, const Operand<T>& b, int64_t n, int64_t k, int64_t m,
                 bool accumulate) {
  if (k == 0) {
    if (!accumulate)
      for (int64_t i = 0; i < n; ++i) std::fill(c + i * c_outer, c + i * c_outer + m, T(0));
    return;
  }
  if (transposed_suits(n, k, m, a, b)) {
    // c^T = b^T a^T: b^T has contiguous rows and a^T contiguous columns, so the same kernel takes it
    // with the narrower operand (a, n rows) transposed into the panels instead of b (m columns).
    std::vector<T> c_t(static_cast<size_t>(m * n));
    direct_product<T>(c_t.data(), n, {b.data, true, b.outer}, {a.data, false, a.outer}, m, k, n, false);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        T& out = c[i * c_outer + j];
        out = accumulate ? out + c_t[j * n + i] : c_t[j * n + i];
      }
    return;
  }
  direct_product<T>(c, c_outer, a, b, n, k, m, accumulate);
}

template void gemm_direct<float>(float*, int64_t, const Operand<float>&, const Operand<float>&, int64_t, int64_t,
                                 int64_t, bool);
template void gemm_direct<double>(double*, int64_t, const Operand<double>&, const Operand<double>&, int64_t, int64_t,
                                  int64_t, bool);

}  // namespace gs::gemm_cpu
