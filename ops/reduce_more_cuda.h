// Launchers of the scans and the arg-extremum (ops/reduce_more_cuda.cu), for ops/scan.cpp and
// ops/argmax.cpp. Operands are contiguous and seen as (outer, n, inner): the op runs along the
// middle dim. Plain arguments only (README.md, "A CUDA twin of a kernel").
#pragma once
#include <cstdint>

#include "engine/dtype_code.h"

namespace gs::cuda_kernels {

enum class ScanKind : uint8_t { sum, prod };

// out = the running sum / product of `in` along n (from the end when `reverse`); f32 accumulates
// in f64, as on the CPU. One thread per line, in order: the result is the CPU's to the bit.
bool scan(ScanKind kind, DType dtype, void* out, const void* in, int64_t outer, int64_t n, int64_t inner,
          bool reverse, void* stream);

// out (i64, outer * inner) = the index along n of each line's maximum (is_max) or minimum, with
// torch's NaN and tie rules (ops/reduce_math.h, ArgExtremum). f32, f64.
bool arg_extremum(bool is_max, DType dtype, int64_t* out, const void* in, int64_t outer, int64_t n, int64_t inner,
                  void* stream);

}  // namespace gs::cuda_kernels
