// Spec checks shared by the scalar and vector SHT (sht_common.h).
#include "ops/sphere/sht_common.h"

#include "engine/error.h"
#include "ops/sphere/grids.h"

namespace gs::sphere::detail {

void check_spec(const ShtSpec& spec, const char* op, bool analysis) {
  GS_CHECK(spec.nlat >= 1 && spec.nlon >= 1, "{}: the spec needs nlat >= 1 and nlon >= 1, got {}", op, spec.str());
  GS_CHECK(spec.mmax >= 1 && spec.mmax <= spec.lmax, "{}: the spec needs 1 <= mmax <= lmax, got {}", op, spec.str());
  GS_CHECK(spec.mmax <= spec.nlon / 2 + 1, "{}: the spec's mmax = {} exceeds nlon/2 + 1 = {} ({})", op, spec.mmax,
           spec.nlon / 2 + 1, spec.str());
  try {
    if (analysis) check_lmax_supported(spec.grid, spec.nlat, spec.lmax);
    else max_supported_lmax(spec.grid, spec.nlat);  // checks nlat against the grid
  } catch (const Error& e) {
    fail("{}: {}", op, e.what());
  }
}

}  // namespace gs::sphere::detail
