// The SHT and its inverse on blocks of fields: the CPU path of sht / isht for a large batch when no
// tape is recorded (inference, rollouts, evaluation). Internal to ops/sphere.
//
// Why: sht is rfft_lon then the Legendre analysis, each over the whole batch, so the longitude
// coefficients between them (nlat x mmax complex values a field: 4 MB for 64 fields at 64x128)
// go out to memory and come back. Run one block of fields at a time through both stages and
// they stay in L2 (one buffer, reused); only the input and the result cross memory. At
// legendre-gauss 64x128, 64 fields, one thread, sht took 0.84x the time and isht 0.76x
// (ops/BENCHMARKS.md, "Issue 33, the last SHT steps"). The values are those of the two stages:
// each field goes through the same kernels, which treat fields independently, so on a forced
// Legendre path they are the same to the bit; the automatic path may pick the other kernels for a
// block than for the whole batch (path.h), and the two agree to rounding.
//
// Where the Legendre stage runs on the fly (path.h) and the lane FFT handles the longitudes, the
// stages also skip the X layout between them, for any batch (one block or several): the FFT's
// lanes go to the recurrence kernels as they are ("grouped", fft.h rfft_lon_groups), which saves a
// transpose on each side (ops/sphere/NOTES.md, "The grouped route"). Same values, bit for bit.
//
// With a tape (a field that requires grad or carries a tangent) the two stages stay two recorded
// ops over the whole batch, as their backward expects.
#pragma once
#include "engine/tensor.h"
#include "ops/sphere/sht.h"

namespace gs::sphere::detail {

// Fields per block: as many as keep a block's longitude coefficients (nlat x mmax complex values a
// field) within the block bytes, and at least two (the on-the-fly kernels march the recurrence once
// for two fields). The bytes: half of this machine's 1 MB L2 by default, leaving room for the rows
// the kernels stream (256 KB to 1 MB measured alike at 64x128 and 180x360); settable for tests.
inline constexpr int64_t kShtBlockBytes = int64_t{512} << 10;
int64_t sht_fields_per_block(const ShtSpec& spec, DType real);
int64_t set_sht_block_bytes(int64_t bytes);  // returns the previous setting (process-wide)

// sht(x, spec) / isht(coeffs, spec) computed block by block (on the grouped route, for a batch of
// any size), or an undefined tensor where that does not apply (a device tensor, a composite path,
// a tape, or a batch that is one block off the grouped route). The arguments are already checked.
Tensor sht_in_blocks(const Tensor& x, const ShtSpec& spec);
Tensor isht_in_blocks(const Tensor& coeffs, const ShtSpec& spec);

}  // namespace gs::sphere::detail
