// The Legendre contractions on a cached table (table.h): the path cpu_table of path.h. Internal
// to ops/sphere/legendre/ (and its tests); the on-the-fly alternative is recurrence.h, and
// contraction.cpp picks one per call by path.h's rule. Decisions in ops/sphere/NOTES.md, section "SHT", "Kernel".
//
//   to_degree:   A (B, lmax, mmax) [l,m] = sum_j T_m[l,j] X (B, nlat, mmax) [j,m]   (0 where l < m)
//   to_latitude: X (B, nlat, mmax) [j,m] = sum_{l>=m} T_m[l,j] A (B, lmax, mmax) [l,m]
// For a table of a slice of the orders (LegendreTableKey::m_begin, m_end) the data has the slice's
// columns only (mmax above is then order_count()).
//
// to_degree reads and writes the data in place: a register holds one block of the table's orders
// (4 complex f64 or 8 complex f32 values of consecutive m, as they lie in the data), and each table
// value, loaded once and duplicated into the re/im lanes, multiplies the values of several fields
// and degrees held in registers. to_latitude packs each block's degrees of A once per pair of
// fields (real parts, then imaginary parts, each twice over), so that a plain table load serves
// two rows without duplicating anything. Results do not depend on the thread count.
#pragma once
#include <complex>
#include <cstdint>

#include "ops/sphere/legendre/table.h"

namespace gs::sphere {

void table_to_degree(const LegendreTable& tab, const std::complex<float>* X, std::complex<float>* A, int64_t batch);
void table_to_degree(const LegendreTable& tab, const std::complex<double>* X, std::complex<double>* A, int64_t batch);
void table_to_latitude(const LegendreTable& tab, const std::complex<float>* A, std::complex<float>* X,
                       int64_t batch);
void table_to_latitude(const LegendreTable& tab, const std::complex<double>* A, std::complex<double>* X,
                       int64_t batch);

}  // namespace gs::sphere
