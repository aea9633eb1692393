// The SHT's Legendre contractions (forward kernels and their adjoints) and the composite
// transforms built on them.
//
//   to_degree   (analysis table):  A (..., lmax, mmax) [l,m] = sum_j T_m[l,j] X[j,m]   legendre_analysis
//   to_latitude (synthesis table): X (..., nlat, mmax) [j,m] = sum_l T_m[l,j] A[l,m]   legendre_synthesis
//
// With a real table, to_latitude with table T is the adjoint of to_degree with the same T (under
// PyTorch's complex-gradient convention, the adjoint of z -> T z is g -> T^T g). So
// legendre_analysis' backward is a to_latitude contraction with the analysis table (a synthesis
// with the weights folded in), legendre_synthesis' backward a to_degree contraction with the
// synthesis table (an analysis without weights), and each backward is itself recorded with the
// other direction as its backward: derivatives of every order, one kernel pair.
//
// Kernel. Per order m, the contraction is a real GEMM: the complex batch (B rows of X[:, :, m])
// is a real (nlat, 2B) matrix whose column pairs are real and imaginary parts. The grids are
// symmetric about the equator and Pbar_l^m(-x) = (-1)^{l+m} Pbar_l^m(x), so, with j' = nlat-1-j,
//   to_degree:   E[j] = X[j] + X[j'], O[j] = X[j] - X[j']  (northern rows; E also gets the equator)
//                A[l] = sum_j T[l,j] E[j] for l + m even, sum_j T[l,j] O[j] for l + m odd
//   to_latitude: S_e = T_even^T A_even, S_o = T_odd^T A_odd on the northern rows;
//                X[j] = S_e[j] + S_o[j], X[j'] = S_e[j] - S_o[j]
// which is two GEMMs of a quarter of the plain one's size each: half the flops, half the table.
// The table also omits the polar rows where an order's functions are negligible
// (legendre_cache.h), and the GEMMs skip them.
// Orders are split among OpenMP threads in contiguous ranges of equal work (~ lmax - m each);
// within its range a thread works on chunks of up to 64 orders: it packs them into a workspace
// where the orders of one row sit side by side (Chunk below), runs one single-threaded GEMM pair
// per order on strided views of it, and scatters the results back.
// For few fields and large lmax the table is not read at all: legendre_recurrence.h computes the
// same contractions with Pbar_l^m generated on the fly (contract() picks the path per call).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // Eigen's GEMM under -march=native (see linalg.cpp)
#endif
#include "ops/sphere/sht.h"

#include <omp.h>

#include <Eigen/Core>
#include <algorithm>
#include <complex>
#include <memory>
#include <vector>

#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/kernels.h"
#include "ops/registry.h"
#include "ops/shape_ops.h"
#include "ops/sphere/fft.h"
#include "ops/sphere/legendre_cache.h"
#include "ops/sphere/legendre_recurrence.h"
#include "ops/sphere/sht_common.h"

namespace gs::sphere {
namespace {

using detail::check_spec;
using detail::Direction;
using detail::flip;
using detail::table_key;

// Orders packed together: at most kMaxChunk, fewer when the chunk's workspace would pass
// kChunkBytes. Each input row is read in segments of up to kMaxChunk values, long enough for the
// hardware prefetcher.
constexpr int64_t kMaxChunk = 64;
constexpr int64_t kChunkBytes = int64_t{16} << 20;
// Packing and unpacking walk the batch in tiles of this many fields, so that each cache line of
// the workspace (8 complex f32 values of consecutive fields) is filled while it is hot.
constexpr int64_t kBatchTile = 8;
// Below this many multiply-adds a contraction stays on the calling thread.
constexpr int64_t kSerialWork = 1 << 18;
// The cost of packing or unpacking one row of one order, in multiply-adds of the GEMMs: a few
// memory-bound element moves each.
constexpr int64_t kPackCost = 4;

template <typename T, int Order>
using StridedMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename T, int Order>
using ConstStridedMap =
    Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, Eigen::Unaligned, Eigen::OuterStride<>>;

// The shapes one contraction works on (B = the flattened batch).
struct Dims {
  int64_t batch, nlat, lmax, mmax, n_even, n_odd;
};

// Splits [0, mmax) into `parts` contiguous ranges of about equal work; returns parts + 1 bounds.
// An order's work is its GEMM (the table entries it keeps) plus packing and unpacking, which
// touch about nlat + lmax rows and count as kPackCost table entries per row.
std::vector<int64_t> balanced_ranges(const LegendreTable& tab, int64_t parts) {
  const int64_t mmax = tab.key.mmax;
  auto cost = [&](int64_t m) {
    return tab.l_even(m) * tab.even_width(m) + tab.l_odd(m) * tab.odd_width(m) +
           kPackCost * (tab.key.nlat + tab.key.lmax);
  };
  int64_t total = 0;
  for (int64_t m = 0; m < mmax; ++m) total += cost(m);
  std::vector<int64_t> bounds(static_cast<size_t>(parts) + 1, mmax);
  bounds[0] = 0;
  int64_t acc = 0, m = 0;
  for (int64_t p = 1; p < parts; ++p) {
    const int64_t target = total * p / parts;
    while (m < mmax && acc + cost(m) / 2 < target) acc += cost(m++);
    bounds[static_cast<size_t>(p)] = m;
  }
  return bounds;
}

// Orders per chunk, and the workspace (in T) one thread needs for a chunk.
template <typename T>
int64_t chunk_orders(const Dims& d) {
  const int64_t per_order = (d.nlat + d.lmax) * 2 * d.batch * static_cast<int64_t>(sizeof(T));
  return std::clamp<int64_t>(kChunkBytes / std::max<int64_t>(per_order, 1), 1, kMaxChunk);
}
int64_t scratch_per_thread(const Dims& d, int64_t chunk) { return chunk * (d.nlat + d.lmax) * 2 * d.batch; }

// out (rows, n) = a (rows, k) b (k, n), with b and out row-major with row strides, and a contiguous
// in storage order AOrder: RowMajor for the table itself (to_degree), ColMajor for its transpose
// (to_latitude: the table is stored (k, rows) row-major). Zero when k == 0.
template <typename T, int AOrder>
void gemm(T* out, int64_t out_stride, const T* a, const T* b, int64_t b_stride, int64_t rows, int64_t k, int64_t n) {
  StridedMap<T, Eigen::RowMajor> o(out, rows, n, Eigen::OuterStride<>(out_stride));
  if (k == 0) o.setZero();
  else
    o.noalias() = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, AOrder>>(a, rows, k) *
                  ConstStridedMap<T, Eigen::RowMajor>(b, k, n, Eigen::OuterStride<>(b_stride));
}

// Workspace of a chunk of K orders c0 <= m < c0 + K (k = m - c0; W = 2B reals: a batch of
// complex values per row and order). Rows of all orders are interleaved, so that packing and
// unpacking touch one short stretch of memory per grid or spectral row, and each order's matrix
// is a strided view:
//   latitude side: [n_even][K][W] even parts (E, or S_e), then [n_odd][K][W] odd parts (O, S_o)
//   degree side:   [lmax - c0][K][W] by absolute degree l; order m's even rows l = m, m+2, ...
//                  start at row m - c0 with stride 2KW, its odd rows at row m + 1 - c0.
template <typename T>
struct Chunk {
  int64_t c0, c1, K, W;
  T* lat;
  T* deg;
  T* lat_row(int64_t j, int64_t m) const { return lat + (j * K + (m - c0)) * W; }
  T* deg_row(int64_t l, int64_t m) const { return deg + ((l - c0) * K + (m - c0)) * W; }
};

// The first northern row any order of [c0, c1) keeps: the rows before it are zero for all of them.
int64_t first_row_of_chunk(const LegendreTable& tab, int64_t c0, int64_t c1) {
  int64_t js = tab.n_even;
  for (int64_t m = c0; m < c1; ++m) js = std::min(js, tab.first_row[static_cast<size_t>(m)]);
  return js;
}

// A (B, lmax, mmax) [l,m] = sum_j T_m[l,j] X (B, nlat, mmax) [j,m], for orders [m0, m1).
template <typename T>
void to_degree_range(const std::complex<T>* X, std::complex<T>* A, const LegendreTable& tab, const T* table,
                     const Dims& d, int64_t m0, int64_t m1, int64_t chunk, T* scratch) {
  const int64_t B = d.batch, W = 2 * B, nlat = d.nlat, lmax = d.lmax, mmax = d.mmax;
  for (int64_t c0 = m0; c0 < m1; c0 += chunk) {
    const int64_t c1 = std::min(c0 + chunk, m1);
    const Chunk<T> ws{c0, c1, c1 - c0, W, scratch, scratch + chunk * nlat * W};
    const int64_t KW = ws.K * W;

    // Pack: E = X[j] + X[j'], O = X[j] - X[j'] on the northern rows the chunk uses; E gets the
    // equator too.
    const int64_t j0 = first_row_of_chunk(tab, c0, c1);
    for (int64_t b0 = 0; b0 < B; b0 += kBatchTile) {
      for (int64_t j = j0; j < d.n_even; ++j) {
        const int64_t jm = nlat - 1 - j;  // the mirror row
        const bool equator = j == d.n_odd;
        T* e_row = ws.lat_row(j, c0);
        T* o_row = equator ? nullptr : ws.lat_row(d.n_even + j, c0);
        for (int64_t b = b0; b < std::min(b0 + kBatchTile, B); ++b) {
          const std::complex<T>* xn = X + (b * nlat + j) * mmax;
          const std::complex<T>* xs = X + (b * nlat + jm) * mmax;
          if (equator) {
            for (int64_t m = c0; m < c1; ++m) {
              T* e = e_row + (m - c0) * W + 2 * b;
              e[0] = xn[m].real();
              e[1] = xn[m].imag();
            }
            continue;
          }
          for (int64_t m = c0; m < c1; ++m) {
            T* e = e_row + (m - c0) * W + 2 * b;
            T* o = o_row + (m - c0) * W + 2 * b;
            const T nr = xn[m].real(), ni = xn[m].imag(), sr = xs[m].real(), si = xs[m].imag();
            e[0] = nr + sr;
            e[1] = ni + si;
            o[0] = nr - sr;
            o[1] = ni - si;
          }
        }
      }
    }

    // GEMMs over the rows the table keeps (j >= first_row):
    // (l_even, even_width) x (even_width, W) and (l_odd, odd_width) x (odd_width, W).
    for (int64_t m = c0; m < c1; ++m) {
      const size_t mi = static_cast<size_t>(m);
      const int64_t js = tab.first_row[mi];
      gemm<T, Eigen::RowMajor>(ws.deg_row(m, m), 2 * KW, table + tab.even_offset[mi], ws.lat_row(js, m), KW,
                               tab.l_even(m), tab.even_width(m), W);
      if (tab.l_odd(m) > 0)
        gemm<T, Eigen::RowMajor>(ws.deg_row(m + 1, m), 2 * KW, table + tab.odd_offset[mi],
                                 ws.lat_row(d.n_even + js, m), KW, tab.l_odd(m), tab.odd_width(m), W);
    }

    // Unpack into A[b, l, m], zero where l < m.
    for (int64_t b0 = 0; b0 < B; b0 += kBatchTile) {
      for (int64_t l = 0; l < lmax; ++l) {
        const int64_t mend = std::clamp(l + 1, c0, c1);
        const T* row = l >= c0 ? ws.deg_row(l, c0) : nullptr;
        for (int64_t b = b0; b < std::min(b0 + kBatchTile, B); ++b) {
          std::complex<T>* a = A + (b * lmax + l) * mmax;
          for (int64_t m = c0; m < mend; ++m) {
            const T* r = row + (m - c0) * W + 2 * b;
            a[m] = std::complex<T>(r[0], r[1]);
          }
          for (int64_t m = mend; m < c1; ++m) a[m] = std::complex<T>(0, 0);
        }
      }
    }
  }
}

// X (B, nlat, mmax) [j,m] = sum_{l>=m} T_m[l,j] A (B, lmax, mmax) [l,m], for orders [m0, m1).
template <typename T>
void to_latitude_range(const std::complex<T>* A, std::complex<T>* X, const LegendreTable& tab, const T* table,
                       const Dims& d, int64_t m0, int64_t m1, int64_t chunk, T* scratch) {
  const int64_t B = d.batch, W = 2 * B, nlat = d.nlat, lmax = d.lmax, mmax = d.mmax;
  for (int64_t c0 = m0; c0 < m1; c0 += chunk) {
    const int64_t c1 = std::min(c0 + chunk, m1);
    const Chunk<T> ws{c0, c1, c1 - c0, W, scratch, scratch + chunk * nlat * W};
    const int64_t KW = ws.K * W;

    // Pack: coefficients l >= m by degree.
    for (int64_t b0 = 0; b0 < B; b0 += kBatchTile) {
      for (int64_t l = c0; l < lmax; ++l) {
        const int64_t mend = std::min(c1, l + 1);
        T* row = ws.deg_row(l, c0);
        for (int64_t b = b0; b < std::min(b0 + kBatchTile, B); ++b) {
          const std::complex<T>* a = A + (b * lmax + l) * mmax;
          for (int64_t m = c0; m < mend; ++m) {
            T* p = row + (m - c0) * W + 2 * b;
            p[0] = a[m].real();
            p[1] = a[m].imag();
          }
        }
      }
    }

    // GEMMs into the rows j >= first_row (the tables are stored (l, j) row-major: their
    // transposes are column-major): (even_width, l_even) x (l_even, W) and
    // (odd_width, l_odd) x (l_odd, W). The rows before first_row are zero (those before the
    // chunk's first row are not stored: unpacking writes their zeros directly).
    const int64_t j0 = first_row_of_chunk(tab, c0, c1);
    for (int64_t m = c0; m < c1; ++m) {
      const size_t mi = static_cast<size_t>(m);
      const int64_t js = tab.first_row[mi], wo = tab.odd_width(m), odd_start = d.n_odd - wo;
      for (int64_t j = j0; j < js; ++j) std::fill_n(ws.lat_row(j, m), W, T(0));
      for (int64_t j = j0; j < odd_start; ++j) std::fill_n(ws.lat_row(d.n_even + j, m), W, T(0));
      gemm<T, Eigen::ColMajor>(ws.lat_row(js, m), KW, table + tab.even_offset[mi], ws.deg_row(m, m), 2 * KW,
                               tab.even_width(m), tab.l_even(m), W);
      if (wo > 0)
        gemm<T, Eigen::ColMajor>(ws.lat_row(d.n_even + odd_start, m), KW, table + tab.odd_offset[mi],
                                 ws.deg_row(m + 1, m), 2 * KW, wo, tab.l_odd(m), W);
    }

    // Unpack: northern row = S_e + S_o, its mirror = S_e - S_o, the equator = S_e.
    for (int64_t b0 = 0; b0 < B; b0 += kBatchTile) {
      for (int64_t j = 0; j < d.n_even; ++j) {
        const int64_t jm = nlat - 1 - j;  // the mirror row
        const bool equator = j == d.n_odd;
        const T* e_row = ws.lat_row(j, c0);
        const T* o_row = equator ? nullptr : ws.lat_row(d.n_even + j, c0);
        for (int64_t b = b0; b < std::min(b0 + kBatchTile, B); ++b) {
          std::complex<T>* xn = X + (b * nlat + j) * mmax;
          std::complex<T>* xs = X + (b * nlat + jm) * mmax;
          if (j < j0) {
            std::fill(xn + c0, xn + c1, std::complex<T>(0, 0));
            std::fill(xs + c0, xs + c1, std::complex<T>(0, 0));
            continue;
          }
          if (equator) {
            for (int64_t m = c0; m < c1; ++m) {
              const T* e = e_row + (m - c0) * W + 2 * b;
              xn[m] = std::complex<T>(e[0], e[1]);
            }
            continue;
          }
          for (int64_t m = c0; m < c1; ++m) {
            const T* e = e_row + (m - c0) * W + 2 * b;
            const T* o = o_row + (m - c0) * W + 2 * b;
            xn[m] = std::complex<T>(e[0] + o[0], e[1] + o[1]);
            xs[m] = std::complex<T>(e[0] - o[0], e[1] - o[1]);
          }
        }
      }
    }
  }
}

// Runs one contraction over all orders, the orders split among threads.
template <typename T>
void contract_kernel(Direction dir, const std::complex<T>* in, std::complex<T>* out, const LegendreTable& tab,
                     const Dims& d) {
  const T* table = tab.values.template data<T>();
  const int64_t chunk = chunk_orders<T>(d);
  auto run = [&](int64_t m0, int64_t m1, T* scratch) {
    if (dir == Direction::to_degree) to_degree_range<T>(in, out, tab, table, d, m0, m1, chunk, scratch);
    else to_latitude_range<T>(in, out, tab, table, d, m0, m1, chunk, scratch);
  };
  const int64_t work = d.batch * d.nlat * d.lmax * d.mmax;  // ~ 4x the multiply-adds
  int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (work < kSerialWork) threads = 1;
  threads = static_cast<int>(std::min<int64_t>(threads, d.mmax));
  const int64_t per_thread = scratch_per_thread(d, chunk);
  // Allocated here, where it may throw, and not zero-filled: every value is written before use.
  std::unique_ptr<T[]> scratch_buffer(new T[static_cast<size_t>(per_thread * threads)]);
  T* scratch = scratch_buffer.get();
  if (threads == 1) {
    run(0, d.mmax, scratch);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    // The team may be smaller than asked for; every thread derives the same ranges from its size.
    const int team = omp_get_num_threads(), t = omp_get_thread_num();
    const std::vector<int64_t> bounds = balanced_ranges(tab, team);
    run(bounds[static_cast<size_t>(t)], bounds[static_cast<size_t>(t) + 1], scratch + t * per_thread);
  }
}

const char* op_name(LegendreTableKind kind, Direction dir) {
  if (kind == LegendreTableKind::analysis)
    return dir == Direction::to_degree ? "legendre_analysis" : "legendre_analysis_backward";
  return dir == Direction::to_latitude ? "legendre_synthesis" : "legendre_synthesis_backward";
}

// x (..., rows_in, mmax) -> (..., rows_out, mmax) for table `key`; shapes already checked. The
// path is chosen per call (use_recurrence: on the fly for few fields and large lmax, else the cached
// table; `held` is a table already in hand). The backward rule is the opposite direction of the
// same key, chosen afresh; on the table path the table is saved (its version is checked in
// backward) and reused.
Tensor contract(const Tensor& x, const LegendreTableKey& key, Direction dir,
                std::shared_ptr<const LegendreTable> held = nullptr) {
  const int64_t rows_out = dir == Direction::to_degree ? key.lmax : key.nlat;
  Shape out_sizes(x.sizes().begin(), x.sizes().end() - 2);
  const int64_t batch = numel_of(out_sizes);
  out_sizes.push_back(rows_out);
  out_sizes.push_back(key.mmax);
  Tensor out = empty(out_sizes, x.dtype(), x.device());
  const bool fly = use_recurrence(key, batch);
  std::shared_ptr<const LegendreTable> tab;
  if (!fly) tab = held ? std::move(held) : legendre_table_cached(key);
  if (out.numel() > 0) {
    const Tensor xc = contiguous_copy(x);
    dispatch_float(key.dtype, op_name(key.kind, dir), [&]<typename T>() {
      const std::complex<T>* in = xc.data<std::complex<T>>();
      std::complex<T>* o = out.data<std::complex<T>>();
      if (fly) {
        const std::shared_ptr<const RecurrencePlan> plan = recurrence_plan_cached(key);
        if (dir == Direction::to_degree) recurrence_to_degree(*plan, in, o, batch);
        else recurrence_to_latitude(*plan, in, o, batch);
      } else {
        contract_kernel<T>(dir, in, o, *tab, Dims{batch, key.nlat, key.lmax, key.mmax, tab->n_even, tab->n_odd});
      }
    });
  }
  if (should_record({x})) {
    if (tab)
      record_op(op_name(key.kind, dir), {x}, {&out}, {tab->values}, {},
                [tab, key, dir](BackwardContext& ctx, const std::vector<Tensor>& g) {
                  ctx.saved(0);  // throws if the table was overwritten since forward
                  return std::vector<Tensor>{contract(g[0], key, flip(dir), tab)};
                });
    else
      record_op(op_name(key.kind, dir), {x}, {&out}, {}, {},
                [key, dir](BackwardContext&, const std::vector<Tensor>& g) {
                  return std::vector<Tensor>{contract(g[0], key, flip(dir))};
                });
  }
  return out;
}

// x must be (..., rows, mmax) complex on the CPU.
void check_spectral_input(const Tensor& x, const char* op, const char* what, const char* rows_name, int64_t rows,
                          const ShtSpec& spec) {
  kernels::check_defined(x, op);
  kernels::check_cpu(x, op);
  GS_CHECK(is_complex(x.dtype()) && x.dim() >= 2 && x.size(-2) == rows && x.size(-1) == spec.mmax,
           "{}: expected {} of shape (..., {} = {}, mmax = {}) with dtype c64 or c128 for {}, got {}", op, what,
           rows_name, rows, spec.mmax, spec.str(), x.meta_str());
}

}  // namespace

std::string ShtSpec::str() const {
  return fmt::format("{} {}x{}, lmax {}, mmax {}, {}{}", grid_name(grid), nlat, nlon, lmax, mmax,
                     normalization_name(norm), csphase ? "" : ", no csphase");
}

ShtSpec make_sht_spec(GridKind grid, int64_t nlat, int64_t nlon, std::optional<int64_t> lmax,
                      std::optional<int64_t> mmax, Normalization norm, bool csphase) {
  const Truncation t = resolve_truncation(grid, nlat, nlon, lmax, mmax);
  return {grid, nlat, nlon, t.lmax, t.mmax, norm, csphase};
}

Tensor legendre_analysis(const Tensor& X, const ShtSpec& spec) {
  check_spec(spec, "legendre_analysis", true);
  check_spectral_input(X, "legendre_analysis", "longitude Fourier coefficients", "nlat", spec.nlat, spec);
  return contract(X, table_key(spec, LegendreTableKind::analysis, real_dtype(X.dtype())), Direction::to_degree);
}

Tensor legendre_synthesis(const Tensor& coeffs, const ShtSpec& spec) {
  check_spec(spec, "legendre_synthesis", false);
  check_spectral_input(coeffs, "legendre_synthesis", "spectral coefficients", "lmax", spec.lmax, spec);
  return contract(coeffs, table_key(spec, LegendreTableKind::synthesis, real_dtype(coeffs.dtype())),
                  Direction::to_latitude);
}

Tensor sht(const Tensor& x, const ShtSpec& spec) {
  check_spec(spec, "sht", true);
  kernels::check_defined(x, "sht");
  kernels::check_cpu(x, "sht");
  GS_CHECK(is_floating(x.dtype()),
           "sht: expected a real field (f32 or f64) of shape (..., nlat = {}, nlon = {}), got {}; the SHT here "
           "is the real transform (transform the real and imaginary parts of a complex field separately)",
           spec.nlat, spec.nlon, x.meta_str());
  GS_CHECK(x.dim() >= 2 && x.size(-2) == spec.nlat && x.size(-1) == spec.nlon,
           "sht: expected a field of shape (..., nlat = {}, nlon = {}) for {}, got {}", spec.nlat, spec.nlon,
           spec.str(), x.meta_str());
  return legendre_analysis(rfft_lon(x, spec.mmax), spec);
}

Tensor isht(const Tensor& coeffs, const ShtSpec& spec) {
  check_spec(spec, "isht", false);
  check_spectral_input(coeffs, "isht", "spectral coefficients", "lmax", spec.lmax, spec);
  return irfft_lon(legendre_synthesis(coeffs, spec), spec.nlon);
}

Tensor truncate_or_pad_coeffs(const Tensor& coeffs, int64_t lmax_to, int64_t mmax_to) {
  kernels::check_defined(coeffs, "truncate_or_pad_coeffs");
  GS_CHECK(coeffs.dim() >= 2, "truncate_or_pad_coeffs: expected coefficients (..., lmax, mmax), got {}",
           coeffs.meta_str());
  GS_CHECK(lmax_to >= 1 && mmax_to >= 1 && mmax_to <= lmax_to,
           "truncate_or_pad_coeffs: expected 1 <= mmax <= lmax for the target, got lmax = {}, mmax = {}", lmax_to,
           mmax_to);
  const int64_t dl = lmax_to - coeffs.size(-2), dm = mmax_to - coeffs.size(-1);
  if (dl == 0 && dm == 0) return coeffs;
  // Negative pads crop; zero where l < m is preserved either way.
  return pad(coeffs, {0, dm, 0, dl});
}

Tensor resample(const Tensor& x, const ShtSpec& from, const ShtSpec& to) {
  GS_CHECK(from.norm == to.norm && from.csphase == to.csphase,
           "resample: both specs must share the normalisation and csphase (coefficients of one are not those of "
           "the other), got {} and {}",
           from.str(), to.str());
  if (from == to) return x;
  return isht(truncate_or_pad_coeffs(sht(x, from), to.lmax, to.mmax), to);
}

size_t sht_table_bytes(const ShtSpec& spec, DType dtype, bool analysis) {
  GS_CHECK(is_floating(dtype), "sht_table_bytes: expected f32 or f64, got {}", dtype_name(dtype));
  const auto kind = analysis ? LegendreTableKind::analysis : LegendreTableKind::synthesis;
  return legendre_table_cached(table_key(spec, kind, dtype))->nbytes();
}

namespace {

// Registry samples: one small transform per grid, odd and even nlat, with distinct shapes so that
// each registry function can tell from its input which spec the sample was made for.
const ShtSpec kSampleSpecs[] = {
    {GridKind::legendre_gauss, 4, 6, 4, 3, Normalization::ortho, true},
    {GridKind::equiangular, 7, 8, 4, 4, Normalization::ortho, true},
    {GridKind::lobatto, 6, 8, 5, 4, Normalization::ortho, true},
};

const ShtSpec& sample_spec_by_grid_shape(const Tensor& x) {
  for (const ShtSpec& s : kSampleSpecs)
    if (x.size(-2) == s.nlat && (x.size(-1) == s.nlon || x.size(-1) == s.mmax)) return s;
  fail("SHT registry: no sample spec has a grid of shape {}", shape_str(x.sizes()));
}

const ShtSpec& sample_spec_by_coeff_shape(const Tensor& x) {
  for (const ShtSpec& s : kSampleSpecs)
    if (x.size(-2) == s.lmax && x.size(-1) == s.mmax) return s;
  fail("SHT registry: no sample spec has coefficients of shape {}", shape_str(x.sizes()));
}

using V = std::vector<Tensor>;

// One sample per grid of `rows(spec)` x `cols(spec)` with a batch of 2, the first non-contiguous.
template <typename Rows, typename Cols>
std::vector<OpSample> samples(RandomKey k, DType dtype, Rows rows, Cols cols) {
  std::vector<OpSample> out;
  uint64_t stream = 1;
  for (const ShtSpec& s : kSampleSpecs) {
    const Shape sizes{2, rows(s), cols(s)};
    const RandomKey key{k.seed, k.stream * 100 + stream++};
    if (stream == 2) out.push_back({std::string(grid_name(s.grid)) + " non-contiguous", {sample_leaf_transposed(sizes, key, dtype)}});
    else out.push_back({std::string(grid_name(s.grid)), {sample_leaf(sizes, key, dtype)}});
  }
  return out;
}

const OpRegistrar registrar{
    {"legendre_analysis",
     [](RandomKey k) {
       return samples(k, DType::c128, [](const ShtSpec& s) { return s.nlat; }, [](const ShtSpec& s) { return s.mmax; });
     },
     [](const V& x) { return V{legendre_analysis(x[0], sample_spec_by_grid_shape(x[0]))}; }},
    {"legendre_synthesis",
     [](RandomKey k) {
       return samples(k, DType::c128, [](const ShtSpec& s) { return s.lmax; }, [](const ShtSpec& s) { return s.mmax; });
     },
     [](const V& x) { return V{legendre_synthesis(x[0], sample_spec_by_coeff_shape(x[0]))}; }},
    {"sht",
     [](RandomKey k) {
       return samples(k, DType::f64, [](const ShtSpec& s) { return s.nlat; }, [](const ShtSpec& s) { return s.nlon; });
     },
     [](const V& x) { return V{sht(x[0], sample_spec_by_grid_shape(x[0]))}; }},
    {"isht",
     [](RandomKey k) {
       return samples(k, DType::c128, [](const ShtSpec& s) { return s.lmax; }, [](const ShtSpec& s) { return s.mmax; });
     },
     [](const V& x) { return V{isht(x[0], sample_spec_by_coeff_shape(x[0]))}; }},
};

}  // namespace
}  // namespace gs::sphere
