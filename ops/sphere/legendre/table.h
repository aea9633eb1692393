// The process-wide cache of Legendre tables as read-only Tensors, in the layout the contraction
// kernels (table_kernels.h, blocked.h) multiply with. One table per (grid, nlat, lmax, mmax, normalisation,
// csphase, kind, dtype): built once in f64 (ops/sphere/legendre.h), cast once to the compute dtype,
// shared by every caller with an equal key, and never writable (an in-place write throws, naming
// the table). Decisions: ops/sphere/NOTES.md, section "SHT".
#pragma once
#include <algorithm>
#include <compare>
#include <functional>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/legendre/functions.h"

namespace gs::sphere {

// What the table is multiplied with.
//   analysis:  the forward SHT's table, w_j Pbar_l^m(x_j) with the quadrature weight folded in
//              (LegendreSpec::inverse = false).
//   synthesis: the inverse SHT's table, Pbar_l^m(x_j) (LegendreSpec::inverse = true; for ortho the
//              same values as analysis without the weights).
enum class LegendreTableKind { analysis, synthesis };

struct LegendreTableKey {
  GridKind grid = GridKind::legendre_gauss;
  int64_t nlat = 0;
  int64_t lmax = 0;
  int64_t mmax = 0;
  Normalization norm = Normalization::ortho;
  bool csphase = true;
  LegendreTableKind kind = LegendreTableKind::synthesis;
  DType dtype = DType::f64;  // f32 or f64: the real dtype of the data it multiplies
  // The orders the table holds, [m_begin, m_end) of 0 .. mmax - 1 (m_end = -1: up to mmax). A
  // process that holds a block of the orders (the distributed SHT) builds only its slice; the data
  // a sliced table multiplies has order_count() columns, the first being order m_begin. Values do
  // not depend on the slice: a sliced contraction equals the full one's columns value for value.
  int64_t m_begin = 0;
  int64_t m_end = -1;

  auto operator<=>(const LegendreTableKey&) const = default;
  int64_t order_end() const { return m_end < 0 ? mmax : m_end; }
  int64_t order_count() const { return order_end() - m_begin; }
  bool all_orders() const { return m_begin == 0 && order_end() == mmax; }
  // The same key with m_end = -1 when it covers every order (so equal tables share one entry).
  LegendreTableKey canonical() const;
  // "legendre-gauss, nlat 64, lmax 64, mmax 33, ortho, csphase, analysis (weights folded in), f32"
  std::string str() const;
};

// One cached table. The grids are symmetric about the equator and
// Pbar_l^m(-x) = (-1)^{l+m} Pbar_l^m(x), so only the northern rows are stored:
//   n_even = ceil(nlat / 2) rows: j = 0 .. nlat/2 - 1 and the equator row when nlat is odd;
//   n_odd  = nlat / 2 (odd functions vanish on the equator: their equator values are stored as 0).
// Near the poles Pbar_l^m ~ sin^m(theta) is negligible for large m: every value below
// negligible() * (the largest |value| of order m) is stored as an exact 0 (which also keeps
// subnormal numbers, and their 100-cycle arithmetic, out of the kernels), and first_row[m] is the
// first northern row where order m keeps anything.
//
// Layout (orders counted from key.m_begin, 0 for a full table; m0 below is key.m_begin + k * lanes):
// orders are grouped in blocks of `lanes` consecutive m (lanes = the complex values of one
// 512-bit register: 4 in f64, 8 in f32), because the table kernels (table_kernels.cpp) hold one block's orders
// side by side in a register, where the data (..., rows, mmax) already has them. Block k covers
// m0 = k * lanes .. m0 + lanes - 1, its rows j = js .. n_even - 1 with js = block_first_row[k] (the
// smallest first_row of its orders), and its degrees l = m0 .. lmax - 1:
//   values[block_offset[k] + ((l - m0) * width(k) + (j - js)) * lanes + (m - m0)]
// with 0 where l < m and for orders past mmax. `values` ends with `lanes` zeros of padding, so a
// full register can be loaded at the last entry.
struct LegendreTable {
  LegendreTableKey key;
  int64_t n_even = 0;
  int64_t n_odd = 0;
  int64_t lanes = 0;
  // 0: T_l^m(-x) = (-1)^{l-m} T_l^m(x), as Pbar (and m Pbar / sin theta); 1: the opposite sign, as
  // dPbar/dtheta (the vector SHT's tables). Functions odd about the equator are 0 on it.
  int parity = 0;
  // Unique per built table in the process: the device caches (gemm.h, blocked.h) key their
  // copies by it, so a table rebuilt after clear_legendre_cache is never mistaken for the old one.
  uint64_t id = 0;
  std::vector<int64_t> first_row;        // order_count entries: rows j < first_row[m - m_begin] are zero for order m
  std::vector<int64_t> block_first_row;  // per block: the smallest first_row of its orders
  std::vector<int64_t> block_offset;     // per block: element offset in values
  Tensor values;                         // read-only storage

  // Relative to the largest value of each order, in units of the dtype's epsilon: 2^-12 eps.
  static double negligible(DType dtype);
  // Orders per block for a dtype.
  static int64_t lanes_for(DType dtype);
  // The bytes of the table for `key` without building it: every northern row counted (the stored
  // table skips negligible polar rows, up to about a fifth at lmax 720).
  static size_t estimated_bytes(const LegendreTableKey& key);

  int64_t blocks() const { return static_cast<int64_t>(block_offset.size()); }
  int64_t width(int64_t block) const { return n_even - block_first_row[static_cast<size_t>(block)]; }
  // The first order of block k.
  int64_t block_order(int64_t block) const { return key.m_begin + block * lanes; }
  // The element index of (m, l, northern row j), or -1 where nothing is stored (the value is 0).
  int64_t index(int64_t m, int64_t l, int64_t j) const;
  size_t nbytes() const;
};

// The table for `key`, built on first use. Thread-safe; two calls with equal keys return the
// same object (and so the same storage).
//
// Ownership: a KeyedCache (engine/keyed_cache.h) holds strong references. A table lives until
// clear_legendre_cache() (contraction.h; or the end of the process), so a functional call such as
// sht(x, spec) never rebuilds one, and a model's tables cost their memory once. Tensors already
// handed out (e.g. saved in an autograd graph) keep their storage alive after a clear; a later
// lookup then builds a new table.
std::shared_ptr<const LegendreTable> legendre_table_cached(const LegendreTableKey& key);

// A table in the layout above from f64 values given per order (the key's orders only): raw_order(m) returns the
// (lmax - m, n_even) block of order m on the northern rows (degree-major), already weighted.
// Negligible values are zeroed and first rows found as for the SHT's tables; the storage is
// read-only with `read_only_reason` as the message. For tables of other functions with the same
// symmetry (the vector SHT's); raw_order runs on OpenMP threads and must not throw.
std::shared_ptr<const LegendreTable> make_blocked_table(const LegendreTableKey& key, int parity,
                                                       const std::function<std::vector<double>(int64_t)>& raw_order,
                                                       const std::string& read_only_reason);

// The f64 reference values Pbar_l^m(x_j) (times w_j for analysis) at every row j of the grid, in
// LegendreSpec's triangular layout (block m: (lmax - m, nlat)). Built directly from legendre.h,
// without the symmetric split or the dropped values; tests compare the cached table against it.
std::vector<double> legendre_reference_table(const LegendreTableKey& key);

struct LegendreCacheStats {
  int64_t tables = 0;  // tables held by the cache
  size_t bytes = 0;    // bytes of their values
  int64_t builds = 0;  // tables built since the process started
};
LegendreCacheStats legendre_cache_stats();

// Drops the scalar tables only (clear_legendre_cache drops the whole family); returns their bytes.
size_t clear_legendre_tables();

}  // namespace gs::sphere
