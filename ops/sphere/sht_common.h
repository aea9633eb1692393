// Pieces shared by the scalar SHT (sht.cpp) and the vector SHT (vector_sht.cpp): the spec checks,
// the table key and the registry samples. Internal to ops/sphere.
#pragma once
#include <functional>
#include <vector>

#include "engine/dtype.h"
#include "ops/registry.h"
#include "ops/sphere/legendre/table.h"
#include "ops/sphere/sht.h"

namespace gs::sphere::detail {

// Throws unless `spec` describes a transform; `analysis` also requires the grid to resolve lmax
// (synthesis is well defined for any lmax). Messages start with `op`.
void check_spec(const ShtSpec& spec, const char* op, bool analysis);

// The key of the spec's table; m_count >= 0 restricts it to orders [m_begin, m_begin + m_count).
inline LegendreTableKey table_key(const ShtSpec& spec, LegendreTableKind kind, DType real, int64_t m_begin = 0,
                                  int64_t m_count = -1) {
  return LegendreTableKey{spec.grid, spec.nlat, spec.lmax, spec.mmax, spec.norm, spec.csphase, kind, real, m_begin,
                          m_count < 0 ? -1 : m_begin + m_count}
      .canonical();
}

// The bytes of the table(s) of one direction (a slice of the orders when m_count >= 0; 0 for an
// empty slice): sht_table_bytes and vector_sht_table_bytes. `op` names the caller in errors.
size_t table_bytes(const ShtSpec& spec, DType dtype, bool analysis, int64_t m_begin, int64_t m_count, bool vector,
                   const char* op);

// Throws unless orders [m_begin, m_begin + m_count) lie within the spec's 0 .. mmax - 1 (m_count may be 0).
void check_order_block(const ShtSpec& spec, int64_t m_begin, int64_t m_count, const char* op);

// ---- registry samples: one small transform per grid, odd and even nlat, with distinct shapes so
// that a registry function can tell from its input which spec the sample was made for.

// The spec whose grid (nlat, nlon or mmax columns) / coefficients (lmax, mmax) have x's last two dims.
const ShtSpec& sample_spec_by_grid_shape(const Tensor& x);
const ShtSpec& sample_spec_by_coeff_shape(const Tensor& x);

// One sample per spec, (2, [2,] rows(spec), cols(spec)) (the 2 components of a vector field when
// `vector`), the first non-contiguous.
using SpecSize = std::function<int64_t(const ShtSpec&)>;
std::vector<OpSample> sht_samples(RandomKey k, DType dtype, bool vector, const SpecSize& rows, const SpecSize& cols);
inline int64_t nlat_of(const ShtSpec& s) { return s.nlat; }
inline int64_t nlon_of(const ShtSpec& s) { return s.nlon; }
inline int64_t lmax_of(const ShtSpec& s) { return s.lmax; }
inline int64_t mmax_of(const ShtSpec& s) { return s.mmax; }

}  // namespace gs::sphere::detail
