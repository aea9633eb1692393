// Launchers of the fused GELU's CUDA kernels (ops/gelu_fused_cuda.cu): one pass forward,
// out = gelu(x + b), and one backward, out = g * gelu'(x + b), b broadcast per channel. Plain
// arguments, as ops/elementwise_cuda.h.
#pragma once
#include "engine/dtype_code.h"
#include "engine/strided_index.h"

namespace gs::cuda_kernels {

bool gelu_bias_forward(DType dtype, void* out, const void* x, const void* b, const StridedLoop<3>& loop, void* stream);
bool gelu_bias_backward(DType dtype, void* out, const void* x, const void* b, const void* g, const StridedLoop<4>& loop,
                        void* stream);

}  // namespace gs::cuda_kernels
