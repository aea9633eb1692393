// The Legendre contractions read straight from the CPU's blocked table (table.h: northern
// rows only, l >= m only, polar values below negligible() dropped), one output value per call, as
// plain arithmetic on interleaved (re, im) pairs. The CUDA kernels (blocked_cuda.cu) run
// one thread per output value through these functions (the *_at forms, which also decode the
// thread's flat index), and blocked.cpp's CPU loops run the same *_at forms, checked by
// tests/ops/test_sphere_device_kernels.cpp against the native kernels: the CPU suites test the
// arithmetic and the indexing the GPU runs. No checks here: callers validate first.
//
// The equatorial symmetry: the southern row nlat-1-j sits at -x_j, where
// T_l^m(-x) = (-1)^{l-m+parity} T_l^m(x). So
//   to_degree:   A[l,m] = sum_{northern j} T[m,l,j] (X[j,m] + s X[nlat-1-j,m]),  s = (-1)^{l-m+parity}
//                (the equator row of an odd nlat once);
//   to_latitude: with E and O the sums of T[m,l,j] A[l,m] over l with s = +1 and s = -1,
//                X[j,m] = E + O and X[nlat-1-j,m] = E - O.
// Each reads half the rows (or half the table) of the dense form, and only l >= m.
#pragma once
#include <cstdint>

#include "ops/elementwise_math.h"  // GS_HD

namespace gs::sphere::blocked {

// A blocked table (table.h) as raw pointers, on whichever device holds them.
template <typename R>
struct TableView {
  const R* values;
  const int64_t* block_offset;     // per block of `lanes` orders
  const int64_t* block_first_row;  // per block: rows before it are zero for every order of the block
  int64_t lanes, n_even, n_odd, nlat, lmax;
  int64_t m_begin;  // the table's first order; the data's order columns count from it
  int64_t orders;   // order columns of the data (the table's order_count)
  int parity;       // 0: T(-x) = (-1)^{l-m} T(x); 1: the opposite sign
};

// A[b, l, mi] (the order m = m_begin + mi) from X (batch, nlat, orders) interleaved complex:
// returns the value as (re, im) in R's precision, accumulated in R.
template <typename R>
GS_HD inline void to_degree_value(const TableView<R>& t, const R* X, int64_t b, int64_t l, int64_t mi, R* out_re,
                                  R* out_im) {
  const int64_t m = t.m_begin + mi;
  R re = 0, im = 0;
  if (l >= m) {
    const int64_t k = mi / t.lanes, lane = mi % t.lanes, m0 = t.m_begin + k * t.lanes;
    const int64_t js = t.block_first_row[k], width = t.n_even - js;
    const R* row = t.values + t.block_offset[k] + (l - m0) * width * t.lanes + lane;  // (l, j = js)
    const R sign = ((l - m + t.parity) % 2 == 0) ? R(1) : R(-1);
    const R* xb = X + 2 * (b * t.nlat * t.orders + mi);
    for (int64_t j = js; j < t.n_even; ++j) {
      const R v = row[(j - js) * t.lanes];
      const R* north = xb + 2 * j * t.orders;
      R sr = north[0], si = north[1];
      if (j < t.n_odd) {  // a northern row with its southern mirror (not the equator)
        const R* south = xb + 2 * (t.nlat - 1 - j) * t.orders;
        sr += sign * south[0];
        si += sign * south[1];
      }
      re += v * sr;
      im += v * si;
    }
  }
  *out_re = re;
  *out_im = im;
}

// X[b, j, mi] and its mirror X[b, nlat-1-j, mi] for a northern row j < n_even, from A (batch,
// lmax, orders) interleaved complex. Writes (re, im) of the northern value to north and, when
// j < n_odd, of the southern one to south (the equator row of an odd nlat has no mirror).
template <typename R>
GS_HD inline void to_latitude_pair(const TableView<R>& t, const R* A, int64_t b, int64_t j, int64_t mi, R* north,
                                   R* south) {
  const int64_t m = t.m_begin + mi;
  const int64_t k = mi / t.lanes, lane = mi % t.lanes, m0 = t.m_begin + k * t.lanes;
  const int64_t js = t.block_first_row[k], width = t.n_even - js;
  R er = 0, ei = 0, orr = 0, oi = 0;  // the sums over l with sign +1 (E) and -1 (O)
  if (j >= js) {
    const R* col = t.values + t.block_offset[k] + (j - js) * t.lanes + lane;  // (l = m0, j)
    const R* ab = A + 2 * (b * t.lmax * t.orders + mi);
    for (int64_t l = m; l < t.lmax; ++l) {
      const R v = col[(l - m0) * width * t.lanes];
      const R* a = ab + 2 * l * t.orders;
      if ((l - m + t.parity) % 2 == 0) {
        er += v * a[0];
        ei += v * a[1];
      } else {
        orr += v * a[0];
        oi += v * a[1];
      }
    }
  }
  north[0] = er + orr;
  north[1] = ei + oi;
  if (j < t.n_odd) {
    south[0] = er - orr;
    south[1] = ei - oi;
  }
}

// Flat output indices, the order fastest (consecutive threads read consecutive orders).
// to_degree: i over batch * lmax * orders, writing A's element i.
template <typename R>
GS_HD inline void to_degree_at(const TableView<R>& t, const R* X, R* A, int64_t i) {
  const int64_t mi = i % t.orders, l = (i / t.orders) % t.lmax, b = i / (t.orders * t.lmax);
  to_degree_value(t, X, b, l, mi, A + 2 * i, A + 2 * i + 1);
}
// to_latitude: i over batch * n_even * orders (northern rows), writing a row of X and its mirror.
template <typename R>
GS_HD inline void to_latitude_at(const TableView<R>& t, const R* A, R* X, int64_t i) {
  const int64_t mi = i % t.orders, j = (i / t.orders) % t.n_even, b = i / (t.orders * t.n_even);
  R* xb = X + 2 * (b * t.nlat * t.orders + mi);
  to_latitude_pair(t, A, b, j, mi, xb + 2 * j * t.orders, xb + 2 * (t.nlat - 1 - j) * t.orders);
}

}  // namespace gs::sphere::blocked
