// Building and caching the SHT's Legendre tables. The f64 values come from legendre_table_for_m on
// the northern nodes only (the southern ones are their mirror images), one order per task so the
// build runs on every core and never holds more than one f64 block per thread.
#include "ops/sphere/legendre/table.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <limits>

#include "engine/error.h"
#include "engine/factory.h"
#include "engine/keyed_cache.h"

namespace gs::sphere {
namespace {

LegendreSpec legendre_spec_of(const LegendreTableKey& key, int64_t nlat) {
  LegendreSpec spec;
  spec.grid = key.grid;
  spec.nlat = nlat;
  spec.lmax = key.lmax;
  spec.mmax = key.mmax;
  spec.norm = key.norm;
  spec.csphase = key.csphase;
  spec.inverse = key.kind == LegendreTableKind::synthesis;
  return spec;
}

void check_key(const LegendreTableKey& key) {
  GS_CHECK(is_floating(key.dtype), "Legendre table: expected dtype f32 or f64, got {}", dtype_name(key.dtype));
  GS_CHECK(key.m_begin >= 0 && key.m_begin < key.order_end() && key.order_end() <= key.mmax,
           "Legendre table: expected orders 0 <= m_begin < m_end <= mmax = {}, got [{}, {})", key.mmax, key.m_begin,
           key.order_end());
  validate(legendre_spec_of(key, key.nlat));
}

// The quadrature weight each row is multiplied by (1 for synthesis tables).
std::vector<double> row_factors(const LegendreTableKey& key, const Quadrature& q) {
  if (key.kind == LegendreTableKind::analysis) return q.weights;
  return std::vector<double>(q.weights.size(), 1.0);
}

// One order's values (lmax - m, n_even) in f64 with negligible values zeroed, the functions that
// are odd about the equator exactly 0 on it, and the first northern row that keeps anything.
struct OrderValues {
  int64_t first_row = 0;
  std::vector<double> v;
};

OrderValues clean_order(std::vector<double> raw, const LegendreTableKey& key, int parity, int64_t n_even,
                        int64_t n_odd, int64_t m) {
  OrderValues out;
  out.v = std::move(raw);
  const int64_t rows = key.lmax - m;
  double largest = 0;
  for (double v : out.v) largest = std::max(largest, std::abs(v));
  const double threshold = largest * LegendreTable::negligible(key.dtype);
  out.first_row = n_even;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < n_even; ++j) {
      double& v = out.v[static_cast<size_t>(i * n_even + j)];
      const bool odd_about_equator = (i + parity) % 2 == 1;  // i = l - m
      if (std::abs(v) <= threshold || (odd_about_equator && j >= n_odd)) v = 0;
      else out.first_row = std::min(out.first_row, j);
    }
  return out;
}

// One order's stored rows in T: (lmax - m, n_even - first_row).
template <typename T>
struct OrderRows {
  int64_t first_row = 0;
  std::vector<T> v;
};

template <typename T>
void fill_table(LegendreTable& t, const std::function<std::vector<double>(int64_t)>& raw_order) {
  const int64_t mb = t.key.m_begin, me = t.key.order_end(), count = t.key.order_count();
  const int64_t lmax = t.key.lmax, lanes = t.lanes, n_even = t.n_even;
  const int64_t n_blocks = (count + lanes - 1) / lanes;
  // Each order on its own (work ~ lmax - m: dynamic scheduling balances it); the layout depends
  // on the rows each order keeps, so it is known only when all are done. Indexed by m - mb.
  std::vector<OrderRows<T>> orders(static_cast<size_t>(count));
  std::atomic<int64_t> bad_order{-1};  // an order whose block had the wrong size (reported after the loop)
  std::atomic<size_t> bad_size{0};
#pragma omp parallel for schedule(dynamic, 1)
  for (int64_t m = mb; m < me; ++m) {
    std::vector<double> raw = raw_order(m);
    if (raw.size() != static_cast<size_t>((lmax - m) * n_even)) {
      bad_size = raw.size();
      bad_order = m;
      continue;
    }
    const OrderValues ov = clean_order(std::move(raw), t.key, t.parity, n_even, t.n_odd, m);
    OrderRows<T>& o = orders[static_cast<size_t>(m - mb)];
    o.first_row = ov.first_row;
    const int64_t w = n_even - o.first_row;
    o.v.resize(static_cast<size_t>((lmax - m) * w));
    for (int64_t i = 0; i < lmax - m; ++i)
      for (int64_t j = 0; j < w; ++j)
        o.v[static_cast<size_t>(i * w + j)] = static_cast<T>(ov.v[static_cast<size_t>(i * n_even + o.first_row + j)]);
  }
  GS_CHECK(bad_order < 0, "Legendre table ({}): expected (lmax - m) * n_even = {} values for order {}, got {}",
           t.key.str(), (lmax - bad_order) * n_even, bad_order.load(), bad_size.load());
  t.first_row.resize(static_cast<size_t>(count));
  t.block_first_row.assign(static_cast<size_t>(n_blocks), n_even);
  t.block_offset.resize(static_cast<size_t>(n_blocks));
  int64_t total = 0;
  for (int64_t k = 0; k < n_blocks; ++k) {
    const size_t ks = static_cast<size_t>(k);
    for (int64_t i = k * lanes; i < std::min(count, (k + 1) * lanes); ++i) {
      t.first_row[static_cast<size_t>(i)] = orders[static_cast<size_t>(i)].first_row;
      t.block_first_row[ks] = std::min(t.block_first_row[ks], t.first_row[static_cast<size_t>(i)]);
    }
    t.block_offset[ks] = total;
    total += std::max<int64_t>(0, lmax - t.block_order(k)) * t.width(k) * lanes;
  }
  t.values = zeros({total + lanes}, t.key.dtype);
  T* out = t.values.data<T>();
  for (int64_t m = mb; m < me; ++m) {
    OrderRows<T>& o = orders[static_cast<size_t>(m - mb)];
    const int64_t k = (m - mb) / lanes, m0 = t.block_order(k), js = t.block_first_row[static_cast<size_t>(k)],
                  w = t.width(k);
    const int64_t ow = n_even - o.first_row;
    T* block = out + t.block_offset[static_cast<size_t>(k)];
    for (int64_t l = m; l < lmax; ++l)
      for (int64_t j = o.first_row; j < n_even; ++j)
        block[((l - m0) * w + (j - js)) * lanes + (m - m0)] = o.v[static_cast<size_t>((l - m) * ow + (j - o.first_row))];
    o = OrderRows<T>();
  }
}

std::shared_ptr<const LegendreTable> build_table(const LegendreTableKey& key) {
  check_key(key);
  const Quadrature q = make_quadrature(key.grid, key.nlat);
  const int64_t n_even = (key.nlat + 1) / 2;
  const std::vector<double> x_north(q.cos_theta.begin(), q.cos_theta.begin() + n_even);
  const std::vector<double> factor = row_factors(key, q);
  const LegendreSpec north_spec = legendre_spec_of(key, n_even);
  validate(north_spec);  // before the parallel loop: nothing in it may throw
  return make_blocked_table(
      key, 0,
      [&](int64_t m) {
        std::vector<double> v = legendre_table_for_m(north_spec, x_north, m);  // (lmax - m, n_even)
        for (size_t i = 0; i < v.size(); ++i) v[i] *= factor[i % static_cast<size_t>(n_even)];
        return v;
      },
      fmt::format("Legendre table ({}) is a shared constant of the SHT table cache; clone() it to get a writable copy",
                  key.str()));
}

using TableCache = KeyedCache<LegendreTableKey, LegendreTable>;

TableCache& cache() {
  // Never destroyed: tables may be looked up during static destruction.
  static auto* c = new TableCache(build_table, [](const LegendreTable& t) { return t.nbytes(); });
  return *c;
}

}  // namespace

std::string LegendreTableKey::str() const {
  return fmt::format("{}, nlat {}, lmax {}, mmax {}{}, {}{}, {}, {}", grid_name(grid), nlat, lmax, mmax,
                     all_orders() ? std::string() : fmt::format(" (orders {} .. {})", m_begin, order_end() - 1),
                     normalization_name(norm), csphase ? ", csphase" : ", no csphase",
                     kind == LegendreTableKind::analysis ? "analysis (quadrature weights folded in)" : "synthesis",
                     dtype_name(dtype));
}

LegendreTableKey LegendreTableKey::canonical() const {
  LegendreTableKey k = *this;
  if (k.m_end == k.mmax) k.m_end = -1;
  return k;
}

double LegendreTable::negligible(DType dtype) {
  const double eps = dtype == DType::f32 ? std::numeric_limits<float>::epsilon() : std::numeric_limits<double>::epsilon();
  return eps / 4096;
}

std::shared_ptr<const LegendreTable> make_blocked_table(const LegendreTableKey& key, int parity,
                                                       const std::function<std::vector<double>(int64_t)>& raw_order,
                                                       const std::string& read_only_reason) {
  GS_CHECK(is_floating(key.dtype) && key.nlat >= 1 && key.mmax >= 1 && key.mmax <= key.lmax && (parity == 0 || parity == 1) &&
               key.m_begin >= 0 && key.m_begin < key.order_end() && key.order_end() <= key.mmax,
           "Legendre table: expected dtype f32/f64, nlat >= 1, 1 <= mmax <= lmax, orders within [0, mmax) and parity "
           "0 or 1, got {} (parity {})",
           key.str(), parity);
  static std::atomic<uint64_t> next_id{1};
  auto t = std::make_shared<LegendreTable>();
  t->key = key.canonical();
  t->id = next_id++;
  t->n_even = (key.nlat + 1) / 2;
  t->n_odd = key.nlat / 2;
  t->lanes = LegendreTable::lanes_for(key.dtype);
  t->parity = parity;
  dispatch_float(key.dtype, "Legendre table", [&]<typename T>() { fill_table<T>(*t, raw_order); });
  t->values.storage()->set_read_only(read_only_reason);
  return t;
}

int64_t LegendreTable::lanes_for(DType dtype) { return dtype == DType::f32 ? 8 : 4; }

size_t LegendreTable::estimated_bytes(const LegendreTableKey& key) {
  const int64_t lanes = lanes_for(key.dtype), n_even = (key.nlat + 1) / 2;
  int64_t entries = lanes;  // the padding
  for (int64_t m0 = key.m_begin; m0 < key.order_end(); m0 += lanes)
    entries += std::max<int64_t>(0, key.lmax - m0) * n_even * lanes;
  return static_cast<size_t>(entries) * dtype_size(key.dtype);
}

int64_t LegendreTable::index(int64_t m, int64_t l, int64_t j) const {
  if (m < key.m_begin || m >= key.order_end() || l < m || l >= key.lmax ||
      j < first_row[static_cast<size_t>(m - key.m_begin)] || j >= n_even)
    return -1;
  const int64_t k = (m - key.m_begin) / lanes, m0 = block_order(k), js = block_first_row[static_cast<size_t>(k)];
  return block_offset[static_cast<size_t>(k)] + ((l - m0) * width(k) + (j - js)) * lanes + (m - m0);
}

size_t LegendreTable::nbytes() const {
  return values.defined() ? static_cast<size_t>(values.numel()) * dtype_size(values.dtype()) : 0;
}

std::shared_ptr<const LegendreTable> legendre_table_cached(const LegendreTableKey& requested) {
  const LegendreTableKey key = requested.canonical();
  check_key(key);
  return cache().get(key);
}

std::vector<double> legendre_reference_table(const LegendreTableKey& key) {
  check_key(key);
  GS_CHECK(key.all_orders(), "legendre_reference_table: expected a key of every order, got {}", key.str());
  const Quadrature q = make_quadrature(key.grid, key.nlat);
  const LegendreSpec spec = legendre_spec_of(key, key.nlat);
  std::vector<double> table = legendre_table(spec, q.cos_theta);
  const std::vector<double> factor = row_factors(key, q);
  for (int64_t m = 0; m < key.mmax; ++m)
    for (int64_t l = m; l < key.lmax; ++l)
      for (int64_t j = 0; j < key.nlat; ++j) table[spec.tri_index(m, l, j)] *= factor[j];
  return table;
}

LegendreCacheStats legendre_cache_stats() {
  const CacheStats c = cache().stats();
  return {c.entries, c.bytes, c.builds};
}

size_t clear_legendre_tables() { return cache().clear(); }

}  // namespace gs::sphere
