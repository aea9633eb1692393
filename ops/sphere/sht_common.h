// Pieces shared by the scalar SHT (sht.cpp) and the vector SHT (vector_sht.cpp): the direction of a
// Legendre contraction, the spec checks and the table key. Internal to ops/sphere.
#pragma once
#include "engine/dtype.h"
#include "ops/sphere/legendre_cache.h"
#include "ops/sphere/sht.h"

namespace gs::sphere::detail {

// to_degree: grid rows -> degrees (analysis and synthesis' adjoint); to_latitude: the reverse.
enum class Direction { to_degree, to_latitude };

inline Direction flip(Direction d) {
  return d == Direction::to_degree ? Direction::to_latitude : Direction::to_degree;
}

// Throws unless `spec` describes a transform; `analysis` also requires the grid to resolve lmax
// (synthesis is well defined for any lmax). Messages start with `op`.
void check_spec(const ShtSpec& spec, const char* op, bool analysis);

inline LegendreTableKey table_key(const ShtSpec& spec, LegendreTableKind kind, DType real) {
  return {spec.grid, spec.nlat, spec.lmax, spec.mmax, spec.norm, spec.csphase, kind, real};
}

}  // namespace gs::sphere::detail
