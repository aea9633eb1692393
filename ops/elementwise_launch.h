// The elementwise family's CUDA dispatch (host side, internal to ops/): Tensor-level calls of the
// launchers of elementwise_cuda.h through kernels::launch_strided_cuda. `out` is the op's fresh
// contiguous output; the operands broadcast to its shape. The ops of elementwise_unary.cpp,
// elementwise_binary.cpp, compare.cpp, complex_ops.cpp and inplace.cpp call these when their
// inputs are on a CUDA device; the kernels run elementwise_math.h's functors, as the CPU loops do.
#pragma once
#include "ops/elementwise_cuda.h"
#include "ops/kernels.h"

namespace gs::kernels {

inline void cuda_unary(math::UnaryCode code, math::UnaryParam param, const Tensor& out, const Tensor& a, const char* op) {
  launch_strided_cuda<2>(op, out, {&a}, [&](const auto& loop, void* stream) {
    return GS_CUDA_CALL(cuda_kernels::unary(code, param, a.dtype(), out.raw_data(), a.raw_data(), loop, stream));
  });
}

inline void cuda_binary(math::BinaryCode code, const Tensor& out, const Tensor& a, const Tensor& b, const char* op) {
  launch_strided_cuda<3>(op, out, {&a, &b}, [&](const auto& loop, void* stream) {
    return GS_CUDA_CALL(cuda_kernels::binary(code, a.dtype(), out.raw_data(), a.raw_data(), b.raw_data(), loop, stream));
  });
}

}  // namespace gs::kernels
