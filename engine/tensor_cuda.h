// Launchers of the engine's own CUDA kernels (engine/tensor_cuda.cu): the strided, casting copy
// behind copy_values / contiguous_copy / cast_copy, and the fill behind the factories. Plain
// arguments only, so the .cu needs no fmt-based header. Each returns after enqueueing on
// `stream` (a cudaStream_t); the caller checks the launch (cuda::check_launch).
#pragma once
#include <cstdint>

#include "engine/dtype_code.h"
#include "engine/strided_index.h"

namespace gs::cuda_kernels {

// dst[off0] = convert(src[off1]) over the loop; complex -> real keeps the real part.
void strided_copy(DType to, DType from, void* dst, const void* src, const StridedLoop<2>& loop, void* stream);
// n elements of dst set to re + i im (im ignored for real dtypes).
void fill(DType dtype, void* dst, int64_t n, double re, double im, void* stream);

}  // namespace gs::cuda_kernels
