// The vector SHT's derivative tables: per order m, D = dPbar_l^m/dtheta and M = m Pbar_l^m /
// sin(theta) (Condon-Shortley sign included; for analysis times w_j / (l(l+1))), each stored like
// the scalar tables (table.h: blocked orders, northern rows, equatorial parity 1 for D, 0 for M).
// The contraction (contraction.h) applies both to the two components and combines them:
//   to_degree:   S = D X0 - i M X1,           T = -i M X0 - D X1         (sum over rows j)
//   to_latitude: X0 = D^T S + i M^T T,        X1 = i M^T S - D^T T       (sum over degrees l)
// As complex-linear maps, to_latitude with tables (D, M) is the adjoint of to_degree with the same
// tables, so each direction is the other's backward. Derivation: ops/sphere/NOTES.md, "Vector SHT".
#pragma once
#include <cstddef>
#include <memory>

#include "ops/sphere/legendre/table.h"

namespace gs::sphere {

// The tables of one (grid, nlat, lmax, mmax, norm, csphase, kind, dtype, orders). Read-only.
struct VectorTable {
  LegendreTableKey key;
  std::shared_ptr<const LegendreTable> d, m;
  size_t nbytes() const { return d->nbytes() + m->nbytes(); }
};

// The tables for `key`, built on first use and cached like the scalar tables (one KeyedCache;
// dropped by clear_legendre_cache).
std::shared_ptr<const VectorTable> vector_table_cached(const LegendreTableKey& key);
size_t clear_vector_tables();

}  // namespace gs::sphere
