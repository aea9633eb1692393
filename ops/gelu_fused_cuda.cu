// The fused GELU on CUDA, with ops/gelu_math.h's arithmetic (the CPU loops' own).
#include "ops/cuda_map.cuh"
#include "ops/gelu_fused_cuda.h"
#include "ops/gelu_math.h"

namespace gs::cuda_kernels {

bool gelu_bias_forward(DType dtype, void* out, const void* x, const void* b, const StridedLoop<3>& loop, void* stream) {
  if (dtype == DType::f32) return launch2<float, float, float>(out, x, b, loop, stream, math::GeluBiasForward{});
  if (dtype == DType::f64) return launch2<double, double, double>(out, x, b, loop, stream, math::GeluBiasForward{});
  return false;
}

bool gelu_bias_backward(DType dtype, void* out, const void* x, const void* b, const void* g, const StridedLoop<4>& loop,
                        void* stream) {
  if (dtype == DType::f32)
    return launch3<float, float, float, float>(out, x, b, g, loop, stream, math::GeluBiasBackward{});
  if (dtype == DType::f64)
    return launch3<double, double, double, double>(out, x, b, g, loop, stream, math::GeluBiasBackward{});
  return false;
}

}  // namespace gs::cuda_kernels
