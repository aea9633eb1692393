// The SHT on blocks of fields (sht_blocks.h).
#include "ops/sphere/sht_blocks.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <vector>

#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/composite_path.h"
#include "ops/kernels.h"
#include "ops/sphere/fft.h"
#include "ops/sphere/lane_fft.h"
#include "ops/sphere/legendre/contraction.h"
#include "ops/sphere/sht_common.h"
#include "ops/view.h"

namespace gs::sphere::detail {
namespace {

using legendre::Direction;

std::atomic<int64_t> g_block_bytes{kShtBlockBytes};

}  // namespace

int64_t set_sht_block_bytes(int64_t bytes) {
  GS_CHECK(bytes >= 1, "set_sht_block_bytes: expected a positive number of bytes, got {}", bytes);
  return g_block_bytes.exchange(bytes);
}

int64_t sht_fields_per_block(const ShtSpec& spec, DType real) {
  const int64_t field_bytes = spec.nlat * spec.mmax * 2 * static_cast<int64_t>(dtype_size(real));
  return std::max<int64_t>(2, g_block_bytes.load() / std::max<int64_t>(field_bytes, 1));
}

namespace {

// The number of fields of t (its leading dims), or 0 where the blocks do not apply.
int64_t blocked_batch(const Tensor& t, const ShtSpec& spec, DType real) {
  if (t.device().type != DeviceType::cpu || composite_path(t) || should_record({t})) return 0;
  const int64_t batch = t.numel() / (t.size(-2) * t.size(-1));
  return batch > sht_fields_per_block(spec, real) ? batch : 0;
}

// Runs stage(in block, scratch, out block) over blocks of the leading (flattened) dim; scratch is
// (per_block, rows, cols) of `dt`, one per thread. With at least two blocks per thread the blocks
// are spread over the threads (each runs both stages on its own blocks, in its own L2; the stages'
// kernels then run on one thread); otherwise the blocks go in turn and each stage splits its work
// over the threads as it does for a whole batch.
template <typename Stage>
void over_blocks(const Tensor& in, const Tensor& out, int64_t batch, int64_t per_block, Shape scratch_sizes, DType dt,
                 Stage&& stage) {
  const int64_t n_blocks = (batch + per_block - 1) / per_block;
  const int threads = omp_in_parallel() ? 1 : omp_get_max_threads();
  const bool spread = threads > 1 && n_blocks >= 2 * threads;
  std::vector<Tensor> scratch;
  for (int t = 0; t < (spread ? threads : 1); ++t) scratch.push_back(empty(scratch_sizes, dt, in.device()));
  auto run = [&](int64_t k, int t) {
    const int64_t b0 = k * per_block, nb = std::min(per_block, batch - b0);
    stage(narrow(in, 0, b0, nb), narrow(scratch[static_cast<size_t>(t)], 0, 0, nb), narrow(out, 0, b0, nb));
  };
  if (!spread) {
    for (int64_t k = 0; k < n_blocks; ++k) run(k, 0);
    return;
  }
  // No exception may leave an OpenMP region: the first one is kept and thrown after it.
  std::exception_ptr error;
  std::mutex error_mutex;
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(dynamic, 1)
    for (int64_t k = 0; k < n_blocks; ++k) {
      try {
        run(k, omp_get_thread_num());
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  }
  if (error) std::rethrow_exception(error);
}

}  // namespace

namespace {

// The grouped route (fft.h, rfft_lon_groups): the fields' spectra pass between the longitude FFT
// and the on-the-fly Legendre kernels in the FFT's own lane layout, (fields, G, 2 mmax, L) reals
// per block, instead of as X (fields, nlat, mmax) complex: the FFT copies its lanes out as they
// are and the kernels read a chunk's orders of a group as one run, where the X layout needs a
// transpose on each side. It applies to CPU fields under no tape whose contraction takes the
// on-the-fly path and whose longitudes the lane FFT handles; the values are those of the X route,
// bit for bit (tests/ops/test_sht_groups.cpp).
// Returns the number of fields, or 0 where the route does not apply.
int64_t groups_batch(const Tensor& t, const ShtSpec& spec, DType real, LegendreTableKind kind) {
  if (t.device().type != DeviceType::cpu || composite_path(t) || should_record({t}) ||
      !lane_fft_supports(spec.nlon) || t.numel() == 0)
    return 0;
  const int64_t batch = t.numel() / (t.size(-2) * t.size(-1));
  const int64_t block = std::min(batch, sht_fields_per_block(spec, real));
  return legendre::takes_groups(t, table_key(spec, kind, real), block) ? batch : 0;
}

Shape with_last_two(const Tensor& t, int64_t a, int64_t b) {
  Shape sizes(t.sizes().begin(), t.sizes().end() - 2);
  sizes.push_back(a);
  sizes.push_back(b);
  return sizes;
}

Tensor sht_by_groups(const Tensor& x, const ShtSpec& spec) {
  const int64_t batch = groups_batch(x, spec, x.dtype(), LegendreTableKind::analysis);
  if (batch == 0) return {};
  const Tensor xc = view(contiguous_copy(x), {batch, spec.nlat, spec.nlon});
  const LegendreTableKey key = table_key(spec, LegendreTableKind::analysis, x.dtype());
  const int64_t per_block = sht_fields_per_block(spec, x.dtype());
  Tensor out = empty({batch, spec.lmax, spec.mmax}, complex_dtype(x.dtype()), x.device());
  over_blocks(xc, out, batch, per_block, grouped_spectra_shape(per_block, spec.nlat, spec.mmax, x.dtype()), x.dtype(),
              [&](const Tensor& xb, const Tensor& pb, const Tensor& ob) {
    rfft_lon_groups(xb, pb);
    legendre::contract_groups(key, Direction::to_degree, pb, ob);
  });
  return view(out, with_last_two(x, spec.lmax, spec.mmax));
}

Tensor isht_by_groups(const Tensor& coeffs, const ShtSpec& spec) {
  const DType real = real_dtype(coeffs.dtype());
  const int64_t batch = groups_batch(coeffs, spec, real, LegendreTableKind::synthesis);
  if (batch == 0) return {};
  const Tensor ac = view(contiguous_copy(coeffs), {batch, spec.lmax, spec.mmax});
  const LegendreTableKey key = table_key(spec, LegendreTableKind::synthesis, real);
  const int64_t per_block = sht_fields_per_block(spec, real);
  Tensor out = empty({batch, spec.nlat, spec.nlon}, real, coeffs.device());
  over_blocks(ac, out, batch, per_block, grouped_spectra_shape(per_block, spec.nlat, spec.mmax, real), real,
              [&](const Tensor& ab, const Tensor& pb, const Tensor& ob) {
    legendre::contract_groups(key, Direction::to_latitude, pb, ab);
    irfft_lon_groups(pb, ob);
  });
  return view(out, with_last_two(coeffs, spec.nlat, spec.nlon));
}

}  // namespace

Tensor sht_in_blocks(const Tensor& x, const ShtSpec& spec) {
  if (Tensor grouped = sht_by_groups(x, spec); grouped.defined()) return grouped;
  const int64_t batch = blocked_batch(x, spec, x.dtype());
  if (batch == 0) return {};
  const Tensor xc = view(contiguous_copy(x), {batch, spec.nlat, spec.nlon});
  const LegendreTableKey key = table_key(spec, LegendreTableKind::analysis, x.dtype());
  const int64_t per_block = sht_fields_per_block(spec, x.dtype());
  const DType cdt = complex_dtype(x.dtype());
  Tensor out = empty({batch, spec.lmax, spec.mmax}, cdt, x.device());
  over_blocks(xc, out, batch, per_block, {per_block, spec.nlat, spec.mmax}, cdt,
              [&](const Tensor& xb, const Tensor& cb, const Tensor& ob) {
    rfft_lon_into(xb, cb);
    legendre::contract_into(cb, {key}, Direction::to_degree, ob);
  });
  Shape sizes(x.sizes().begin(), x.sizes().end() - 2);
  sizes.push_back(spec.lmax);
  sizes.push_back(spec.mmax);
  return view(out, sizes);
}

Tensor isht_in_blocks(const Tensor& coeffs, const ShtSpec& spec) {
  if (Tensor grouped = isht_by_groups(coeffs, spec); grouped.defined()) return grouped;
  const DType real = real_dtype(coeffs.dtype());
  const int64_t batch = blocked_batch(coeffs, spec, real);
  if (batch == 0) return {};
  const Tensor ac = view(contiguous_copy(coeffs), {batch, spec.lmax, spec.mmax});
  const LegendreTableKey key = table_key(spec, LegendreTableKind::synthesis, real);
  const int64_t per_block = sht_fields_per_block(spec, real);
  Tensor out = empty({batch, spec.nlat, spec.nlon}, real, coeffs.device());
  over_blocks(ac, out, batch, per_block, {per_block, spec.nlat, spec.mmax}, coeffs.dtype(),
              [&](const Tensor& ab, const Tensor& cb, const Tensor& ob) {
    legendre::contract_into(ab, {key}, Direction::to_latitude, cb);
    irfft_lon_into(cb, ob);
  });
  Shape sizes(coeffs.sizes().begin(), coeffs.sizes().end() - 2);
  sizes.push_back(spec.nlat);
  sizes.push_back(spec.nlon);
  return view(out, sizes);
}

}  // namespace gs::sphere::detail
