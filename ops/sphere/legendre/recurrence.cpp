// On-the-fly Legendre contractions (recurrence.h). Per order m, the northern rows the
// order needs are cut into blocks of kRows latitudes; for each block the kernels march the pair
// form of the recurrence (RecurrencePlan::pair_rec): one value Y_k(x^2) per two degrees,
//   Y_{k+1} = (r_k x^2 + s_k) Y_k + Y_{k-1}      (two fused multiply-adds per two degrees),
// with Pbar_{m+2k+1} = x sigma_k Y_k and Pbar_{m+2k} a two-term combination of Y_k and Y_{k-1} that
// is folded into the coefficients. Every value serves a northern row and its mirror through
// Pbar_l^m(-x) = (-1)^{l+m} Pbar_l^m(x): the analysis contracts Y_k with the even part
// E = X[j] + X[j'] and with x times the odd part O = X[j] - X[j'], the synthesis accumulates the
// even and odd sums S_e, S_o and writes S_e +- x S_o. The synthesis marches each block through all
// pairs; the analysis marches a few pairs at a time across all blocks (analysis_pair_chunk) so that
// its sums over rows stay in registers. The seeds Pbar_m^m and the coefficients are those of
// functions.cpp (same formulas, same scaled diagonal), so the two paths agree to rounding. (The
// plain form, Pbar_l = a_l x Pbar_{l-1} - b_l Pbar_{l-2} rescaled to two operations per degree,
// remains for the scaled starts below and for the analysis without AVX-512.)
//
// Negligible rows. Pbar_l^m ~ sin^m(theta) near the poles: for each order, northern rows whose values
// are all below the table's negligible level (table.h) are skipped, a large saving at high
// m. The remaining rows may still start below the f64 range when lmax is large (the seed underflows
// while a higher degree is of order one): those (order, row) pairs march in scaled arithmetic
// at plan time until the value is back in range, and the kernel resumes them from there, one row at
// a time (none occur up to lmax ~ 1000).
#if defined(__GNUC__) && !defined(__clang__) && defined(__AVX512F__)
// The blocks are sized for 512-bit vectors; GCC's tuning for AVX-512 CPUs defaults to 256.
#pragma GCC target("prefer-vector-width=512")
#endif
#include "ops/sphere/legendre/recurrence.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/error.h"
#include "ops/sphere/vec512.h"

namespace gs::sphere {
namespace {

// Latitudes per recurrence block: four AVX-512 (eight AVX2) registers of f64. (The analysis with 16
// or 64 rows and as many accumulators was no faster.)
constexpr int kRows = 32;
constexpr int kLanes = 8;  // doubles per analysis accumulator (Lanes): the block's rows mod 8
// Below this many multiply-adds a contraction stays on the calling thread.
constexpr int64_t kSerialWork = 1 << 18;
// Fields per thread from which the threads split the fields rather than the orders (for_chunks).
constexpr int64_t kFieldsPerThread = 16;

// ---- kernels ----

// One vector of kLanes doubles (vec512.h: plain arithmetic, lowered to whatever vector width the
// target has; no intrinsics). The analysis kernel uses it instead of arrays of
// doubles because GCC kept those accumulators on the stack, with a load and a store per use.
using Lanes = simd::Vec<double>;
static_assert(simd::kLanes<double> == kLanes);
inline Lanes load_lanes(const double* p) {
  Lanes v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store_lanes(double* p, const Lanes& v) { __builtin_memcpy(p, &v, sizeof v); }
// The synthesis's vector: a whole register. (With AVX2 a Lanes is two registers, and GCC built
// the 8-double vectors of this kernel through the stack: twice the plain form's time.)
#ifdef __AVX512F__
using SynthVec = Lanes;
#else
typedef double SynthVec __attribute__((vector_size(32)));
#endif
constexpr int kSynthLanes = static_cast<int>(sizeof(SynthVec) / sizeof(double));
inline SynthVec load_synth(const double* p) {
  SynthVec v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store_synth(double* p, const SynthVec& v) { __builtin_memcpy(p, &v, sizeof v); }

// The synthesis of V vectors of rows for FB fields in the pair form (RecurrencePlan::pair_rec):
// Y_k marches two degrees per step, and each Y_k adds into the even sums with the coefficient
// pc[4f + re/im] and into the odd sums with pc[4f + 2 + re/im]; the odd sums are multiplied by x
// at the end (Pbar_odd = x sigma Y). y0: Y_0 of the rows (0 on padded and scaled-start rows).
// pc: np pairs of B fields x 4 values, `pstride` apart.
template <int FB, int V>
inline void synth_pairs(const double* rec, int64_t np, const SynthVec* t, const SynthVec* x, const SynthVec* y0,
                        const double* pc, int64_t pstride, SynthVec (&se)[FB][2][V], SynthVec (&so)[FB][2][V]) {
  SynthVec e[FB][2][V], o[FB][2][V], yp[V], yc[V];
  for (int v = 0; v < V; ++v) yp[v] = SynthVec{}, yc[v] = y0[v];
  for (int f = 0; f < FB; ++f)
    for (int i = 0; i < 2; ++i)
      for (int v = 0; v < V; ++v) e[f][i][v] = SynthVec{}, o[f][i][v] = SynthVec{};
  for (int64_t k = 0; k < np; ++k, pc += pstride, rec += 2) {
    for (int f = 0; f < FB; ++f)
      for (int i = 0; i < 2; ++i) {
        const double ce = pc[4 * f + i], co = pc[4 * f + 2 + i];
        for (int v = 0; v < V; ++v) e[f][i][v] += yc[v] * ce, o[f][i][v] += yc[v] * co;
      }
    const double ra = rec[0], rb = rec[1];  // 0 past the last pair: the step is then unused
    for (int v = 0; v < V; ++v) {
      const SynthVec next = (ra * t[v] + rb) * yc[v] + yp[v];
      yp[v] = yc[v];
      yc[v] = next;
    }
  }
  for (int f = 0; f < FB; ++f)
    for (int i = 0; i < 2; ++i)
      for (int v = 0; v < V; ++v) se[f][i][v] = e[f][i][v], so[f][i][v] = o[f][i][v] * x[v];
}

// The sum of the lanes of a in the tree's order (((0 + 1) + (2 + 3)) + ((4 + 5) + (6 + 7)) for 8
// lanes): every sum of lane_sums has this association whichever path computes it. (A field's f64
// analysis still depends on its tile to the last bit: the second field of a pair does not get the
// values it gets alone, tests/ops/test_sht.cpp. The tiles depend only on the field's index in the
// batch, and the threads' split keeps them: for_chunks.)
inline double pairwise_sum(const Lanes& a) {
  double t[kLanes];
  for (int k = 0; k < kLanes; ++k) t[k] = a[k];
  for (int w = 1; w < kLanes; w *= 2)
    for (int k = 0; k + w < kLanes; k += 2 * w) t[k] += t[k + w];
  return t[0];
}

// s[k] = the sum of the lanes of a[k]. Eight vectors at a time by a transposing tree: 14 shuffles
// and 7 additions give eight sums, where reducing each vector alone takes 6 operations (these
// reductions were a tenth of the analysis at 10 blocks a chunk, more with fewer).
template <int N>
inline void lane_sums(const Lanes (&a)[N], double (&s)[N]) {
  int n = 0;
#if defined(__clang__) || (defined(__GNUC__) && __GNUC__ >= 12)
  if constexpr (kLanes == 8) {
#pragma GCC unroll 8
    for (; n + 8 <= N; n += 8) {
      Lanes t[4], u[2];
      for (int k = 0; k < 4; ++k)  // t[k] holds pair sums of a[2k] (even lanes) and a[2k+1] (odd)
        t[k] = __builtin_shufflevector(a[n + 2 * k], a[n + 2 * k + 1], 0, 8, 2, 10, 4, 12, 6, 14) +
               __builtin_shufflevector(a[n + 2 * k], a[n + 2 * k + 1], 1, 9, 3, 11, 5, 13, 7, 15);
      for (int k = 0; k < 2; ++k)  // u[k]: the sums over lanes 0-3 of a[4k .. 4k+3], then over 4-7
        u[k] = __builtin_shufflevector(t[2 * k], t[2 * k + 1], 0, 1, 8, 9, 4, 5, 12, 13) +
               __builtin_shufflevector(t[2 * k], t[2 * k + 1], 2, 3, 10, 11, 6, 7, 14, 15);
      const Lanes r = __builtin_shufflevector(u[0], u[1], 0, 1, 2, 3, 8, 9, 10, 11) +
                      __builtin_shufflevector(u[0], u[1], 4, 5, 6, 7, 12, 13, 14, 15);
      store_lanes(s + n, r);
    }
  }
#endif
#pragma GCC unroll 8
  for (; n < N; ++n) s[n] = pairwise_sum(a[n]);
}

// The analysis marches K pairs of degrees (the pair form, RecurrencePlan::pair_rec) at a time
// across all of an order's row blocks (the outer loop is over pair chunks, the block loop inside):
// the K x FB x 4 accumulators then stay in registers for the whole column of rows and are reduced
// once per chunk. (Marching each block through all degrees, as the synthesis does, needs a sum per
// degree, field and lane in memory, a (lmax - m) x B x 2 x 8 array loaded and stored at every block
// and degree, which falls out of L1 at large lmax or B: 1.5-2.4x the synthesis time.) Each block's
// Y_{k-1}, Y_k wait in `state` between chunks (512 bytes a block). kAnalysisAcc bounds the
// accumulators so that they, the state and x^2 fit the 32 vector registers; the row values are
// read from L1 as operands of the multiply-adds.
constexpr int kAnalysisAcc = 16;
template <int FB>
constexpr int analysis_pairs() { return std::max(1, kAnalysisAcc / (4 * FB)); }

constexpr int kVecs = kRows / kLanes;  // vectors per row block

// Where the analysis's pair sums go: G_k = sum_j Y_k E_j and H_k = sum_j Y_k x_j O_j give degree
// m + 2k as ana[3k] G_k + ana[3k+1] G_{k-1} and degree m + 2k + 1 as ana[3k+2] H_k
// (RecurrencePlan::pair_ana), written at out[(l - m) ostride + 2f + re/im] for the tile's field f;
// n = lmax - m degrees. g_prev holds the tile's G_{k-1} between chunks. (Written here, from the
// sums in registers: stored as sums and combined in a later pass, the pass's vector loads of
// values just stored one by one waited on the stores, a tenth of the analysis at 180x360.)
template <int FB>
struct PairOut {
  const double* ana;
  double* out;
  int64_t ostride, n;
  double g_prev[2 * FB];
};

// The block loop of analysis_pair_chunk: each block marches its four vectors of rows through the K
// pairs, the row values read as operands of the multiply-adds.
template <int FB, int K>
inline void analysis_blocks(const double* rec, int64_t nblk, const double* t, double* state, const double* eo,
                            int64_t qs, int64_t fs, Lanes (&acc)[K * FB * 4]) {
  for (int64_t blk = 0; blk < nblk; ++blk) {
    double* st = state + blk * 2 * kRows;
    const double* w = eo + blk * kRows;
    Lanes yp[kVecs], yc[kVecs], tb[kVecs];
    for (int v = 0; v < kVecs; ++v) {
      yp[v] = load_lanes(st + v * kLanes);
      yc[v] = load_lanes(st + kRows + v * kLanes);
      tb[v] = load_lanes(t + blk * kRows + v * kLanes);
    }
#pragma GCC unroll 16
    for (int kk = 0; kk < K; ++kk) {
      for (int f = 0; f < FB; ++f)
        for (int q = 0; q < 4; ++q) {
          const double* wq = w + f * fs + q * qs;
          // A chain of multiply-adds into one accumulator, not products then sums.
          for (int v = 0; v < kVecs; ++v) acc[(kk * FB + f) * 4 + q] += yc[v] * load_lanes(wq + v * kLanes);
        }
      const double ra = rec[2 * kk], rb = rec[2 * kk + 1];
      for (int v = 0; v < kVecs; ++v) {
        const Lanes next = (ra * tb[v] + rb) * yc[v] + yp[v];
        yp[v] = yc[v];
        yc[v] = next;
      }
    }
    for (int v = 0; v < kVecs; ++v) {
      store_lanes(st + v * kLanes, yp[v]);
      store_lanes(st + kRows + v * kLanes, yc[v]);
    }
  }
}

// The same for one field: two vectors of rows at a time, first their K pairs' values Y (the
// recurrence), then each row value loaded once and multiplied into the K pairs' sums. Each
// accumulator still adds a block's vectors in order, so the sums are the same, bit for bit; one
// field at legendre-gauss 720x1440 analysed 3% faster (Xeon, ops/BENCHMARKS.md).
template <int K>
inline void analysis_blocks_one_field(const double* rec, int64_t nblk, const double* t, double* state,
                                      const double* eo, int64_t qs, Lanes (&acc)[K * 4]) {
  constexpr int SV = 2;
  for (int64_t blk = 0; blk < nblk; ++blk) {
    double* st = state + blk * 2 * kRows;
    const double* w = eo + blk * kRows;
#pragma GCC unroll 4
    for (int v0 = 0; v0 < kVecs; v0 += SV) {
      Lanes y[K + 1][SV], yp[SV], tb[SV];
      for (int u = 0; u < SV; ++u) {
        yp[u] = load_lanes(st + (v0 + u) * kLanes);
        y[0][u] = load_lanes(st + kRows + (v0 + u) * kLanes);
        tb[u] = load_lanes(t + blk * kRows + (v0 + u) * kLanes);
      }
#pragma GCC unroll 16
      for (int kk = 0; kk < K; ++kk)
        for (int u = 0; u < SV; ++u)
          y[kk + 1][u] = (rec[2 * kk] * tb[u] + rec[2 * kk + 1]) * y[kk][u] + (kk == 0 ? yp[u] : y[kk - 1][u]);
      for (int q = 0; q < 4; ++q)
        for (int u = 0; u < SV; ++u) {
          const Lanes wv = load_lanes(w + q * qs + (v0 + u) * kLanes);
#pragma GCC unroll 16
          for (int kk = 0; kk < K; ++kk) acc[kk * 4 + q] += y[kk][u] * wv;
        }
      for (int u = 0; u < SV; ++u) {
        store_lanes(st + (v0 + u) * kLanes, y[K - 1][u]);
        store_lanes(st + kRows + (v0 + u) * kLanes, y[K][u]);
      }
    }
  }
}

// Pairs k .. k+K-1 of FB fields over nblk row blocks, into `po`. rec: the pairs' recurrence from
// pair k. state holds per block (Y_{k-1}, Y_k) and is advanced by K pairs. t: nblk x kRows values
// of x^2; rows of field f, quantity q = 2 parity + re/im at eo + f fs + q qs, kRows per block.
template <int FB, int K>
void analysis_pair_chunk(const double* rec, int64_t k, int64_t nblk, const double* t, double* state, const double* eo,
                         int64_t qs, int64_t fs, PairOut<FB>& po) {
  constexpr int kAcc = K * FB * 4;
  Lanes acc[kAcc];  // [kk][f][parity][re/im]
#pragma GCC unroll 32
  for (int a = 0; a < kAcc; ++a) acc[a] = Lanes{};  // unrolled: GCC makes a loop a memset on the stack
  if constexpr (FB == 1) analysis_blocks_one_field<K>(rec, nblk, t, state, eo, qs, acc);
  else analysis_blocks<FB, K>(rec, nblk, t, state, eo, qs, fs, acc);
  double sums[kAcc];
  lane_sums(acc, sums);
  for (int kk = 0; kk < K; ++kk) {
    const int64_t pair = k + kk;
    const double c0 = po.ana[3 * pair], c1 = po.ana[3 * pair + 1], c2 = po.ana[3 * pair + 2];
    double* even = po.out + 2 * pair * po.ostride;
    const bool odd = 2 * pair + 1 < po.n;
    for (int f = 0; f < FB; ++f)
      for (int i = 0; i < 2; ++i) {
        const double g = sums[(kk * FB + f) * 4 + i], h = sums[(kk * FB + f) * 4 + 2 + i];
        // One fused multiply-add, written out: as c0 g + c1 g_prev the compiler fused either
        // product or neither depending on where this was inlined, and the results' last bits with it.
        even[2 * f + i] = pair == 0 ? c0 * g : std::fma(c0, g, c1 * po.g_prev[2 * f + i]);
        if (odd) even[po.ostride + 2 * f + i] = c2 * h;
        po.g_prev[2 * f + i] = g;
      }
  }
}

// Pairs k .. np-1 in chunks of K, the rest in smaller chunks.
template <int FB, int K>
void analysis_pair_march(const double* rec, int64_t k, int64_t np, int64_t nblk, const double* t, double* state,
                         const double* eo, int64_t qs, int64_t fs, PairOut<FB>& po) {
  for (; k + K <= np; k += K) analysis_pair_chunk<FB, K>(rec + 2 * k, k, nblk, t, state, eo, qs, fs, po);
  if constexpr (K > 1) analysis_pair_march<FB, K / 2>(rec, k, np, nblk, t, state, eo, qs, fs, po);
}

// The analysis without AVX-512 (analyse_order): one block marches all degrees and adds into
// acc[(l - m)][f][re/im][lane] the sum over the block's rows of
// Pbar_l^m times E (l - m even) or O (odd). The block's rows of field f lie at eo + (4f + q) qs for
// q = E re, E im, O re, O im (kRows contiguous values each). acc rows hold `stride` reals.
template <int FB>
void analysis_block(const double* alpha, int64_t m, int64_t lmax, const double* x, const double* seed,
                    const double* eo, int64_t qs, double* acc, int64_t stride) {
  static_assert(kRows == 4 * kLanes);
  auto add = [&](const double* p, int odd, double* a) {
    for (int f = 0; f < FB; ++f)
      for (int i = 0; i < 2; ++i) {
        double* t = a + (2 * f + i) * kLanes;
        const double* w = eo + (4 * f + 2 * odd + i) * qs;
        // A chain of four multiply-adds per lane (one vector op each), not products then sums.
#pragma omp simd
        for (int k = 0; k < kLanes; ++k)
          t[k] = t[k] + p[k] * w[k] + p[k + kLanes] * w[k + kLanes] + p[k + 2 * kLanes] * w[k + 2 * kLanes] +
                 p[k + 3 * kLanes] * w[k + 3 * kLanes];
      }
  };
  double p0[kRows], p1[kRows];
  for (int r = 0; r < kRows; ++r) p0[r] = 0, p1[r] = seed[r];
  add(p1, 0, acc);
  int64_t l = m + 1;
  double* al = acc + stride;
  for (; l + 1 < lmax; l += 2, alpha += 2, al += 2 * stride) {
    const double a0 = alpha[0], a1 = alpha[1];
#pragma omp simd
    for (int r = 0; r < kRows; ++r) p0[r] = a0 * x[r] * p1[r] - p0[r];
    add(p0, 1, al);
#pragma omp simd
    for (int r = 0; r < kRows; ++r) p1[r] = a1 * x[r] * p0[r] - p1[r];
    add(p1, 0, al + stride);
  }
  if (l < lmax) {
#pragma omp simd
    for (int r = 0; r < kRows; ++r) p0[r] = alpha[0] * x[r] * p1[r] - p0[r];
    add(p0, 1, al);
  }
}

// Field tiles: 2 fields (or the last 1) share one march of the recurrence. Wider tiles spill the
// synthesis sums out of registers and were no faster (measured at 360 degrees, 4 and 8 fields).
constexpr int64_t kFieldTile = 2;
template <typename Fn>
void for_field_tiles(int64_t batch, Fn&& fn) {
  int64_t b = 0;
  for (; b + kFieldTile <= batch; b += kFieldTile) fn.template operator()<kFieldTile>(b);
  for (; b < batch; ++b) fn.template operator()<1>(b);
}

// The block's x and seeds, zero-padded past the last row.
void load_block(const RecurrencePlan& p, int64_t m, int64_t r0, int64_t nr, double (&x)[kRows], double (&seed)[kRows]) {
  const double* s = p.seed.data() + static_cast<size_t>(m * p.n_even);
  for (int r = 0; r < kRows; ++r) {
    x[r] = r < nr ? p.x[static_cast<size_t>(r0 + r)] : 0.0;
    seed[r] = r < nr ? s[r0 + r] : 0.0;
  }
}

// Prefetches the chunk's orders [c0, c1) of a row of a (.., mmax) array (a cache line or two), issued
// kAhead rows before the row is read or written: rows are mmax values apart, a stride the hardware
// prefetchers do not follow, so without a hint each row waits for memory (measured at 720 degrees,
// batch 1: the analysis's gather and scatter were a third of its time; 1.2x faster with the hint).
constexpr int64_t kAhead = 8;
template <typename T>
inline void prefetch_orders(const std::complex<T>* row_a, const std::complex<T>* row_b, int64_t c0, int64_t c1, int write) {
  for (int64_t m = c0; m < c1; m += 64 / static_cast<int64_t>(sizeof(std::complex<T>))) {
    if (write) {
      __builtin_prefetch(row_a + m, 1);
    } else {
      __builtin_prefetch(row_a + m, 0);
      __builtin_prefetch(row_b + m, 0);
    }
  }
}

// A 64-byte aligned run of n doubles inside v.
double* aligned_doubles(std::vector<double>& v, size_t n) {
  constexpr size_t kAlign = 64 / sizeof(double);
  v.resize(n + kAlign);
  const auto misalign = reinterpret_cast<uintptr_t>(v.data()) % 64 / sizeof(double);
  return v.data() + (kAlign - misalign) % kAlign;
}

// Where a chunk's row values lie in ChunkScratch::rows: quantity q of field b of the chunk's k-th
// order at k row_block + (4 b + q) n_pad. n_pad (at least the rows plus a block of padding) is an
// odd number of 64-byte lines and row_block one line more than its 4 B n_pad values, so that the
// 4 B K rows the gather and the scatter walk in step start in different L1 sets. (With whole
// kilobytes, as n_pad = 128 at legendre-gauss 180x360, those rows sat 4 KB apart, 32 of them in one
// 8-way set, and the gather missed L1 on every write: a fifth of the analysis.)
struct RowLayout {
  int64_t n_pad, row_block;
};
RowLayout row_layout(int64_t n_even, int64_t B) {
  int64_t lines = (n_even + kRows + kLanes - 1) / kLanes;
  if (lines % 2 == 0) ++lines;
  const int64_t n_pad = lines * kLanes;
  return {n_pad, B * 4 * n_pad + kLanes};
}

// Orders are processed in chunks of kChunk consecutive m: the grid and spectral arrays hold m
// fastest, so a chunk reads or writes kChunk adjacent values of each row (2-4 cache lines)
// instead of one value per row and order, which with several fields cost more than the kernels
// (measured at 360 degrees, 4 fields: 30% of the time in the strided gathers). 16 orders were
// 4-8% faster than 8 at 360 degrees (B = 4) and 1-3% at 720 (B = 1).
constexpr int64_t kChunk = 16;

// Per-thread scratch of a chunk.
struct ChunkScratch {
  // [k][b][q][j], j < n_even + kRows (zero-padded for the last block): q = E re, E im, O re, O im
  // (analysis: from the order's first kept row on, see analysis_rows) or S_e, S_o (synthesis), so
  // that blocks load and store whole vectors.
  std::vector<double> rows;
  std::vector<double> coef;    // synthesis: the chunk's spectral values [l - c0][k][b][2]
  std::vector<double> pair_coef;  // synthesis: one order's pair coefficients [k][b][4]
  std::vector<double> out;     // analysis: [l - c0][k][b][2] results before the scatter
  std::vector<double> x, alpha, state;  // analysis: one order's x by block, x^2 (AVX-512) or alpha, march state
  std::vector<double> acc;  // analysis without AVX-512: one order's lane sums
};

// The calling thread's scratch, kept between calls (about 16 x 4 x (nlat + lmax) doubles a field,
// a few MB at 720x1440 with several fields): made anew per call, its pages were faulted in again
// every time (2% of a 720x1440 SHT).
ChunkScratch& thread_scratch() {
  thread_local ChunkScratch ws;
  return ws;
}

// The grid side of a contraction: X (B, nlat, mmax) complex, or the longitude FFT's grouped spectra
// (rfft_lon_groups, fft.h): rows in groups of L (64 bytes of T), each group's orders as
// [m][re/im][lane], G groups a field. With groups, the FFT and these kernels meet without the two
// transposes in between (the FFT's lanes to X's rows, X's rows to the kernels' order-major rows):
// a chunk's orders of one group are one contiguous run.
template <typename T>
struct GridRef {
  static constexpr int64_t L = 64 / static_cast<int64_t>(sizeof(T));
  std::complex<T>* X = nullptr;
  T* groups = nullptr;
  // The fields from f0 on.
  GridRef from_field(const RecurrencePlan& p, int64_t f0) const {
    if (groups != nullptr) return {nullptr, groups + f0 * group_count(p) * 2 * p.key.mmax * L};
    return {X + f0 * p.key.nlat * p.key.mmax, nullptr};
  }
  static int64_t group_count(const RecurrencePlan& p) { return (p.key.nlat + L - 1) / L; }
  // The real part of field b's order m at row j (the imaginary part L further).
  T* at(const RecurrencePlan& p, int64_t b, int64_t j, int64_t m) const {
    return groups + ((b * group_count(p) + j / L) * 2 * p.key.mmax + 2 * m) * L + j % L;
  }
};

// Grouped rows as vectors: a group's L values of T as L / 8 vectors of doubles, and back.
template <typename T>
inline void to_doubles(const simd::Vec<T>& v, Lanes (&out)[GridRef<T>::L / kLanes]) {
  if constexpr (sizeof(T) == 8) {
    out[0] = v;
  } else {
    out[0] = __builtin_convertvector(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7), Lanes);
    out[1] = __builtin_convertvector(__builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15), Lanes);
  }
}
template <typename T>
inline simd::Vec<T> from_doubles(const Lanes (&in)[GridRef<T>::L / kLanes]) {
  if constexpr (sizeof(T) == 8) {
    return in[0];
  } else {
    typedef float Half __attribute__((vector_size(32)));
    const Half a = __builtin_convertvector(in[0], Half), b = __builtin_convertvector(in[1], Half);
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  }
}

// The mirror rows of a whole northern group (rows j0 .. j0 + L - 1): the southern rows
// nlat - 1 - j0 - i, i < L, run downwards across two southern groups, `hi` holding the first of
// them at lane r = (nlat - 1) mod L and `lo` the group before it (only `hi` when r = L - 1). The
// run as one vector has lane i = row nlat - 1 - j0 - i.
template <typename T>
struct Mirror {
  static constexpr int64_t L = GridRef<T>::L;
  using V = simd::Vec<T>;
  int64_t r;
  simd::Index<T> idx, inv, keep_hi, keep_lo;
  explicit Mirror(int64_t nlat) : r((nlat - 1) % L) {
    for (int64_t i = 0; i < L; ++i) {
      idx[i] = L + r - i;
      inv[i] = (r - i + L) % L;
      keep_hi[i] = i <= r ? i : L + i;  // two-source selects: lane i of the first or of the second
      keep_lo[i] = i > r ? i : L + i;
    }
  }
  // The run from the groups at lo and hi.
  V gather(const T* lo, const T* hi) const { return shuffle2(simd::load(lo), simd::load(hi), idx); }
  // The inverse: the run's lanes placed as the southern groups hold them (lane k of the group at
  // hi is lane r - k of the run for k <= r; lane k of the group at lo is lane L + r - k for k > r),
  // then blended into the old values of each.
  V scatter(const V& run) const { return shuffle2(run, run, inv); }
  V select_hi(const V& placed, const V& old) const { return shuffle2(placed, old, keep_hi); }
  V select_lo(const V& placed, const V& old) const { return shuffle2(placed, old, keep_lo); }

 private:
  static V shuffle2(const V& a, const V& b, const simd::Index<T>& k) {
#if defined(__GNUC__) && !defined(__clang__)
    return __builtin_shuffle(a, b, k);
#else
    V v;
    for (int64_t i = 0; i < L; ++i) v[i] = k[i] < L ? a[k[i]] : b[k[i] - L];
    return v;
#endif
  }
};

// Vectors of rows per synthesis call: with AVX-512 the sums of FB fields (4 FB V vectors), Y_k,
// Y_{k-1}, x^2 and x fit the 32 registers. With AVX2 (16 registers) two fields spill a few sums
// but still beat one field, whose two-FMA recurrence chain per pair is then too short to hide its
// latency (legendre-gauss 360, 4 fields, both directions: 0.44 s against 0.52 s for the plain form
// before; one field per tile took 0.60 s).
template <int FB>
constexpr int synth_vecs() {
#ifdef __AVX512F__
  return FB == 1 ? 4 : 2;
#else
  return 2;
#endif
}

// The spectral values of one order m turned into the pair form's coefficients (pair_syn):
// out[k][b] = (even re, even im, odd re, odd im). raw: (lmax - m) rows of `stride` reals, field b at 2b.
void pair_coefficients(const RecurrencePlan& p, int64_t m, const double* raw, int64_t stride, int64_t B, double* out) {
  const int64_t n = p.key.lmax - m, np = p.pairs(m);
  const double* syn = p.pair_syn_of(m);
  // Every pair but the last has both its odd degree and the next even one (np = ceil(n / 2)): one
  // loop without tests for them (with a test per value this was 5% of a 720x1440 isht).
  for (int64_t k = 0; k + 1 < np; ++k) {
    const double* even = raw + 2 * k * stride;
    const double *odd = even + stride, *next = even + 2 * stride;
    const double s0 = syn[3 * k], s1 = syn[3 * k + 1], s2 = syn[3 * k + 2];
    double* o = out + k * B * 4;
    for (int64_t c = 0; c < 2 * B; ++c) {  // field c / 2, re or im
      o[4 * (c / 2) + c % 2] = s0 * even[c] + s1 * next[c];
      o[4 * (c / 2) + 2 + c % 2] = s2 * odd[c];
    }
  }
  if (np > 0) {  // the last pair: no next even degree, an odd one only when n is even
    const int64_t k = np - 1;
    const double* even = raw + 2 * k * stride;
    const bool has_odd = 2 * k + 1 < n;
    double* o = out + k * B * 4;
    for (int64_t c = 0; c < 2 * B; ++c) {
      o[4 * (c / 2) + c % 2] = syn[3 * k] * even[c];
      o[4 * (c / 2) + 2 + c % 2] = has_odd ? syn[3 * k + 2] * even[stride + c] : 0.0;
    }
  }
}

// The rows of order m that the grouped gather and scatter take as whole northern groups:
// [whole_lo, whole_hi) in groups, those from the order's first kept row on; the groups below
// zero_hi hold only rows before it (zero in the synthesis, skipped by the analysis). Rows outside
// the whole groups (the group holding the first kept row, the last partial group, the equator)
// go one at a time.
struct GroupSpan {
  int64_t zero_hi, whole_lo, whole_hi;
};
template <typename T>
GroupSpan group_span(const RecurrencePlan& p, int64_t m) {
  constexpr int64_t L = GridRef<T>::L;
  const int64_t n_north = std::min(p.n_odd, p.n_even);
  const int64_t js = std::min(p.first_row[static_cast<size_t>(m)], n_north);
  return {js / L, std::min((js + L - 1) / L, n_north / L), n_north / L};
}

// The synthesis's scatter into groups: fields [0, B) and orders [c0, c1) of the chunk's row sums
// (S_e, S_o of field b, order m at rows(m, b)[q n_pad + j]) to rows j and nlat - 1 - j; zero before
// each order's first kept row and in the last group's padding rows. The same arithmetic as the
// scatter into X, so the same values. Whole northern groups as vectors, group by group with the
// chunk's orders inside (one contiguous run of the buffer per group); their mirror rows blended
// into the two southern groups they straddle.
template <typename T, typename RowsOf>
__attribute__((noinline)) void scatter_groups(const RecurrencePlan& p, RowsOf&& rows, const GridRef<T>& grid,
                                              int64_t B, int64_t c0, int64_t c1, int64_t n_pad) {
  constexpr int64_t L = GridRef<T>::L;
  using V = simd::Vec<T>;
  const Mirror<T> mirror(p.key.nlat);
  const int64_t nlat = p.key.nlat, n_even = p.n_even, n_north = std::min(p.n_odd, n_even);
  const double* w = p.weight.data();
  const int64_t group = 2 * p.key.mmax * L;  // T values from one group to the next
  for (int64_t b = 0; b < B; ++b) {
    // Rows one at a time: outside the whole groups, and every row of the group holding js.
    for (int64_t m = c0; m < c1; ++m) {
      const double* o = rows(m, b);
      const double *e_re = o, *e_im = o + n_pad, *o_re = o + 2 * n_pad, *o_im = o + 3 * n_pad;
      const int64_t js = std::min(p.first_row[static_cast<size_t>(m)], n_even);
      auto put = [&](int64_t j, double re, double im) {
        T* a = grid.at(p, b, j, m);
        a[0] = static_cast<T>(re), a[L] = static_cast<T>(im);
      };
      auto row = [&](int64_t j) {
        if (j < js) {
          put(j, 0, 0), put(nlat - 1 - j, 0, 0);
        } else {
          put(j, w[j] * (e_re[j] + o_re[j]), w[j] * (e_im[j] + o_im[j]));
          put(nlat - 1 - j, w[j] * (e_re[j] - o_re[j]), w[j] * (e_im[j] - o_im[j]));
        }
      };
      const GroupSpan span = group_span<T>(p, m);
      for (int64_t j = span.zero_hi * L; j < span.whole_lo * L; ++j) row(j);
      for (int64_t j = span.whole_hi * L; j < n_north; ++j) row(j);
      if (n_north < n_even) {  // the equator (odd nlat): S_e alone
        const int64_t je = n_north;
        if (je < js) put(je, 0, 0);
        else put(je, w[je] * (e_re[je] + 0.0), w[je] * (e_im[je] + 0.0));
      }
      for (int64_t jp = nlat; jp < GridRef<T>::group_count(p) * L; ++jp) put(jp, 0, 0);
    }
    // Whole groups.
    for (int64_t g = 0; g < n_north / L; ++g) {
      const int64_t j = g * L;
      T* north = grid.at(p, b, j, c0);
      T* hi = grid.at(p, b, nlat - 1 - j - mirror.r, c0);
      T* lo = hi - group;
      for (int64_t m = c0; m < c1; ++m, north += 2 * L, hi += 2 * L, lo += 2 * L) {
        const GroupSpan span = group_span<T>(p, m);
        V n_re{}, n_im{}, s_re{}, s_im{};
        if (g >= span.whole_lo) {
          const double* o = rows(m, b);
          Lanes nr[L / kLanes], ni[L / kLanes], sr[L / kLanes], si[L / kLanes];
          for (int64_t h = 0; h < L / kLanes; ++h) {
            const int64_t jh = j + h * kLanes;
            const Lanes wv = load_lanes(w + jh), er = load_lanes(o + jh), ei = load_lanes(o + n_pad + jh);
            const Lanes orr = load_lanes(o + 2 * n_pad + jh), oi = load_lanes(o + 3 * n_pad + jh);
            nr[h] = wv * (er + orr), ni[h] = wv * (ei + oi), sr[h] = wv * (er - orr), si[h] = wv * (ei - oi);
          }
          n_re = from_doubles<T>(nr), n_im = from_doubles<T>(ni), s_re = from_doubles<T>(sr), s_im = from_doubles<T>(si);
        } else if (g >= span.zero_hi) {
          continue;  // the group holding js: its rows went one at a time
        }
        simd::store(north, n_re), simd::store(north + L, n_im);
        const V pr = mirror.scatter(s_re), pi = mirror.scatter(s_im);
        simd::store(hi, mirror.select_hi(pr, simd::load(hi)));
        simd::store(hi + L, mirror.select_hi(pi, simd::load(hi + L)));
        if (mirror.r != L - 1) {
          simd::store(lo, mirror.select_lo(pr, simd::load(lo)));
          simd::store(lo + L, mirror.select_lo(pi, simd::load(lo + L)));
        }
      }
    }
  }
}

template <typename T>
void to_latitude_chunk(const RecurrencePlan& p, const std::complex<T>* A, const GridRef<T>& grid, int64_t B,
                       int64_t c0, int64_t c1, ChunkScratch& ws) {
  const int64_t lmax = p.key.lmax, mmax = p.key.mmax, nlat = p.key.nlat, n_even = p.n_even;
  const auto [n_pad, row_block] = row_layout(n_even, B);
  const int64_t K = c1 - c0;
  // The chunk's spectral values by degree, then order: [l - c0][m - c0][b][re/im], so that the gather
  // writes each row of A's orders in one run; order m's degree l - m is then `stride` apart from
  // its next, starting at coef_of(m).
  const int64_t stride = K * 2 * B;
  ws.coef.resize(static_cast<size_t>((lmax - c0) * stride));
  auto coef_of = [&](int64_t m) { return ws.coef.data() + (m - c0) * (stride + 2 * B); };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = c0; l < lmax; ++l) {
      const std::complex<T>* a = A + (b * lmax + l) * mmax;
      if (l + kAhead < lmax) prefetch_orders(a + kAhead * mmax, a + kAhead * mmax, c0, c1, 0);
      double* c = ws.coef.data() + (l - c0) * stride + 2 * b;
      for (int64_t m = c0; m < std::min(c1, l + 1); ++m) {
        c[2 * B * (m - c0)] = static_cast<double>(a[m].real());
        c[2 * B * (m - c0) + 1] = static_cast<double>(a[m].imag());
      }
    }
  // Rows j < first_row[m] are never read.
  double* const all_rows = aligned_doubles(ws.rows, static_cast<size_t>(K * row_block));
  for (int64_t m = c0; m < c1; ++m) {
    const int64_t js = p.first_row[static_cast<size_t>(m)], np = p.pairs(m);
    const double* raw = coef_of(m);
    ws.pair_coef.resize(static_cast<size_t>(np * B * 4));
    pair_coefficients(p, m, raw, stride, B, ws.pair_coef.data());
    const double* rec = p.pair_rec_of(m);
    const double seed_scale = p.pair_seed_scale[static_cast<size_t>(m)];
    double* rows = all_rows + (m - c0) * row_block;
    auto tile = [&]<int FB>(int64_t b0) {
      constexpr int V = synth_vecs<FB>(), kRowsPerCall = V * kSynthLanes;
      for (int64_t r0 = js; r0 < n_even; r0 += kRows) {
        const int64_t nr = std::min<int64_t>(kRows, n_even - r0);
        double xs[kRows], seed[kRows];
        load_block(p, m, r0, nr, xs, seed);
        for (int part = 0; part < kRows / kRowsPerCall; ++part) {
          SynthVec x[V], t[V], y0[V];
          for (int v = 0; v < V; ++v) {
            x[v] = load_synth(xs + part * kRowsPerCall + v * kSynthLanes);
            t[v] = x[v] * x[v];
            y0[v] = load_synth(seed + part * kRowsPerCall + v * kSynthLanes) * seed_scale;
          }
          SynthVec se[FB][2][V], so[FB][2][V];
          synth_pairs<FB, V>(rec, np, t, x, y0, ws.pair_coef.data() + 4 * b0, 4 * B, se, so);
          // Whole vectors: a block's rows end before n_pad, and padded rows hold 0.
          for (int f = 0; f < FB; ++f) {
            double* o = rows + (b0 + f) * 4 * n_pad + r0 + part * kRowsPerCall;
            for (int v = 0; v < V; ++v) {
              store_synth(o + v * kSynthLanes, se[f][0][v]);
              store_synth(o + n_pad + v * kSynthLanes, se[f][1][v]);
              store_synth(o + 2 * n_pad + v * kSynthLanes, so[f][0][v]);
              store_synth(o + 3 * n_pad + v * kSynthLanes, so[f][1][v]);
            }
          }
        }
      }
    };
    for_field_tiles(B, tile);
    // Rows that start scaled: their block lanes held 0; one row at a time from where they resume,
    // in the Q form (RecurrencePlan::alpha, out_factor).
    const double* alpha = p.alpha_of(m);
    const double* of = p.out_factor_of(m);
    for (const RecurrencePlan::ScaledStart& st : p.scaled[static_cast<size_t>(m)]) {
      const double x = p.x[static_cast<size_t>(st.j)];
      for (int64_t b = 0; b < B; ++b) {
        double* o = rows + b * 4 * n_pad + st.j;  // q = 2 parity + re/im, n_pad apart
        double pp = st.p_prev, pc = st.p_cur;
        for (int64_t l = st.l;; ++l) {
          const int64_t par = (l - m) % 2;
          const double* c = raw + (l - m) * stride + 2 * b;
          o[2 * par * n_pad] += pc * of[l - m] * c[0];
          o[(2 * par + 1) * n_pad] += pc * of[l - m] * c[1];
          if (l + 1 >= lmax) break;
          const double next = alpha[l - m] * x * pc - pp;  // degree l + 1
          pp = pc;
          pc = next;
        }
      }
    }
  }
  // Row j gets w_j (S_e + S_o), its mirror w_j (S_e - S_o), the equator (odd nlat) w_j S_e.
  if (grid.groups != nullptr) {
    scatter_groups<T>(p, [&](int64_t m, int64_t b) { return all_rows + (m - c0) * row_block + b * 4 * n_pad; }, grid,
                      B, c0, c1, n_pad);
    return;
  }
  std::complex<T>* const X = grid.X;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < n_even; ++j) {
      const double w = p.weight[static_cast<size_t>(j)];
      std::complex<T>* xn = X + (b * nlat + j) * mmax;
      std::complex<T>* xs = X + (b * nlat + nlat - 1 - j) * mmax;
      const bool equator = j == p.n_odd;
      if (j + kAhead < n_even) {
        prefetch_orders(xn + kAhead * mmax, xn, c0, c1, 1);
        prefetch_orders(xs - kAhead * mmax, xs, c0, c1, 1);
      }
      for (int64_t m = c0; m < c1; ++m) {
        if (j < p.first_row[static_cast<size_t>(m)]) {
          xn[m] = xs[m] = std::complex<T>(0, 0);
          continue;
        }
        const double* o = all_rows + (m - c0) * row_block + b * 4 * n_pad + j;
        const double e_re = o[0], e_im = o[n_pad];
        const double o_re = equator ? 0.0 : o[2 * n_pad], o_im = equator ? 0.0 : o[3 * n_pad];
        xn[m] = std::complex<T>(static_cast<T>(w * (e_re + o_re)), static_cast<T>(w * (e_im + o_im)));
        if (!equator) xs[m] = std::complex<T>(static_cast<T>(w * (e_re - o_re)), static_cast<T>(w * (e_im - o_im)));
      }
    }
}

// The analysis kernel needs 32 vector registers: compiled for AVX2 its accumulators spill (measured
// 3x slower than the per-block kernel there). Without AVX-512 each block marches all degrees
// instead and adds into per-degree lane sums in memory (analysis_block, the previous kernel).
#ifdef __AVX512F__
constexpr bool kRegisterAnalysis = true;
#else
constexpr bool kRegisterAnalysis = false;
#endif

// The analysis's row values of a chunk of orders, [k][b][q][j - js] with q = E re, E im, O re, O im:
// E = w_j (X[j] + X[j']), O = w_j (X[j] - X[j']), the equator (odd nlat) E = w_j X[j], O = 0; with
// AVX-512 (the pair form's kernel) O is stored times x_j.
// Order m's rows start at its first kept row js and are zero-padded to whole blocks; n_pad and the
// buffer are multiples of 64 bytes, so that every block loads whole cache lines (a vector load
// across two lines costs about twice as much: this alignment made the analysis ~1.5x faster).
// From groups (GridRef): the chunk's row values, out(m, b) + q n_pad + (j - js) for field b, order m.
// The same arithmetic as from X, so the same values. Whole northern groups as vectors, group by
// group with the chunk's orders inside (one contiguous run of the buffer per group).
template <typename T, typename OutOf>
void analysis_rows_from_groups(const RecurrencePlan& p, const GridRef<T>& grid, OutOf&& out, int64_t B, int64_t c0,
                               int64_t c1, int64_t n_pad) {
  constexpr int64_t L = GridRef<T>::L;
  const Mirror<T> mirror(p.key.nlat);
  const int64_t nlat = p.key.nlat, n_even = p.n_even, n_north = std::min(p.n_odd, n_even);
  const double *w = p.weight.data(), *x = p.x.data();
  const int64_t group = 2 * p.key.mmax * L;  // T values from one group to the next
  for (int64_t b = 0; b < B; ++b) {
    // Rows one at a time: outside the whole groups, and every kept row of the group holding js.
    for (int64_t m = c0; m < c1; ++m) {
      const int64_t js = p.first_row[static_cast<size_t>(m)];
      double* o = out(m, b) - js;  // o[j]: row j
      auto row = [&](int64_t j) {
        const T* north = grid.at(p, b, j, m);
        const T* south = grid.at(p, b, nlat - 1 - j, m);
        const double nr = north[0], ni = north[L], sr = south[0], si = south[L];
        const double wo = kRegisterAnalysis ? w[j] * x[j] : w[j];  // the pair form reads x O
        o[j] = w[j] * (nr + sr), o[n_pad + j] = w[j] * (ni + si);
        o[2 * n_pad + j] = wo * (nr - sr), o[3 * n_pad + j] = wo * (ni - si);
      };
      const GroupSpan span = group_span<T>(p, m);
      for (int64_t j = js; j < span.whole_lo * L; ++j) row(j);
      for (int64_t j = std::max(js, span.whole_hi * L); j < n_north; ++j) row(j);
      if (n_north < n_even && js <= n_north) {  // the equator (odd nlat): E = w X, O = 0
        const int64_t je = n_north;
        const T* eq = grid.at(p, b, je, m);
        o[je] = w[je] * (eq[0] + 0.0), o[n_pad + je] = w[je] * (eq[L] + 0.0);
        o[2 * n_pad + je] = o[3 * n_pad + je] = 0.0;
      }
    }
    // Whole groups.
    for (int64_t g = 0; g < n_north / L; ++g) {
      const int64_t j = g * L;
      const T* north = grid.at(p, b, j, c0);
      const T* hi = grid.at(p, b, nlat - 1 - j - mirror.r, c0);
      const T* lo = mirror.r == L - 1 ? hi : hi - group;
      for (int64_t m = c0; m < c1; ++m, north += 2 * L, hi += 2 * L, lo += 2 * L) {
        if (g < group_span<T>(p, m).whole_lo) continue;
        double* o = out(m, b) - p.first_row[static_cast<size_t>(m)];
        Lanes nr[L / kLanes], ni[L / kLanes], sr[L / kLanes], si[L / kLanes];
        to_doubles<T>(simd::load(north), nr);
        to_doubles<T>(simd::load(north + L), ni);
        to_doubles<T>(mirror.gather(lo, hi), sr);
        to_doubles<T>(mirror.gather(lo + L, hi + L), si);
        for (int64_t h = 0; h < L / kLanes; ++h) {
          const int64_t jh = j + h * kLanes;
          const Lanes wv = load_lanes(w + jh);
          const Lanes wo = kRegisterAnalysis ? wv * load_lanes(x + jh) : wv;
          store_lanes(o + jh, wv * (nr[h] + sr[h]));
          store_lanes(o + n_pad + jh, wv * (ni[h] + si[h]));
          store_lanes(o + 2 * n_pad + jh, wo * (nr[h] - sr[h]));
          store_lanes(o + 3 * n_pad + jh, wo * (ni[h] - si[h]));
        }
      }
    }
  }
}

template <typename T>
double* analysis_rows(const RecurrencePlan& p, const GridRef<T>& grid, int64_t B, int64_t c0, int64_t c1,
                      RowLayout layout, ChunkScratch& ws) {
  const int64_t mmax = p.key.mmax, nlat = p.key.nlat, n_even = p.n_even;
  const auto [n_pad, row_block] = layout;
  double* const rows = aligned_doubles(ws.rows, static_cast<size_t>((c1 - c0) * row_block));
  if (grid.groups != nullptr) {
    auto out = [&](int64_t m, int64_t b) { return rows + (m - c0) * row_block + b * 4 * n_pad; };
    for (int64_t m = c0; m < c1; ++m)
      for (int64_t b = 0; b < B; ++b)
        for (int64_t q = 0; q < 4; ++q)  // the padding the last block reads
          std::fill_n(out(m, b) + q * n_pad + n_even - p.first_row[static_cast<size_t>(m)], kRows, 0.0);
    analysis_rows_from_groups(p, grid, out, B, c0, c1, n_pad);
    return rows;
  }
  const std::complex<T>* const X = grid.X;
  int64_t j0 = n_even;
  for (int64_t m = c0; m < c1; ++m) {
    const int64_t js = p.first_row[static_cast<size_t>(m)];
    j0 = std::min(j0, js);
    for (int64_t k = 0; k < B * 4; ++k)  // the padding the last block reads
      std::fill_n(rows + (m - c0) * row_block + k * n_pad + n_even - js, kRows, 0.0);
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = j0; j < n_even; ++j) {
      const double w = p.weight[static_cast<size_t>(j)];
      const double wo = kRegisterAnalysis ? w * p.x[static_cast<size_t>(j)] : w;  // the pair form reads x O
      const bool equator = j == p.n_odd;
      const std::complex<T>* xn = X + (b * nlat + j) * mmax;
      const std::complex<T>* xs = X + (b * nlat + nlat - 1 - j) * mmax;
      if (j + kAhead < n_even) prefetch_orders(xn + kAhead * mmax, xs - kAhead * mmax, c0, c1, 0);
      for (int64_t m = c0; m < c1; ++m) {
        const int64_t js = p.first_row[static_cast<size_t>(m)];
        if (j < js) continue;
        double* o = rows + (m - c0) * row_block + b * 4 * n_pad + (j - js);
        const double nr = xn[m].real(), ni = xn[m].imag();
        const double sr = equator ? 0.0 : xs[m].real(), si = equator ? 0.0 : xs[m].imag();
        o[0] = w * (nr + sr), o[n_pad] = w * (ni + si);
        o[2 * n_pad] = equator ? 0.0 : wo * (nr - sr), o[3 * n_pad] = equator ? 0.0 : wo * (ni - si);
      }
    }
  return rows;
}


// analyse_order without AVX-512; x: the order's x by block (zero-padded).
void analyse_order_by_block(const RecurrencePlan& p, int64_t m, const double* rows, int64_t B, int64_t n_pad,
                            const double* x, double* out, int64_t ostride, ChunkScratch& ws) {
  const int64_t lmax = p.key.lmax, n_even = p.n_even, js = p.first_row[static_cast<size_t>(m)];
  const int64_t stride = 2 * B * kLanes;
  const double* seed = p.seed.data() + m * n_even;
  ws.acc.assign(static_cast<size_t>((lmax - m) * stride), 0.0);
  for_field_tiles(B, [&]<int FB>(int64_t b0) {
    for (int64_t r0 = 0; r0 < n_even - js; r0 += kRows) {
      double seed_block[kRows];
      for (int r = 0; r < kRows; ++r) seed_block[r] = js + r0 + r < n_even ? seed[js + r0 + r] : 0.0;
      analysis_block<FB>(p.alpha_of(m), m, lmax, x + r0, seed_block, rows + b0 * 4 * n_pad + r0, n_pad,
                         ws.acc.data() + 2 * b0 * kLanes, stride);
    }
  });
  const double* of = p.out_factor_of(m);
  for (int64_t l = m; l < lmax; ++l)
    for (int64_t k = 0; k < 2 * B; ++k) {
      const double* a = ws.acc.data() + (l - m) * stride + k * kLanes;
      double sum = 0;
      for (int i = 0; i < kLanes; ++i) sum += a[i];
      out[(l - m) * ostride + k] = of[l - m] * sum;
    }
}

// analyse_order with AVX-512: the pair march over all blocks, per field tile, into the results of
// every degree (PairOut). rows: E and x O.
void analyse_order_in_registers(const RecurrencePlan& p, int64_t m, const double* rows, int64_t B, int64_t n_pad,
                                const double* x, double* out, int64_t ostride, ChunkScratch& ws) {
  const int64_t n = p.key.lmax - m, n_even = p.n_even, js = p.first_row[static_cast<size_t>(m)];
  const int64_t nblk = (n_even - js + kRows - 1) / kRows, np = p.pairs(m);
  double* const t = aligned_doubles(ws.alpha, static_cast<size_t>(nblk * kRows));
  for (int64_t r = 0; r < nblk * kRows; ++r) t[r] = x[r] * x[r];
  const double* seed = p.seed.data() + m * n_even;
  const double seed_scale = p.pair_seed_scale[static_cast<size_t>(m)];
  double* const state = aligned_doubles(ws.state, static_cast<size_t>(nblk * 2 * kRows));
  for_field_tiles(B, [&]<int FB>(int64_t b0) {
    // (Y_{-1}, Y_0) = (0, seed_scale Pbar_m^m) per block, zero past the last row. (Straight loops:
    // at one field this set-up ran once per order for about a tenth of the kernel's work, and
    // written with a branch per row it cost a fifth of it.)
    for (int64_t blk = 0; blk < nblk; ++blk) {
      const int64_t j0 = js + blk * kRows, nr = std::min<int64_t>(kRows, n_even - j0);
      double* const y_prev = state + blk * 2 * kRows;
      double* const y0 = y_prev + kRows;
      std::fill_n(y_prev, kRows, 0.0);
      for (int64_t r = 0; r < nr; ++r) y0[r] = seed_scale * seed[j0 + r];
      std::fill_n(y0 + nr, kRows - nr, 0.0);
    }
    PairOut<FB> po{p.pair_ana_of(m), out + 2 * b0, ostride, n, {}};
    analysis_pair_march<FB, analysis_pairs<FB>()>(p.pair_rec_of(m), 0, np, nblk, t, state, rows + b0 * 4 * n_pad, n_pad,
                                                  4 * n_pad, po);
  });
}

// Order m of the analysis: out[(l - m) ostride + 2b + re/im] = factor_l sum_j Pbar_l(x_j) (E or O of field b
// at row j). rows: the order's row values (analysis_rows).
void analyse_order(const RecurrencePlan& p, int64_t m, const double* rows, int64_t B, int64_t n_pad, double* out,
                   int64_t ostride, ChunkScratch& ws) {
  const int64_t lmax = p.key.lmax, n_even = p.n_even, js = p.first_row[static_cast<size_t>(m)];
  const int64_t nblk = (n_even - js + kRows - 1) / kRows;
  double* const x = aligned_doubles(ws.x, static_cast<size_t>(nblk * kRows));  // by block, zero-padded
  std::fill_n(std::copy(p.x.begin() + js, p.x.begin() + n_even, x), nblk * kRows - (n_even - js), 0.0);
  if constexpr (kRegisterAnalysis) analyse_order_in_registers(p, m, rows, B, n_pad, x, out, ostride, ws);
  else analyse_order_by_block(p, m, rows, B, n_pad, x, out, ostride, ws);
  // Rows that start scaled: their block lanes held 0; one row at a time from where they resume.
  const double* alpha = p.alpha_of(m);
  const double* of = p.out_factor_of(m);
  for (const RecurrencePlan::ScaledStart& st : p.scaled[static_cast<size_t>(m)]) {
    const double xj = p.x[static_cast<size_t>(st.j)];
    // The stored odd values are x O on the pair form's path; scaled starts lie near the poles, |x| ~ 1.
    const double odd_scale = kRegisterAnalysis ? 1.0 / xj : 1.0;
    for (int64_t b = 0; b < B; ++b) {
      const double* v = rows + b * 4 * n_pad + (st.j - js);
      double pp = st.p_prev, pc = st.p_cur;
      for (int64_t l = st.l;; ++l) {
        const int64_t par = (l - m) % 2;
        const double s = (par == 1 ? odd_scale : 1.0) * of[l - m];
        double* a = out + (l - m) * ostride + 2 * b;
        a[0] += pc * s * v[2 * par * n_pad];
        a[1] += pc * s * v[(2 * par + 1) * n_pad];
        if (l + 1 >= lmax) break;
        const double next = alpha[l - m] * xj * pc - pp;
        pp = pc;
        pc = next;
      }
    }
  }
}

template <typename T>
void to_degree_chunk(const RecurrencePlan& p, const GridRef<T>& grid, std::complex<T>* A, int64_t B, int64_t c0,
                     int64_t c1, ChunkScratch& ws) {
  const int64_t lmax = p.key.lmax, mmax = p.key.mmax;
  const RowLayout layout = row_layout(p.n_even, B);
  const double* rows = analysis_rows(p, grid, B, c0, c1, layout, ws);
  // Results by degree, then order: [l - c0][m - c0][b][re/im], so that the scatter reads each
  // degree's orders in one run (by order first, it read 16 lines 20-60 KB apart per row of A).
  const int64_t K = c1 - c0, ostride = K * 2 * B;
  ws.out.resize(static_cast<size_t>((lmax - c0) * ostride));
  for (int64_t m = c0; m < c1; ++m)
    analyse_order(p, m, rows + (m - c0) * layout.row_block, B, layout.n_pad,
                  ws.out.data() + (m - c0) * (ostride + 2 * B), ostride, ws);
  // Scatter into A[b, l, c0 .. c1), zero where l < m.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t l = 0; l < lmax; ++l) {
      std::complex<T>* a = A + (b * lmax + l) * mmax;
      if (l + kAhead < lmax) prefetch_orders(a + kAhead * mmax, a + kAhead * mmax, c0, c1, 1);
      for (int64_t m = c0; m < c1; ++m) {
        if (l < m) {
          a[m] = std::complex<T>(0, 0);
          continue;
        }
        const double* o = ws.out.data() + ((l - c0) * K + (m - c0)) * 2 * B + 2 * b;
        a[m] = std::complex<T>(static_cast<T>(o[0]), static_cast<T>(o[1]));
      }
    }
}

// Runs `chunk(c0, c1, f0, f1, scratch)` over chunks of orders [c0, c1) and fields [f0, f1). Each
// field's result is computed the same way whatever the split, so results do not depend on it.
//   - Many fields per thread: each thread takes a contiguous run of fields through every chunk
//     (the rows the longitude FFT's split gave it, and output lines of its own but at the runs'
//     ends); each thread then runs the recurrence itself, a few multiply-adds per degree and row
//     against two per field.
//   - Otherwise chunks of orders, dynamically; low m cost most (lmax - m degrees, fewest skipped
//     rows) and go first.
template <typename Fn>
void for_chunks(const RecurrencePlan& p, int64_t batch, Fn&& chunk) {
  const LegendreTableKey& k = p.key;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool parallel = threads > 1 && batch * k.nlat * k.lmax * k.mmax >= kSerialWork;
  const int64_t n_chunks = (k.mmax + kChunk - 1) / kChunk;
  const bool by_fields = batch >= kFieldsPerThread * threads;
#pragma omp parallel if (parallel)
  {
    ChunkScratch& ws = thread_scratch();
    if (by_fields || !parallel) {
      // Runs start on a field tile (for_field_tiles: pairs), so that every field keeps the
      // partner it has on one thread: the second field of a pair does not get its bits alone.
      const int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const int64_t f0 = batch * t / nt / kFieldTile * kFieldTile;
      const int64_t f1 = t + 1 == nt ? batch : batch * (t + 1) / nt / kFieldTile * kFieldTile;
      for (int64_t c = 0; c < n_chunks && f1 > f0; ++c)
        chunk(c * kChunk, std::min(k.mmax, (c + 1) * kChunk), f0, f1, ws);
    } else {
#pragma omp for schedule(dynamic, 1)
      for (int64_t c = 0; c < n_chunks; ++c) chunk(c * kChunk, std::min(k.mmax, (c + 1) * kChunk), 0, batch, ws);
    }
  }
}

template <typename T>
void to_degree_all(const RecurrencePlan& p, const GridRef<T>& grid, std::complex<T>* A, int64_t B) {
  const int64_t a_field = p.key.lmax * p.key.mmax;
  for_chunks(p, B, [&](int64_t c0, int64_t c1, int64_t f0, int64_t f1, ChunkScratch& ws) {
    to_degree_chunk<T>(p, grid.from_field(p, f0), A + f0 * a_field, f1 - f0, c0, c1, ws);
  });
}

template <typename T>
void to_latitude_all(const RecurrencePlan& p, const std::complex<T>* A, const GridRef<T>& grid, int64_t B) {
  const int64_t a_field = p.key.lmax * p.key.mmax;
  for_chunks(p, B, [&](int64_t c0, int64_t c1, int64_t f0, int64_t f1, ChunkScratch& ws) {
    to_latitude_chunk<T>(p, A + f0 * a_field, grid.from_field(p, f0), f1 - f0, c0, c1, ws);
  });
}

}  // namespace

void recurrence_to_degree(const RecurrencePlan& p, const std::complex<float>* X, std::complex<float>* A, int64_t B) {
  to_degree_all<float>(p, {const_cast<std::complex<float>*>(X), nullptr}, A, B);
}
void recurrence_to_degree(const RecurrencePlan& p, const std::complex<double>* X, std::complex<double>* A, int64_t B) {
  to_degree_all<double>(p, {const_cast<std::complex<double>*>(X), nullptr}, A, B);
}
void recurrence_to_latitude(const RecurrencePlan& p, const std::complex<float>* A, std::complex<float>* X, int64_t B) {
  to_latitude_all<float>(p, A, {X, nullptr}, B);
}
void recurrence_to_latitude(const RecurrencePlan& p, const std::complex<double>* A, std::complex<double>* X,
                            int64_t B) {
  to_latitude_all<double>(p, A, {X, nullptr}, B);
}
void recurrence_to_degree_groups(const RecurrencePlan& p, const float* groups, std::complex<float>* A, int64_t B) {
  to_degree_all<float>(p, {nullptr, const_cast<float*>(groups)}, A, B);
}
void recurrence_to_degree_groups(const RecurrencePlan& p, const double* groups, std::complex<double>* A, int64_t B) {
  to_degree_all<double>(p, {nullptr, const_cast<double*>(groups)}, A, B);
}
void recurrence_to_latitude_groups(const RecurrencePlan& p, const std::complex<float>* A, float* groups, int64_t B) {
  to_latitude_all<float>(p, A, {nullptr, groups}, B);
}
void recurrence_to_latitude_groups(const RecurrencePlan& p, const std::complex<double>* A, double* groups, int64_t B) {
  to_latitude_all<double>(p, A, {nullptr, groups}, B);
}

}  // namespace gs::sphere
