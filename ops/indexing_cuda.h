// Launchers of the indexing primitives on CUDA (ops/indexing_cuda.cu), the twins of the CPU loops
// of ops/index_map.cpp with ops/indexing_math.h's arithmetic: one thread per output element, no
// atomics (a put reads its sources from a CSR table in a fixed order), so results are deterministic
// and equal to the CPU's. Plain arguments, as ops/elementwise_cuda.h; every pointer is device
// memory and every array contiguous. Each returns false for a dtype it has no form for.
#pragma once
#include <cstdint>

#include "engine/dtype_code.h"

namespace gs::cuda_kernels {

// out[q] = x[positions[q]] for q < n (any storage dtype).
bool index_take(DType dtype, void* out, const void* x, const int64_t* positions, int64_t n, void* stream);
// out[p] for p < n_out from base, src and the CSR table (starts: n_out + 1 entries): the sum of
// base and the sources (f32, f64, c64, c128, i64), or the last source (any storage dtype; src_step 0
// reads src[0] for every source).
bool index_put_accumulate(DType dtype, void* out, const void* base, const void* src, const int64_t* starts,
                          const int64_t* entries, int64_t n_out, void* stream);
bool index_put_overwrite(DType dtype, void* out, const void* base, const void* src, int64_t src_step,
                         const int64_t* starts, const int64_t* entries, int64_t n_out, void* stream);

}  // namespace gs::cuda_kernels
