// Dropout on CUDA with ops/dropout_math.h's mask (the CPU loop's own), one thread per element.
#include "ops/cuda_map.cuh"
#include "ops/dropout_cuda.h"

namespace gs::cuda_kernels {

template <typename T>
__global__ void dropout_kernel(T* out, const T* x, uint64_t base, math::DropoutMask mask, StridedLoop<3> loop) {
  GS_GRID_STRIDE(i, loop.numel) {
    int64_t off[3];
    loop.offsets(i, off);
    out[off[0]] = mask.apply(x[off[1]], base + static_cast<uint64_t>(off[2]));
  }
}

template <typename T>
bool launch_dropout(void* out, const void* x, uint64_t base, const math::DropoutMask& mask, const StridedLoop<3>& loop,
                    void* stream) {
  if (loop.numel > 0)
    dropout_kernel<T><<<blocks_for(loop.numel), kThreads, 0, as_stream(stream)>>>(
        static_cast<T*>(out), static_cast<const T*>(x), base, mask, loop);
  return true;
}

bool dropout_apply(DType dtype, void* out, const void* x, uint64_t index_base, const math::DropoutMask& mask,
                   const StridedLoop<3>& loop, void* stream) {
  if (dtype == DType::f32) return launch_dropout<float>(out, x, index_base, mask, loop, stream);
  if (dtype == DType::f64) return launch_dropout<double>(out, x, index_base, mask, loop, stream);
  return false;
}

}  // namespace gs::cuda_kernels
