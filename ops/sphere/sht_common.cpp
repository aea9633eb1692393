// Spec checks and registry samples shared by the scalar and vector SHT (sht_common.h).
#include "ops/sphere/sht_common.h"

#include "engine/error.h"
#include "ops/sphere/grids.h"
#include "ops/sphere/legendre/contraction.h"

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

void check_order_block(const ShtSpec& spec, int64_t m_begin, int64_t m_count, const char* op) {
  GS_CHECK(m_begin >= 0 && m_count >= 0 && m_begin + m_count <= spec.mmax,
           "{}: expected a block of orders within 0 .. mmax - 1 = {} ({}), got {} orders from m = {}", op,
           spec.mmax - 1, spec.str(), m_count, m_begin);
}

namespace {
const ShtSpec kSampleSpecs[] = {
    {GridKind::legendre_gauss, 4, 6, 4, 3, Normalization::ortho, true},
    {GridKind::equiangular, 7, 8, 4, 4, Normalization::ortho, true},
    {GridKind::lobatto, 6, 6, 5, 4, Normalization::ortho, true},  // mmax = nlon/2 + 1: the Nyquist order
};
}  // namespace

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

std::vector<OpSample> sht_samples(RandomKey k, DType dtype, bool vector, const SpecSize& rows, const SpecSize& cols) {
  std::vector<OpSample> out;
  uint64_t stream = 1;
  for (const ShtSpec& s : kSampleSpecs) {
    Shape sizes{2};
    if (vector) sizes.push_back(2);
    sizes.push_back(rows(s));
    sizes.push_back(cols(s));
    const RandomKey key = sub_key(k, stream++);
    if (stream == 2)
      out.push_back({std::string(grid_name(s.grid)) + " non-contiguous", {sample_leaf_transposed(sizes, key, dtype)}});
    else out.push_back({std::string(grid_name(s.grid)), {sample_leaf(sizes, key, dtype)}});
  }
  return out;
}

size_t table_bytes(const ShtSpec& spec, DType dtype, bool analysis, int64_t m_begin, int64_t m_count, bool vector,
                   const char* op) {
  GS_CHECK(is_floating(dtype), "{}: expected f32 or f64, got {}", op, dtype_name(dtype));
  if (m_count == 0) return 0;
  const auto kind = analysis ? LegendreTableKind::analysis : LegendreTableKind::synthesis;
  return legendre::table_bytes(
      {table_key(spec, kind, dtype, m_begin, m_count), vector ? legendre::Components::vector : legendre::Components::scalar});
}

}  // namespace gs::sphere::detail
