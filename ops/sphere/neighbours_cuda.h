// Launchers of the 3x3 sphere-neighbourhood kernels on CUDA (neighbours_cuda.cu), the twins of
// local_conv.cpp's gather and scatter-add, with neighbours_math.h's index rules. Plain arguments,
// as ops/elementwise_cuda.h; each returns false for a dtype other than f32 / f64.
#pragma once
#include <cstdint>

#include "engine/dtype_code.h"

namespace gs::cuda_kernels {

// out (planes, 9, H, W) from x (planes, H, W), both contiguous.
bool neighbours_gather(DType dtype, void* out, const void* x, int64_t planes, int64_t H, int64_t W, void* stream);
// out (planes, H, W) = the adjoint of the gather applied to g (planes, 9, H, W), contiguous.
bool neighbours_scatter(DType dtype, void* out, const void* g, int64_t planes, int64_t H, int64_t W, void* stream);

}  // namespace gs::cuda_kernels
