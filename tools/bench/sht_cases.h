// What `bench sht` (CPU) and `bench sht --device cuda` share: the cases and the flop count.
#pragma once
#include <fmt/core.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/error.h"

#include "ops/sphere/grids.h"
#include "ops/sphere/sht.h"

namespace gs::tools {

struct ShtCase {
  sphere::GridKind grid;
  int64_t nlat, nlon, batch;
};

// The sizes on both grid families, batched so that the bigger grids get fewer fields;
// `quick` is one tiny case for the smoke tests.
inline std::vector<ShtCase> sht_bench_cases(bool quick) {
  using sphere::GridKind;
  if (quick) return {{GridKind::legendre_gauss, 16, 32, 4}};
  return {{GridKind::equiangular, 64, 128, 64},    {GridKind::equiangular, 181, 360, 16},
          {GridKind::equiangular, 361, 720, 4},    {GridKind::equiangular, 721, 1440, 1},
          {GridKind::legendre_gauss, 64, 128, 64}, {GridKind::legendre_gauss, 180, 360, 16},
          {GridKind::legendre_gauss, 360, 720, 4}, {GridKind::legendre_gauss, 720, 1440, 1}};
}

// The cases to run: all of sht_bench_cases, or only the one `name` gives (GRID:NLATxNLON, bench
// sht --case); an unknown name is an error that lists the cases.
inline std::vector<ShtCase> selected_sht_cases(bool quick, const std::string& name) {
  std::vector<ShtCase> all = sht_bench_cases(quick);
  if (name.empty()) return all;
  std::string names;
  for (const ShtCase& c : all) {
    const std::string case_name = fmt::format("{}:{}x{}", sphere::grid_name(c.grid), c.nlat, c.nlon);
    if (case_name == name) return {c};
    names += (names.empty() ? "" : ", ") + case_name;
  }
  GS_CHECK(false, "bench sht --case: expected one of {}, got '{}'", names, name);
  return {};
}

// The dense, non-symmetric complex-by-real Legendre contraction's flops for one call on `batch`
// fields: 2 * 2 * batch * sum_{m<mmax} (lmax - m) * nlat.
inline double legendre_contraction_flops(const sphere::ShtSpec& spec, int64_t batch) {
  double sum_l = 0;
  for (int64_t m = 0; m < spec.mmax; ++m) sum_l += static_cast<double>(std::max<int64_t>(0, spec.lmax - m));
  return 2.0 * 2.0 * static_cast<double>(batch) * sum_l * static_cast<double>(spec.nlat);
}

}  // namespace gs::tools
