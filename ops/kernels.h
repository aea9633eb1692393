// Shared machinery of the op kernels (internal to ops/): dtype/device checks, the strided,
// broadcasting, OpenMP-parallel element loops that elementwise ops are built from, and the CUDA
// launch helpers every family dispatches through. Nothing family-specific lives here.
#pragma once
#include <omp.h>

#include <array>

#include "engine/strided_index.h"
#include "engine/strided_loop.h"
#include "engine/tensor.h"
#include "gradsphere_config.h"
#include "ops/composite_path.h"
#include "ops/elementwise_math.h"

namespace gs::kernels {

// Below this many elements a loop stays on one thread: forking costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);
void check_same_device(const Tensor& a, const Tensor& b, const char* op);
void check_defined(const Tensor& t, const char* op, const char* what = "input");
// A tensor written in place may not hold one memory location twice (an expanded view): the writes
// would race and the result would depend on their order.
void check_no_self_overlap(const Tensor& self, const char* op);
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

// Strides of `t` viewed as `shape` (0 along broadcast dims). `t` must be expandable to `shape`.
Shape expanded_strides(const Tensor& t, const Shape& shape);

// ---- CUDA dispatch, the one style (README.md, "A CUDA twin of a kernel"). A family's launchers
// are declared in its <family>_cuda.h with plain arguments and defined in its <family>_cuda.cu;
// the family's .cpp reaches them only through launch_cuda / launch_strided_cuda, with the
// launcher call inside GS_CUDA_CALL. Nothing else in a .cpp depends on whether CUDA was built.

// GS_CUDA_CALL(launcher(...)): the call in a CUDA build; `false` in a build without CUDA, where no
// launcher is defined and the launch helpers throw before the call could run.
#if GS_HAVE_CUDA
#define GS_CUDA_CALL(...) (__VA_ARGS__)
#else
#define GS_CUDA_CALL(...) false
#endif

bool on_cuda(const Tensor& t);
// The current stream of t's device (a cudaStream_t), after checking that the device is usable;
// in a build without CUDA, an error naming `op`.
void* cuda_stream(const Tensor& t, const char* op);
// A failed launch of `kernel` (or an earlier asynchronous device error) as an error naming `op`.
void check_cuda_launch(const char* kernel, const char* op);

// Runs launch(stream) on the current stream of t's device for `op`, then checks the launch of
// `kernel`. `launch` returns the launcher's answer: false means it refused its arguments (no
// kernel for t's dtype), reported naming op, the kernel and t.
template <typename Launch>
void launch_cuda(const char* op, const char* kernel, const Tensor& t, Launch&& launch) {
  void* stream = cuda_stream(t, op);
  GS_CHECK(launch(stream), "{}: the CUDA kernel {} has no form for {}", op, kernel, t.meta_str());
  check_cuda_launch(kernel, op);
}

// launch_cuda for element loops: launch(loop, stream) gets the strided loop of `out` (operand 0)
// and of `ins` broadcast to out's shape, all checked to be on out's device.
template <int N, typename Launch>
void launch_strided_cuda(const char* op, const Tensor& out, std::array<const Tensor*, N - 1> ins, Launch&& launch) {
  void* stream = cuda_stream(out, op);
  std::array<Shape, N> strides;
  std::array<const Shape*, N> sp;
  strides[0] = out.strides();
  for (int k = 1; k < N; ++k) {
    check_same_device(out, *ins[k - 1], op);
    strides[k] = expanded_strides(*ins[k - 1], out.sizes());
  }
  for (int k = 0; k < N; ++k) sp[k] = &strides[k];
  GS_CHECK(launch(make_strided_loop<N>(out.sizes(), sp), stream), "{}: no CUDA kernel for {} operands", op,
           dtype_name(ins[N - 2]->dtype()));
  check_cuda_launch(op, op);
}

// A result that an op made as a reshape (or squeeze) of a tensor it created itself: the user took
// no view, so the result must not act as one (an in-place write on it would be refused as a
// write into a view of a graph tensor). Drops the view link; storage and recorded history stay.
// Only for bases that never escape the op.
inline Tensor own_result(Tensor t) {
  if (t.defined()) t.impl()->view_base.reset();
  return t;
}

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
