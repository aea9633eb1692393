// Table kernels of the Legendre contractions (table_kernels.h).
//
// Symmetry. With j' = nlat-1-j the mirror of northern row j and Pbar_l^m(-x) = (-1)^{l+m} Pbar_l^m(x),
//   to_degree:   A[l,m] = sum_{northern j} T[l,j] (X[j,m] + (-1)^{l-m} X[j',m])
//   to_latitude: X[j,m] = S_e + S_o, X[j',m] = S_e - S_o, with S_e (S_o) the sum over even (odd) l - m
// so each table value serves a row and its mirror: half the multiply-adds of the plain sum.
// In a register of orders m0 .. m0+lanes-1 the parity of l - m alternates from lane to lane; with
// sigma = (+1, -1, +1, ...) over the lanes (the sign of (-1)^{m-m0}):
//   to_degree:   degree l with l - m0 even contracts D+ = Xn + sigma Xs, odd l - m0 contracts D- = Xn - sigma Xs
//   to_latitude: Sa = sum over even l - m0, Sb over odd: X[j] = Sa + Sb, X[j'] = sigma (Sa - Sb)
// The equator row (odd nlat) has no mirror: Xs = 0 there, and the table holds 0 for odd functions.
// Tables of parity 1 (T(-x) = -(-1)^{l-m} T(x), the vector SHT's dPbar/dtheta) swap D+ and D-, and
// write -sigma (Sa - Sb) to the mirror.
//
// Blocking. to_degree keeps kDeg degrees x kFields fields of sums in registers and walks the rows;
// to_latitude keeps kRows rows x kFieldsLat fields (two sums each) and walks the degrees. The
// table entries of one block of orders stay in L1/L2 while the fields are walked.
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
// The registers are sized for 512-bit vectors; GCC's tuning for AVX-512 CPUs defaults to 256.
#pragma GCC target("prefer-vector-width=512")
#endif
#include "ops/sphere/legendre/table_kernels.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ops/sphere/vec512.h"

namespace gs::sphere {
namespace {

// One register (vec512.h) holds kLanes<T> / 2 complex values, re and im interleaved as in
// std::complex arrays.
using simd::kLanes;
using simd::Vec;
template <typename T>
constexpr int kOrders = kLanes<T> / 2;

constexpr int kDeg = 4;         // to_degree: degrees per register tile
constexpr int kFields = 4;      // to_degree: fields per register tile
constexpr int kRows = 4;        // to_latitude: northern rows per register tile
constexpr int kFieldsLat = 2;   // to_latitude: fields per register tile (two sums each)
constexpr int kChunkRows = 32;  // to_degree: rows whose D+/D- stay in L1 (16 KB of f64 at 4 fields)
// Below this many multiply-adds a contraction stays on the calling thread.
constexpr int64_t kSerialWork = 1 << 18;
// Fields per thread from which the threads split the fields rather than the blocks of orders.
constexpr int64_t kFieldsPerThread = 4;

// The table's `orders` values at p, each duplicated into a re and an im lane.
template <typename T>
inline Vec<T> load_dup(const T* p) {
  Vec<T> v;
  std::memcpy(&v, p, sizeof(v));  // reads kLanes values; the table is padded for the last one
#if defined(__GNUC__) && !defined(__clang__)
  simd::Index<T> idx;
  for (int i = 0; i < kLanes<T>; ++i) idx[i] = i / 2;
  return __builtin_shuffle(v, idx);
#else
  Vec<T> d;
  for (int i = 0; i < kLanes<T>; ++i) d[i] = v[i / 2];
  return d;
#endif
}

// sigma: +1 on the lanes of even m - m0, -1 on odd.
template <typename T>
inline Vec<T> lane_signs() {
  Vec<T> s;
  for (int i = 0; i < kLanes<T>; ++i) s[i] = (i / 2) % 2 == 0 ? T(1) : T(-1);
  return s;
}

// Complex values at p: all kOrders (Full, one unaligned vector load or store), or the first
// `count`, the rest zero (only the last block of orders can be partial).
template <bool Full, typename T>
inline Vec<T> load(const std::complex<T>* p, int count) {
  Vec<T> v{};
  if constexpr (Full) std::memcpy(&v, p, sizeof(v));
  else std::memcpy(&v, p, static_cast<size_t>(count) * sizeof(std::complex<T>));
  return v;
}
template <bool Full, typename T>
inline void store(std::complex<T>* p, Vec<T> v, int count) {
  if constexpr (Full) std::memcpy(static_cast<void*>(p), &v, sizeof(v));
  else std::memcpy(static_cast<void*>(p), &v, static_cast<size_t>(count) * sizeof(std::complex<T>));
}

// Where one block of orders lives, in the table and in the data.
template <typename T>
struct BlockRef {
  const T* tab;     // the block's values: ((l - m0) * width + (j - js)) * kOrders + (m - m0)
  int64_t m0;       // first order
  int64_t col;      // its column in the data (m0 - the table's m_begin)
  int count;        // orders of the block that exist (< kOrders only for the last block)
  int64_t js;       // first stored northern row
  int64_t width;    // stored rows
  int64_t nlat, lmax, stride, n_even, equator;  // stride: the data's columns; equator: its row, or -1 (even nlat)
  int parity;       // LegendreTable::parity: 1 swaps the roles of the even and odd combinations
  const T* t(int64_t l, int64_t j) const { return tab + ((l - m0) * width + (j - js)) * kOrders<T>; }
};

template <typename T>
BlockRef<T> block_ref(const LegendreTable& tab, const T* values, int64_t k) {
  const int64_t nlat = tab.key.nlat, stride = tab.key.order_count(), col = k * tab.lanes;
  return {values + tab.block_offset[static_cast<size_t>(k)],
          tab.block_order(k),
          col,
          static_cast<int>(std::min<int64_t>(tab.lanes, stride - col)),
          tab.block_first_row[static_cast<size_t>(k)],
          tab.width(k),
          nlat,
          tab.key.lmax,
          stride,
          tab.n_even,
          nlat % 2 == 1 ? nlat / 2 : -1,
          tab.parity};
}

// The even/odd combinations D+ and D- of NB fields over a chunk of up to kChunkRows northern rows,
// kept contiguous (in L1) while every degree of the block is contracted with them.
template <typename T>
struct RowChunk {
  Vec<T> d[kFields][2][kChunkRows];  // [field][0: D+, 1: D-][row - j0]
  int64_t j0 = 0, rows = 0;
};

template <typename T, bool Full, int NB>
void fill_chunk(const BlockRef<T>& k, const std::complex<T>* X, int64_t b0, RowChunk<T>& c) {
  const Vec<T> sigma = lane_signs<T>();
  for (int f = 0; f < NB; ++f) {
    const std::complex<T>* xf = X + (b0 + f) * k.nlat * k.stride + k.col;
    for (int64_t r = 0; r < c.rows; ++r) {
      const int64_t j = c.j0 + r;
      const Vec<T> xn = load<Full>(xf + j * k.stride, k.count);
      const Vec<T> xs = j == k.equator ? Vec<T>{} : load<Full>(xf + (k.nlat - 1 - j) * k.stride, k.count);
      c.d[f][0][r] = xn + sigma * xs;
      c.d[f][1][r] = xn - sigma * xs;
    }
  }
}

// Asks for the X rows of the chunk of NB fields at j0 (and their mirrors), so that they arrive
// while the previous chunk is contracted: the rows are mmax complex values apart, too far for the
// hardware's stride prefetcher, and each is read once.
template <typename T, int NB>
void prefetch_chunk(const BlockRef<T>& k, const std::complex<T>* X, int64_t b0, int64_t j0) {
  const int64_t rows = std::min<int64_t>(kChunkRows, k.n_even - j0);
  for (int f = 0; f < NB; ++f) {
    const std::complex<T>* xf = X + (b0 + f) * k.nlat * k.stride + k.col;
    for (int64_t r = 0; r < rows; ++r) {
      __builtin_prefetch(xf + (j0 + r) * k.stride);
      __builtin_prefetch(xf + (k.nlat - 1 - j0 - r) * k.stride);
    }
  }
}

// A[b0 .. b0+NB, l0 .. l0+ND, block] += the chunk's rows (the first chunk starts from 0).
template <typename T, bool Full, int ND, int NB>
void degree_tile(const BlockRef<T>& k, const RowChunk<T>& c, bool first, std::complex<T>* A, int64_t b0,
                 int64_t l0) {
  Vec<T> acc[ND][NB];
  for (int d = 0; d < ND; ++d)
    for (int f = 0; f < NB; ++f)
      acc[d][f] = first ? Vec<T>{} : load<Full>(A + ((b0 + f) * k.lmax + l0 + d) * k.stride + k.col, k.count);
  const T* t0 = k.t(l0, c.j0);
  const int64_t t_stride = k.width * kOrders<T>;  // from one degree to the next
  for (int64_t r = 0; r < c.rows; ++r) {
#pragma GCC unroll 8
    for (int d = 0; d < ND; ++d) {
      const Vec<T> t = load_dup(t0 + d * t_stride + r * kOrders<T>);
      // l0 - m0 is a multiple of kDeg (even), so degree l0 + d has the parity of d.
      const int combination = (d + k.parity) % 2;
#pragma GCC unroll 8
      for (int f = 0; f < NB; ++f) acc[d][f] += t * c.d[f][combination][r];
    }
  }
  for (int d = 0; d < ND; ++d)
    for (int f = 0; f < NB; ++f) store<Full>(A + ((b0 + f) * k.lmax + l0 + d) * k.stride + k.col, acc[d][f], k.count);
}

// to_latitude works on the block's degrees of A packed once per field tile: per degree and field,
// the block's orders' real parts twice over, then their imaginary parts twice over
// ([re m0 .. re m0+K-1, re m0 .. re m0+K-1], K = kOrders). A plain load of the table then holds
// two rows' values of the K orders, so one multiply-add serves two rows of one part. (Read in
// place, each table value had to be duplicated into a re and an im lane, one 512-bit shuffle per
// row and degree, and the machine has one port for those and two for the multiply-adds: at
// legendre-gauss 64x128 the shuffles bound the kernel. Packing costs two shuffles per degree and
// field, once for all the rows.) The sums are the same, term by term, as in place.
template <typename T>
struct PackedDegrees {
  std::vector<Vec<T>> v;  // [deg - m0][field][re, im]
};

template <typename T, bool Full, int NB>
void pack_degrees(const BlockRef<T>& k, const std::complex<T>* A, int64_t b0, PackedDegrees<T>& pk) {
  simd::Index<T> re_idx, im_idx;
  for (int i = 0; i < kLanes<T>; ++i) re_idx[i] = 2 * (i % kOrders<T>), im_idx[i] = re_idx[i] + 1;
  pk.v.resize(static_cast<size_t>((k.lmax - k.m0) * NB * 2));
  Vec<T>* out = pk.v.data();
  for (int64_t deg = k.m0; deg < k.lmax; ++deg)
    for (int f = 0; f < NB; ++f, out += 2) {
      const Vec<T> a = load<Full>(A + ((b0 + f) * k.lmax + deg) * k.stride + k.col, k.count);
#if defined(__GNUC__) && !defined(__clang__)
      out[0] = __builtin_shuffle(a, re_idx);
      out[1] = __builtin_shuffle(a, im_idx);
#else
      for (int i = 0; i < kLanes<T>; ++i) out[0][i] = a[re_idx[i]], out[1][i] = a[im_idx[i]];
#endif
    }
}

// Row h (0 or 1) of a pair held as [re of both rows], [im of both rows]: its K complex values
// interleaved as the data holds them.
template <typename T>
inline Vec<T> interleave_row(const Vec<T>& re, const Vec<T>& im, int h) {
  simd::Index<T> idx;
  for (int i = 0; i < kLanes<T>; ++i) idx[i] = (i % 2 == 0 ? 0 : kLanes<T>) + h * kOrders<T> + i / 2;
#if defined(__GNUC__) && !defined(__clang__)
  return __builtin_shuffle(re, im, idx);
#else
  Vec<T> v;
  for (int i = 0; i < kLanes<T>; ++i) v[i] = idx[i] < kLanes<T> ? re[idx[i]] : im[idx[i] - kLanes<T>];
  return v;
#endif
}

// X[b0 .. b0+NB, rows j0 .. j0+NR and their mirrors, block] from the packed degrees of A.
template <typename T, bool Full, int NR, int NB>
void latitude_tile(const BlockRef<T>& k, const PackedDegrees<T>& pk, std::complex<T>* X, int64_t b0, int64_t j0) {
  constexpr int NP = (NR + 1) / 2;  // pairs of rows (the last one's second row unused for odd NR)
  Vec<T> sa[NP][NB][2] = {}, sb[NP][NB][2] = {};
  int64_t l = k.m0;
  auto step = [&](int64_t deg, Vec<T>(&s)[NP][NB][2]) {
    const Vec<T>* a = pk.v.data() + (deg - k.m0) * NB * 2;
    const T* t = k.t(deg, j0);
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) {
      Vec<T> tp;  // rows j0 + 2p and j0 + 2p + 1 (the table is padded for the last one)
      std::memcpy(&tp, t + 2 * p * kOrders<T>, sizeof(tp));
#pragma GCC unroll 8
      for (int f = 0; f < NB; ++f) s[p][f][0] += tp * a[2 * f], s[p][f][1] += tp * a[2 * f + 1];
    }
  };
  for (; l + 1 < k.lmax; l += 2) {
    step(l, sa);
    step(l + 1, sb);
  }
  if (l < k.lmax) step(l, sa);
  Vec<T> mirror;  // sigma per order, negated for parity-1 tables
  for (int i = 0; i < kLanes<T>; ++i) mirror[i] = ((i % kOrders<T>) % 2 == 0) == (k.parity == 0) ? T(1) : T(-1);
  for (int p = 0; p < NP; ++p)
    for (int f = 0; f < NB; ++f) {
      const Vec<T> sum_re = sa[p][f][0] + sb[p][f][0], sum_im = sa[p][f][1] + sb[p][f][1];
      const Vec<T> dif_re = mirror * (sa[p][f][0] - sb[p][f][0]), dif_im = mirror * (sa[p][f][1] - sb[p][f][1]);
      std::complex<T>* xf = X + (b0 + f) * k.nlat * k.stride + k.col;
      for (int h = 0; h < 2 && 2 * p + h < NR; ++h) {
        const int64_t j = j0 + 2 * p + h;
        store<Full>(xf + j * k.stride, interleave_row<T>(sum_re, sum_im, h), k.count);
        if (j != k.equator) store<Full>(xf + (k.nlat - 1 - j) * k.stride, interleave_row<T>(dif_re, dif_im, h), k.count);
      }
    }
}

// Calls fn.template operator()<N>(start) over [begin, end) in tiles of up to Max, the last one
// shorter (N = 1 .. Max at compile time).
template <int Max, typename Fn>
void for_tiles(int64_t begin, int64_t end, Fn&& fn) {
  int64_t i = begin;
  for (; i + Max <= end; i += Max) fn.template operator()<Max>(i);
  const int64_t rest = end - i;
  if constexpr (Max > 1) {
    if (rest > 0) {
      [&]<int... N>(std::integer_sequence<int, N...>) {
        ((rest == N + 1 ? (fn.template operator()<N + 1>(i), 0) : 0), ...);
      }(std::make_integer_sequence<int, Max - 1>{});
    }
  }
}

// Zeroes rows [r0, r1) of the block's orders in every field of out (batch, rows, stride).
template <typename T>
void zero_rows(const BlockRef<T>& k, std::complex<T>* out, int64_t rows, int64_t r0, int64_t r1, int64_t batch) {
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t r = r0; r < r1; ++r) {
      std::complex<T>* p = out + (b * rows + r) * k.stride + k.col;
      if (k.count == kOrders<T>) store<true>(p, Vec<T>{}, k.count);
      else store<false>(p, Vec<T>{}, k.count);
    }
}

template <typename T>
void to_degree_block(const BlockRef<T>& k, const std::complex<T>* X, std::complex<T>* A, int64_t batch) {
  // Degrees below the block's first order are zeroed by zero_upper_orders; all the others are when
  // no row is stored.
  if (k.js >= k.n_even) {
    zero_rows(k, A, k.lmax, std::min(k.m0, k.lmax), k.lmax, batch);
    return;
  }
  RowChunk<T> c;
  for_tiles<kFields>(0, batch, [&]<int NB>(int64_t b0) {
    for (c.j0 = k.js; c.j0 < k.n_even; c.j0 += kChunkRows) {
      c.rows = std::min<int64_t>(kChunkRows, k.n_even - c.j0);
      const bool first = c.j0 == k.js;
      if (k.count == kOrders<T>) fill_chunk<T, true, NB>(k, X, b0, c);
      else fill_chunk<T, false, NB>(k, X, b0, c);
      if (c.j0 + kChunkRows < k.n_even) prefetch_chunk<T, NB>(k, X, b0, c.j0 + kChunkRows);
      else if (b0 + NB < batch) prefetch_chunk<T, NB>(k, X, b0 + NB, k.js);  // same rows, next fields
      for_tiles<kDeg>(k.m0, k.lmax, [&]<int ND>(int64_t l0) {
        if (k.count == kOrders<T>) degree_tile<T, true, ND, NB>(k, c, first, A, b0, l0);
        else degree_tile<T, false, ND, NB>(k, c, first, A, b0, l0);
      });
    }
  });
  // The block's first degrees hold orders with l < m, where the table stores 0; but 0 * NaN is NaN,
  // so a NaN in X would leak into entries that must stay zero: zero_upper_orders sets them exactly.
}

// A[b, l, m] = 0 for every order m > l, one contiguous run per row of A, after the blocks: the
// entries below a block's first order, and those of its first degrees that the tiles computed as
// 0 * X. (Zeroed per block, the same entries were one 64-byte store per row 3-12 KB apart: 8% of
// the analysis at legendre-gauss 180x360, 16 fields.)
template <typename T>
void zero_upper_orders(const LegendreTable& tab, std::complex<T>* A, int64_t batch, bool parallel) {
  const int64_t lmax = tab.key.lmax, m_begin = tab.key.m_begin, stride = tab.key.order_count();
#pragma omp parallel for if (parallel)
  for (int64_t row = 0; row < batch * lmax; ++row) {
    const int64_t l = row % lmax, first = std::clamp<int64_t>(l + 1 - m_begin, 0, stride);
    std::fill(A + row * stride + first, A + (row + 1) * stride, std::complex<T>{});
  }
}

template <typename T>
void to_latitude_block(const BlockRef<T>& k, const std::complex<T>* A, std::complex<T>* X, int64_t batch) {
  // Rows before the block's first stored row, and their mirrors, are zero.
  zero_rows(k, X, k.nlat, 0, k.js, batch);
  zero_rows(k, X, k.nlat, k.nlat - k.js, k.nlat, batch);
  thread_local PackedDegrees<T> pk;
  for_tiles<kFieldsLat>(0, batch, [&]<int NB>(int64_t b0) {
    if (k.count == kOrders<T>) pack_degrees<T, true, NB>(k, A, b0, pk);
    else pack_degrees<T, false, NB>(k, A, b0, pk);
    for_tiles<kRows>(k.js, k.n_even, [&]<int NR>(int64_t j0) {
      if (k.count == kOrders<T>) latitude_tile<T, true, NR, NB>(k, pk, X, b0, j0);
      else latitude_tile<T, false, NR, NB>(k, pk, X, b0, j0);
    });
  });
}

// Runs block(k, f0, f1) over the table's blocks of orders k and fields [f0, f1). Each field's
// result is computed the same way whatever the split, so the split does not change any result.
//   - Many fields: each thread takes a contiguous run of fields through every block. The
//     longitude FFT splits its rows (fields x latitudes) the same way, so a thread mostly reads
//     the rows it wrote, and only the output lines at the runs' ends are written by two. Split by
//     blocks, the low orders' block was most of the work (an SFNO's 22 orders make three blocks:
//     140 : 91 at two threads), every row was read by both threads and every output line written
//     by both: with a tape, the 22 x 43 sht of 128 fields took 0.45 ms at two threads against
//     0.26 at one; split by fields 0.14 (ops/BENCHMARKS.md).
//   - Few fields (one large field): blocks of orders, dynamically; low orders cost most (lmax - m0
//     degrees, fewest skipped rows) and go first.
template <typename T>
bool run_parallel(const LegendreTable& tab, int64_t batch) {
  return !omp_in_parallel() && omp_get_max_threads() > 1 &&
         batch * tab.key.nlat * tab.key.lmax * tab.key.order_count() / 4 >= kSerialWork;
}

template <typename T, typename Fn>
void for_blocks(const LegendreTable& tab, int64_t batch, Fn&& block) {
  const T* values = tab.values.template data<T>();
  const int64_t n = tab.blocks();
  if (!run_parallel<T>(tab, batch)) {
    for (int64_t k = 0; k < n; ++k) block(block_ref<T>(tab, values, k), 0, batch);
    return;
  }
  if (batch >= kFieldsPerThread * omp_get_max_threads()) {
#pragma omp parallel
    {
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t f0 = batch * t / nt, f1 = batch * (t + 1) / nt;
      for (int64_t k = 0; k < n && f1 > f0; ++k) block(block_ref<T>(tab, values, k), f0, f1);
    }
    return;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t k = 0; k < n; ++k) block(block_ref<T>(tab, values, k), 0, batch);
}

}  // namespace

void table_to_degree(const LegendreTable& tab, const std::complex<float>* X, std::complex<float>* A, int64_t batch) {
  for_blocks<float>(tab, batch, [&](const BlockRef<float>& k, int64_t f0, int64_t f1) {
    to_degree_block<float>(k, X + f0 * k.nlat * k.stride, A + f0 * k.lmax * k.stride, f1 - f0);
  });
  zero_upper_orders<float>(tab, A, batch, run_parallel<float>(tab, batch));
}
void table_to_degree(const LegendreTable& tab, const std::complex<double>* X, std::complex<double>* A, int64_t batch) {
  for_blocks<double>(tab, batch, [&](const BlockRef<double>& k, int64_t f0, int64_t f1) {
    to_degree_block<double>(k, X + f0 * k.nlat * k.stride, A + f0 * k.lmax * k.stride, f1 - f0);
  });
  zero_upper_orders<double>(tab, A, batch, run_parallel<double>(tab, batch));
}
void table_to_latitude(const LegendreTable& tab, const std::complex<float>* A, std::complex<float>* X,
                       int64_t batch) {
  for_blocks<float>(tab, batch, [&](const BlockRef<float>& k, int64_t f0, int64_t f1) {
    to_latitude_block<float>(k, A + f0 * k.lmax * k.stride, X + f0 * k.nlat * k.stride, f1 - f0);
  });
}
void table_to_latitude(const LegendreTable& tab, const std::complex<double>* A, std::complex<double>* X,
                       int64_t batch) {
  for_blocks<double>(tab, batch, [&](const BlockRef<double>& k, int64_t f0, int64_t f1) {
    to_latitude_block<double>(k, A + f0 * k.lmax * k.stride, X + f0 * k.nlat * k.stride, f1 - f0);
  });
}

}  // namespace gs::sphere
