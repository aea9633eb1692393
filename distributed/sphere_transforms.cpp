// The distributed SHT by transposes (sphere_transforms.h). Fields are flattened to (N, [2,] rows,
// cols) so that the transposes can split N, the fields; `lat` and `lon` are the dims of rows and
// columns (2 and 3 with the vector's component dim, else 1 and 2).
#include "distributed/sphere_transforms.h"

#include "distributed/collectives.h"
#include "distributed/pipelined_sht.h"
#include "engine/error.h"
#include "ops/sphere/fft.h"
#include "ops/sphere/vector_sht.h"
#include "ops/view.h"

namespace gs::dist {
namespace {

using sphere::ShtSpec;

// The flattened layout of one call: x reshaped to (N, [2,] a, b), and the shape to restore.
struct Fields {
  Tensor x;
  Shape lead;  // the leading dims that were flattened into N
  int64_t lat = 1, lon = 2;
};

Fields flatten_fields(const Tensor& x, bool vector, const char* op) {
  const int64_t trailing = vector ? 3 : 2;
  GS_CHECK(x.defined() && x.dim() >= trailing, "dist::{}: expected a tensor of shape (..., {}rows, cols), got {}", op,
           vector ? "2, " : "", x.defined() ? x.meta_str() : "an undefined tensor");
  Fields f;
  f.lead.assign(x.sizes().begin(), x.sizes().end() - trailing);
  Shape flat{numel_of(f.lead)};
  for (int64_t d = x.dim() - trailing; d < x.dim(); ++d) flat.push_back(x.size(d));
  f.x = x.sizes() == flat ? x : reshape(x, flat);  // already flat: no reshape node
  f.lat = trailing - 1;
  f.lon = trailing;
  return f;
}

Tensor unflatten_fields(const Tensor& y, const Fields& f) {
  Shape out = f.lead;
  for (int64_t d = 1; d < y.dim(); ++d) out.push_back(y.size(d));
  return y.sizes() == out ? y : reshape(y, out);
}

void check_tile(const Tensor& x, int64_t rows, int64_t cols, const char* what, const char* op, const ShtSpec& spec,
                const ProcessGrid& grid) {
  GS_CHECK(x.size(-2) == rows && x.size(-1) == cols,
           "dist::{}: expected {} of this rank's tile (..., {}, {}) of {} on grid {}, got {}", op, what, rows, cols,
           spec.str(), grid.str(), x.meta_str());
}

Tensor analysis(const Tensor& input, const ShtSpec& spec, const ProcessGrid& grid, bool vector, const char* op) {
  check_tile(input, grid.local_lat(spec.nlat).count, grid.local_lon(spec.nlon).count, "a field", op, spec, grid);
  Fields f = flatten_fields(input, vector, op);
  const bool split_w = grid.w_size() > 1, split_h = grid.h_size() > 1;  // (a layout-only grid has no communicators)
  const int64_t n = f.x.size(0);
  if (const int64_t chunks = sht_pipeline_chunks_for(grid); chunks > 1)
    return unflatten_fields(pipelined_analysis(f.x, spec, grid, vector, chunks), f);
  Tensor x = f.x;
  if (split_w) x = transpose(x, f.lon, 0, spec.nlon, grid.comm(Group::w));  // full rows of some fields
  Tensor X = sphere::rfft_lon(x, spec.mmax);
  if (split_w) X = transpose(X, 0, f.lon, n, grid.comm(Group::w));  // every field, this rank's orders
  if (split_h) X = transpose(X, f.lat, 0, spec.nlat, grid.comm(Group::h));  // full columns of some fields
  const int64_t m0 = local_orders(grid, spec.mmax).start;
  Tensor A = vector ? sphere::vector_legendre_analysis_orders(X, spec, m0) : sphere::legendre_analysis_orders(X, spec, m0);
  if (split_h) A = transpose(A, 0, f.lat, n, grid.comm(Group::h));  // every field, this rank's degrees
  return unflatten_fields(A, f);
}

Tensor synthesis(const Tensor& coeffs, const ShtSpec& spec, const ProcessGrid& grid, bool vector, const char* op) {
  check_tile(coeffs, local_degrees(grid, spec.lmax).count, local_orders(grid, spec.mmax).count, "coefficients", op,
             spec, grid);
  Fields f = flatten_fields(coeffs, vector, op);
  const bool split_w = grid.w_size() > 1, split_h = grid.h_size() > 1;
  const int64_t n = f.x.size(0);
  if (const int64_t chunks = sht_pipeline_chunks_for(grid); chunks > 1)
    return unflatten_fields(pipelined_synthesis(f.x, spec, grid, vector, chunks), f);
  Tensor A = f.x;
  if (split_h) A = transpose(A, f.lat, 0, spec.lmax, grid.comm(Group::h));  // every degree of some fields
  const int64_t m0 = local_orders(grid, spec.mmax).start;
  Tensor X = vector ? sphere::vector_legendre_synthesis_orders(A, spec, m0) : sphere::legendre_synthesis_orders(A, spec, m0);
  if (split_h) X = transpose(X, 0, f.lat, n, grid.comm(Group::h));  // every field, this rank's rows
  if (split_w) X = transpose(X, f.lon, 0, spec.mmax, grid.comm(Group::w));  // every order of some fields
  Tensor x = sphere::irfft_lon(X, spec.nlon);
  if (split_w) x = transpose(x, 0, f.lon, n, grid.comm(Group::w));  // every field, this rank's columns
  return unflatten_fields(x, f);
}

void check_real(const Tensor& x, const char* op) {
  GS_CHECK(x.defined() && is_floating(x.dtype()), "dist::{}: expected a real field (f32 or f64), got {}", op,
           x.defined() ? x.meta_str() : "an undefined tensor");
}
void check_complex(const Tensor& c, const char* op) {
  GS_CHECK(c.defined() && is_complex(c.dtype()), "dist::{}: expected complex coefficients (c64 or c128), got {}", op,
           c.defined() ? c.meta_str() : "an undefined tensor");
}

}  // namespace

Block local_degrees(const ProcessGrid& grid, int64_t lmax) { return split_block(lmax, grid.h_size(), grid.h_rank()); }
Block local_orders(const ProcessGrid& grid, int64_t mmax) { return split_block(mmax, grid.w_size(), grid.w_rank()); }

Tensor sht(const Tensor& x, const ShtSpec& spec, const ProcessGrid& grid) {
  check_real(x, "sht");
  return analysis(x, spec, grid, false, "sht");
}

Tensor isht(const Tensor& coeffs, const ShtSpec& spec, const ProcessGrid& grid) {
  check_complex(coeffs, "isht");
  return synthesis(coeffs, spec, grid, false, "isht");
}

Tensor vector_sht(const Tensor& uv, const ShtSpec& spec, const ProcessGrid& grid) {
  check_real(uv, "vector_sht");
  GS_CHECK(uv.dim() >= 3 && uv.size(-3) == 2, "dist::vector_sht: expected a vector field (..., 2, rows, cols), got {}",
           uv.meta_str());
  return analysis(uv, spec, grid, true, "vector_sht");
}

Tensor ivector_sht(const Tensor& coeffs, const ShtSpec& spec, const ProcessGrid& grid) {
  check_complex(coeffs, "ivector_sht");
  GS_CHECK(coeffs.dim() >= 3 && coeffs.size(-3) == 2,
           "dist::ivector_sht: expected vector coefficients (..., 2, degrees, orders), got {}", coeffs.meta_str());
  return synthesis(coeffs, spec, grid, true, "ivector_sht");
}

size_t sht_table_bytes(const ShtSpec& spec, DType dtype, bool analysis, bool vector, const ProcessGrid& grid) {
  const Block m = local_orders(grid, spec.mmax);
  return vector ? sphere::vector_sht_table_bytes(spec, dtype, analysis, m.start, m.count)
                : sphere::sht_table_bytes(spec, dtype, analysis, m.start, m.count);
}

size_t sht_min_bytes_sent(const ShtSpec& spec, int64_t fields, DType dtype, const ProcessGrid& grid) {
  const double h = static_cast<double>(grid.h_size()), w = static_cast<double>(grid.w_size());
  const double real = static_cast<double>(dtype_size(dtype)), cplx = 2 * real, n = static_cast<double>(fields);
  const double tile = 1.0 / (h * w);  // a rank's share of any even split over the spatial group
  double bytes = 0;
  if (w > 1) bytes += (n * spec.nlat * spec.nlon * real + n * spec.nlat * spec.mmax * cplx) * tile * (w - 1) / w;
  if (h > 1) bytes += (n * spec.nlat * spec.mmax * cplx + n * spec.lmax * spec.mmax * cplx) * tile * (h - 1) / h;
  return static_cast<size_t>(bytes);
}

}  // namespace gs::dist
