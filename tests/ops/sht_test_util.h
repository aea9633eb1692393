// Shared by the SHT route tests (test_sht_blocks.cpp, test_sht_groups.cpp): values as c128 for
// bitwise comparison, and a scope that sets the Legendre path, the thread count and the block size.
#pragma once
#include <omp.h>

#include <complex>
#include <vector>

#include "ops/ops.h"
#include "ops/sphere/legendre/path.h"
#include "ops/sphere/sht_blocks.h"

namespace gs_test {

inline std::vector<gs::c128> as_c128(const gs::Tensor& t) {
  return gs::cast_copy(gs::is_complex(t.dtype()) ? t : gs::complex(t, gs::zeros_like(t)), gs::DType::c128)
      .to_vector<gs::c128>();
}

struct ShtSettings {
  gs::sphere::LegendrePath path_before;
  int threads_before;
  int64_t bytes_before;
  ShtSettings(gs::sphere::LegendrePath path, int threads, int64_t block_bytes)
      : path_before(gs::sphere::set_legendre_path(path)),
        threads_before(omp_get_max_threads()),
        bytes_before(gs::sphere::detail::set_sht_block_bytes(block_bytes)) {
    omp_set_num_threads(threads);
  }
  ~ShtSettings() {
    gs::sphere::set_legendre_path(path_before);
    omp_set_num_threads(threads_before);
    gs::sphere::detail::set_sht_block_bytes(bytes_before);
  }
  ShtSettings(const ShtSettings&) = delete;
  ShtSettings& operator=(const ShtSettings&) = delete;
};

}  // namespace gs_test
