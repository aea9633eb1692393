// The Legendre contraction: the one entry through which the SHT, the vector SHT and their
// distributed forms reach a Legendre table. It takes the input, a reference to the table
// (its key and whether the data is scalar or a vector field's two components) and a direction,
// picks the kernels by the one rule of path.h, runs them, and records the contraction on the
// tape with the opposite direction as its backward (the adjoint), so derivatives of every order
// come from this one function. Nothing outside ops/sphere/legendre/ knows the paths.
//
//   to_degree   (..., [2,] nlat, orders) -> (..., [2,] lmax, orders)   A[l,m] = sum_j T_m[l,j] X[j,m]
//   to_latitude (..., [2,] lmax, orders) -> (..., [2,] nlat, orders)   X[j,m] = sum_l T_m[l,j] A[l,m]
//
// Scalar data uses the table Pbar_l^m (times w_j for analysis); vector data (u, v components, or
// the two spheroidal/toroidal coefficient sets) uses the derivative tables D and M of
// vector_table.h, combined as vector_table.h says. With a real table, to_latitude with table T is
// the adjoint of to_degree with the same T (PyTorch's complex-gradient convention), which is why
// one table serves a transform and its backward. Orders: the key may hold a slice of the orders
// [m_begin, m_end) (a rank's block in the distributed SHT); the data then has that many columns.
#pragma once
#include <cstddef>

#include "engine/tensor.h"
#include "ops/sphere/legendre/table.h"

namespace gs::sphere::legendre {

enum class Direction { to_degree, to_latitude };
inline Direction flip(Direction d) { return d == Direction::to_degree ? Direction::to_latitude : Direction::to_degree; }

enum class Components { scalar, vector };

struct TableRef {
  LegendreTableKey key;
  Components components = Components::scalar;
};

// The recorded contraction of x with the table `table` in direction `dir`. Shapes and dtypes are
// the caller's to check (the public ops say what they expected); an empty x gives an empty result.
Tensor contract(const Tensor& x, const TableRef& table, Direction dir);

// The contraction of `contract` written into `out` (contiguous, the result's shape and dtype) and
// recorded nowhere, for composites that run it on blocks of fields under no tape. Throws where the
// contraction would not take a CPU path (path.h: a device tensor, a composite-path scope).
void contract_into(const Tensor& x, const TableRef& table, Direction dir, const Tensor& out);

// The grid side as the longitude FFT's grouped spectra (fft.h, rfft_lon_groups): whether a scalar
// contraction of x (`batch` fields, its table `key`) takes the on-the-fly path, where the groups
// forms below apply; then that contraction between groups (batch, ceil(nlat / L), 2 mmax, L) and
// spectral (batch, lmax, mmax), contiguous CPU tensors of one precision: to_degree reads groups
// into spectral, to_latitude writes groups from spectral (their padding rows zero). Recorded
// nowhere, like contract_into.
bool takes_groups(const Tensor& x, const LegendreTableKey& key, int64_t batch);
void contract_groups(const LegendreTableKey& key, Direction dir, const Tensor& groups, const Tensor& spectral);

// The bytes of the table(s) a contraction with `table` reads on the CPU (built if needed).
size_t table_bytes(const TableRef& table);

}  // namespace gs::sphere::legendre

namespace gs::sphere {

// Drops every cache of the Legendre family: the scalar and vector tables, the recurrence plans and
// the device copies (dense and blocked). Tensors already handed out (saved in a graph) keep their
// storage; a later lookup builds afresh. Returns the bytes the caches held.
size_t clear_legendre_cache();

}  // namespace gs::sphere
