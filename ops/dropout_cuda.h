// Launcher of the dropout CUDA kernel (ops/dropout_cuda.cu): out = x * mask(base + offset), where
// operand 2 of the loop is not memory but the element's global mask index (strides of the global
// mask, 0 along the dims that share one decision). Plain arguments, as ops/elementwise_cuda.h.
#pragma once
#include <cstdint>

#include "engine/dtype_code.h"
#include "engine/strided_index.h"
#include "ops/dropout_math.h"

namespace gs::cuda_kernels {

bool dropout_apply(DType dtype, void* out, const void* x, uint64_t index_base, const math::DropoutMask& mask,
                   const StridedLoop<3>& loop, void* stream);

}  // namespace gs::cuda_kernels
