// Launchers of the elementwise CUDA kernels (ops/elementwise_cuda.cu). Plain arguments (no fmt-based
// header reaches nvcc): data pointers at each operand's first element, the strided loop with
// operand 0 the output, and the cudaStream_t. The functors are ops/elementwise_math.h's, the
// ones the CPU loops run. Unsupported (code, dtype) pairs are refused by the op before it gets here;
// a launcher returns false if one slips through, and the caller reports it.
#pragma once
#include "engine/dtype_code.h"
#include "engine/strided_index.h"
#include "ops/elementwise_math.h"

namespace gs::cuda_kernels {

bool unary(math::UnaryCode code, math::UnaryParam param, DType dtype, void* out, const void* a, const StridedLoop<2>& loop,
           void* stream);
bool binary(math::BinaryCode code, DType dtype, void* out, const void* a, const void* b, const StridedLoop<3>& loop,
            void* stream);
// out is bool.
bool compare(math::CompareCode code, DType dtype, void* out, const void* a, const void* b, const StridedLoop<3>& loop,
             void* stream);
bool isfinite(DType dtype, void* out, const void* a, const StridedLoop<2>& loop, void* stream);
// complex in, real out.
bool complex_abs(DType complex_dtype, void* out, const void* a, const StridedLoop<2>& loop, void* stream);
// real parts in, complex out.
bool make_complex(DType real_dtype, void* out, const void* re, const void* im, const StridedLoop<3>& loop,
                  void* stream);
// out = cond ? a : b; cond is bool.
bool where(DType dtype, void* out, const void* cond, const void* a, const void* b, const StridedLoop<4>& loop,
           void* stream);

}  // namespace gs::cuda_kernels
