#include <cfloat>
#include <cuda/std/limits>

#include "engine/cuda_types.cuh"
#include "ops/reduce_cuda.h"
#include "ops/reduce_math.h"

namespace gs::cuda_kernels {
namespace {

template <typename T> struct accumulator { using type = T; };
template <> struct accumulator<float> { using type = double; };
template <> struct accumulator<cuda::std::complex<float>> { using type = cuda::std::complex<double>; };

template <ReduceKind K, typename T>
struct Reducer;
template <typename T>
struct Reducer<ReduceKind::sum, T> {
  using Acc = typename accumulator<T>::type;
  using Step = math::SumStep;
  static __device__ Acc init() { return Acc(0); }
};
template <typename T>
struct Reducer<ReduceKind::max, T> {
  using Acc = T;
  using Step = math::ExtremumStep<true>;
  static __device__ Acc init() { return -cuda::std::numeric_limits<T>::infinity(); }
};
template <typename T>
struct Reducer<ReduceKind::min, T> {
  using Acc = T;
  using Step = math::ExtremumStep<false>;
  static __device__ Acc init() { return cuda::std::numeric_limits<T>::infinity(); }
};

template <typename T, typename Acc>
__device__ T finish(Acc acc, double scale) {
  if constexpr (is_device_complex<Acc>::value) {
    using R = typename Acc::value_type;
    return T(acc * static_cast<R>(scale));
  } else {
    return static_cast<T>(acc * static_cast<Acc>(scale));
  }
}

// Block (j, s) folds chunk s of output j: threads take elements tid, tid + blockDim, ... of the
// chunk, then halve in shared memory. With one split the block writes the output itself.
template <ReduceKind K, typename T, bool kFinal>
__global__ void reduce_blocks(const T* in, void* dst, StridedLoop<1> outer, StridedLoop<1> inner, int64_t n_out,
                              int64_t splits, int64_t chunk, double scale, bool scaled) {
  using R = Reducer<K, T>;
  using Acc = typename R::Acc;
  typename R::Step step;
  __shared__ Acc shared[kThreads];
  for (int64_t b = blockIdx.x; b < n_out * splits; b += gridDim.x) {
    const int64_t j = b / splits, s = b % splits;
    int64_t base[1];
    outer.offsets(j, base);
    const int64_t lo = s * chunk;
    const int64_t hi = lo + chunk < inner.numel ? lo + chunk : inner.numel;
    Acc acc = R::init();
    for (int64_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
      int64_t off[1];
      inner.offsets(i, off);
      acc = step(acc, in[base[0] + off[0]]);
    }
    shared[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
      if (threadIdx.x < w) shared[threadIdx.x] = step.combine(shared[threadIdx.x], shared[threadIdx.x + w]);
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      if constexpr (kFinal) static_cast<T*>(dst)[j] = scaled ? finish<T>(shared[0], scale) : static_cast<T>(shared[0]);
      else static_cast<Acc*>(dst)[b] = shared[0];
    }
    __syncthreads();
  }
}

// Output j = the splits partials of j folded in order.
template <ReduceKind K, typename T>
__global__ void combine_partials(const typename Reducer<K, T>::Acc* partial, T* out, int64_t n_out, int64_t splits,
                                 double scale, bool scaled) {
  typename Reducer<K, T>::Step step;
  GS_GRID_STRIDE(j, n_out) {
    auto acc = partial[j * splits];
    for (int64_t s = 1; s < splits; ++s) acc = step.combine(acc, partial[j * splits + s]);
    out[j] = scaled ? finish<T>(acc, scale) : static_cast<T>(acc);
  }
}

template <ReduceKind K, typename T>
void launch(void* out, const void* in, const StridedLoop<1>& outer, const StridedLoop<1>& inner, double scale,
            const ReduceSplit& split, void* scratch, cudaStream_t stream) {
  const int64_t n_out = outer.numel;
  const bool scaled = K == ReduceKind::sum;
  const int64_t chunk = (inner.numel + split.splits - 1) / split.splits;
  const unsigned grid = static_cast<unsigned>(n_out * split.splits < kMaxBlocks ? n_out * split.splits : kMaxBlocks);
  if (split.splits == 1) {
    reduce_blocks<K, T, true><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(in), out, outer, inner, n_out, 1,
                                                             chunk, scale, scaled);
    return;
  }
  reduce_blocks<K, T, false><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(in), scratch, outer, inner, n_out,
                                                            split.splits, chunk, scale, scaled);
  combine_partials<K, T><<<blocks_for(n_out), kThreads, 0, stream>>>(
      static_cast<const typename Reducer<K, T>::Acc*>(scratch), static_cast<T*>(out), n_out, split.splits, scale,
      scaled);
}

template <typename F>
bool with_kind(ReduceKind kind, F&& f) {
  switch (kind) {
    case ReduceKind::sum: return f(std::integral_constant<ReduceKind, ReduceKind::sum>{});
    case ReduceKind::max: return f(std::integral_constant<ReduceKind, ReduceKind::max>{});
    case ReduceKind::min: return f(std::integral_constant<ReduceKind, ReduceKind::min>{});
  }
  return false;
}

// sum: the float and complex dtypes; max/min: f32 and f64.
template <ReduceKind K, DType D>
constexpr bool supported() {
  if (K == ReduceKind::sum) return D == DType::f32 || D == DType::f64 || D == DType::c64 || D == DType::c128;
  return D == DType::f32 || D == DType::f64;
}

}  // namespace

bool reduce(ReduceKind kind, DType dtype, void* out, const void* in, const StridedLoop<1>& outer,
            const StridedLoop<1>& inner, double scale, const ReduceSplit& split, void* scratch, void* stream) {
  if (outer.numel == 0) return true;
  bool ok = false;
  with_dtype(dtype, [&](auto dtag) {
    ok = with_kind(kind, [&](auto ktag) {
      constexpr ReduceKind K = decltype(ktag)::value;
      constexpr DType D = decltype(dtag)::value;
      if constexpr (supported<K, D>()) {
        launch<K, device_t<D>>(out, in, outer, inner, scale, split, scratch, static_cast<cudaStream_t>(stream));
        return true;
      } else {
        return false;
      }
    });
  });
  return ok;
}

}  // namespace gs::cuda_kernels
