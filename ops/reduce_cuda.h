// Launcher of the CUDA reduction (ops/reduce_cuda.cu): sum (times `scale`, for mean), max, min.
// Deterministic: every output is folded by a fixed tree (thread strides, then shared memory,
// then the partials of a split output in order), so a rerun gives the same bits.
#pragma once
#include "engine/dtype_code.h"
#include "engine/strided_index.h"

namespace gs::cuda_kernels {

enum class ReduceKind : uint8_t { sum, max, min };

// The work split of one reduction: `splits` blocks per output when the outputs are too few to
// fill the GPU, each writing one partial to a scratch buffer of outputs * splits accumulators.
struct ReduceSplit {
  int64_t splits = 1;
  int64_t scratch_bytes = 0;
};
// Planned on the host (the op allocates the scratch): enough blocks to fill the GPU several times
// over (H100/H200: 132 SMs), each chunk at least kMinChunk elements so a block's work is worth
// its launch.
inline constexpr int64_t kTargetBlocks = 1024;
inline constexpr int64_t kMinChunk = 16384;
inline ReduceSplit plan_reduce_split(ReduceKind kind, DType dtype, int64_t n_out, int64_t n_in) {
  ReduceSplit r;
  if (n_out >= kTargetBlocks || n_in < 2 * kMinChunk) return r;
  const int64_t by_blocks = (kTargetBlocks + n_out - 1) / n_out;
  const int64_t by_chunk = n_in / kMinChunk;
  r.splits = by_blocks < by_chunk ? by_blocks : by_chunk;
  if (r.splits < 2) {
    r.splits = 1;
    return r;
  }
  int64_t acc_bytes = 8;
  if (kind == ReduceKind::sum && (dtype == DType::c64 || dtype == DType::c128)) acc_bytes = 16;
  r.scratch_bytes = n_out * r.splits * acc_bytes;
  return r;
}

// out (contiguous, n_out elements) = reduction over `inner` starting at each output's base
// offset in `in`, given by `outer`. `scratch` holds split.scratch_bytes bytes (unused when
// splits == 1). Sums of f32 (c64) accumulate in f64 (c128), as on the CPU.
bool reduce(ReduceKind kind, DType dtype, void* out, const void* in, const StridedLoop<1>& outer,
            const StridedLoop<1>& inner, double scale, const ReduceSplit& split, void* scratch, void* stream);

}  // namespace gs::cuda_kernels
