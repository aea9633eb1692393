// Shared machinery for CPU op kernels (internal to ops/): dtype/device checks and the strided,
// broadcasting, OpenMP-parallel element loops that elementwise ops are built from.
#pragma once
#include <omp.h>

#include <array>

#include "engine/strided_loop.h"
#include "engine/tensor.h"
#include "ops/composite_path.h"
#include "ops/elementwise_math.h"

namespace gs::kernels {

// Below this many elements a loop stays on one thread: forking costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
void check_defined(const Tensor& t, const char* op, const char* what = "input");
// f32, f64, c64 or c128, with dispatch_float_complex's error, before any device is chosen.
void check_float_complex(const Tensor& t, const char* op);
// The dtype of an op on operands a and b that must agree, where bf16 storage counts as f32 (the
// f32-accumulating ops: matmul, linear, conv1x1): the shared dtype, f32 when either is bf16; any
// other pairing is refused naming `op` and both dtypes.
DType check_mixed_storage_pair(const Tensor& a, const Tensor& b, const char* op);
// A bf16 tensor as the f32 its arithmetic runs in (an exact, untracked copy); others as they are.
Tensor widen_storage(const Tensor& t);
// For ops that have no kernel on t's device yet: a clear error naming the op and the device.
void check_cpu(const Tensor& t, const char* op);

// ---- CUDA twins of the loops below (ops/elementwise_cuda.cu), for an op whose inputs are on a
// CUDA device: `out` is the op's fresh contiguous output, the operands broadcast to its shape.
// Each throws naming `op` when the device is unusable or the dtype has no kernel.
bool on_cuda(const Tensor& t);
void cuda_unary(math::UnaryCode code, double param, const Tensor& out, const Tensor& a, const char* op);
void cuda_binary(math::BinaryCode code, const Tensor& out, const Tensor& a, const Tensor& b, const char* op);
void cuda_compare(math::CompareCode code, const Tensor& out, const Tensor& a, const Tensor& b, const char* op);
void cuda_isfinite(const Tensor& out, const Tensor& a);
void cuda_complex_abs(const Tensor& out, const Tensor& a);
void cuda_make_complex(const Tensor& out, const Tensor& re, const Tensor& im);
void cuda_where(const Tensor& out, const Tensor& cond, const Tensor& a, const Tensor& b);
// The fused GELU (ops/gelu_fused_cuda.cu): out = gelu(x + b); out = g * gelu'(x + b).
void cuda_gelu_bias_forward(const Tensor& out, const Tensor& x, const Tensor& b);
void cuda_gelu_bias_backward(const Tensor& out, const Tensor& x, const Tensor& b, const Tensor& g);
// The current stream of t's device (a cudaStream_t), after checking the device is usable.
void* cuda_stream(const Tensor& t, const char* op);

// A result that an op made as a reshape (or squeeze) of a tensor it created itself: the user took
// no view, so the result must not act as one (an in-place write on it would be refused as a
// write into a view of a graph tensor). Drops the view link; storage and recorded history stay.
// Only for bases that never escape the op.
inline Tensor own_result(Tensor t) {
  if (t.defined()) t.impl()->view_base.reset();
  return t;
}

// Strides of `t` viewed as `shape` (0 along broadcast dims). `t` must be expandable to `shape`.
Shape expanded_strides(const Tensor& t, const Shape& shape);

// Runs f(offsets, inner_strides, len) over N operands of one shape, splitting dim 0 across
// threads when the loop is large.
template <size_t N, typename F>
void parallel_runs(const Shape& shape, const std::array<Shape, N>& strides, const std::array<int64_t, N>& offsets,
                   F&& f) {
  int64_t n = numel_of(shape);
  if (n == 0) return;
  std::array<const Shape*, N> sp;
  for (size_t k = 0; k < N; ++k) sp[k] = &strides[k];
  if (n < kParallelGrain || shape.empty() || shape[0] < 2) {
    for_each_run<N>(shape, sp, offsets, f);
    return;
  }
  const int64_t rows = shape[0];
#pragma omp parallel
  {
    int nt = omp_get_num_threads(), t = omp_get_thread_num();
    int64_t lo = rows * t / nt, hi = rows * (t + 1) / nt;
    if (hi > lo) {
      Shape sub = shape;
      sub[0] = hi - lo;
      std::array<int64_t, N> off = offsets;
      for (size_t k = 0; k < N; ++k) off[k] += lo * strides[k][0];
      for_each_run<N>(sub, sp, off, f);
    }
  }
}

// out[i] = f(a[i]); out is contiguous with a's shape.
template <typename O, typename A, typename F>
void unary_loop(const Tensor& out, const Tensor& a, F f) {
  O* o = static_cast<O*>(out.storage()->data()) + out.offset();
  const A* pa = static_cast<const A*>(a.storage()->data());
  if (a.is_contiguous()) {
    const A* x = pa + a.offset();
    int64_t n = out.numel();
    // Branch rather than `if(...)` on the pragma: even a one-thread parallel region costs ~1 us.
    if (n >= kParallelGrain) {
#pragma omp parallel for simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i]);
    }
    return;
  }
  parallel_runs<2>(out.sizes(), {contiguous_strides(out.sizes()), a.strides()}, {0, a.offset()},
                   [&](auto off, auto inner, int64_t len) {
                     for (int64_t i = 0; i < len; ++i) o[off[0] + i] = f(pa[off[1] + i * inner[1]]);
                   });
}

// out[i] = f(a[i], b[i]) with broadcasting; out is contiguous with the broadcast shape.
template <typename O, typename A, typename B, typename F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  O* o = static_cast<O*>(out.storage()->data()) + out.offset();
  const A* pa = static_cast<const A*>(a.storage()->data());
  const B* pb = static_cast<const B*>(b.storage()->data());
  const Shape& shape = out.sizes();
  if (a.sizes() == shape && b.sizes() == shape && a.is_contiguous() && b.is_contiguous()) {
    const A* x = pa + a.offset();
    const B* y = pb + b.offset();
    int64_t n = out.numel();
    if (n >= kParallelGrain) {
#pragma omp parallel for simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = f(x[i], y[i]);
    }
    return;
  }
  parallel_runs<3>(shape, {contiguous_strides(shape), expanded_strides(a, shape), expanded_strides(b, shape)},
                   {0, a.offset(), b.offset()}, [&](auto off, auto inner, int64_t len) {
                     O* oo = o + off[0];
                     const A* xa = pa + off[1];
                     const B* xb = pb + off[2];
                     if (inner[1] == 1 && inner[2] == 1) {
                       for (int64_t i = 0; i < len; ++i) oo[i] = f(xa[i], xb[i]);
                     } else if (inner[1] == 1 && inner[2] == 0) {
                       const B y = xb[0];
                       for (int64_t i = 0; i < len; ++i) oo[i] = f(xa[i], y);
                     } else if (inner[1] == 0 && inner[2] == 1) {
                       const A x = xa[0];
                       for (int64_t i = 0; i < len; ++i) oo[i] = f(x, xb[i]);
                     } else {
                       for (int64_t i = 0; i < len; ++i) oo[i] = f(xa[i * inner[1]], xb[i * inner[2]]);
                     }
                   });
}

}  // namespace gs::kernels
