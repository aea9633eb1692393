// Eigen's GEMM behind ops/gemm_cpu.h (why it is alone here: see the header).

// GCC 12 reports -W(maybe-)uninitialized inside its own AVX-512 intrinsic headers when Eigen's
// GEMM kernels are instantiated with -march=native; they are false positives in code we do not own.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include "ops/gemm_cpu.h"

#include "ops/gemm_direct.h"

#include <Eigen/Core>
#include <algorithm>
#include <complex>
#include <memory>
#include <type_traits>

namespace gs::gemm_cpu {
namespace {

template <typename T, int Order>
using ConstMap =
    Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <typename T>
using OutMap =
    Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Unaligned, Eigen::OuterStride<>>;

template <typename T, int OrderA, int OrderB, bool ConjA>
void gemm_fixed(T* c, int64_t c_outer, const Operand<T>& a, const Operand<T>& b, int64_t n, int64_t k, int64_t m,
                bool accumulate) {
  ConstMap<T, OrderA> A(a.data, n, k, Eigen::OuterStride<>(a.outer));
  ConstMap<T, OrderB> B(b.data, k, m, Eigen::OuterStride<>(b.outer));
  OutMap<T> C(c, n, m, Eigen::OuterStride<>(c_outer));
  // One instantiation serves both `=` and `+=`: Eigen's own `=` zeroes C and accumulates as well.
  if (!accumulate) C.setZero();
  if constexpr (ConjA) C.noalias() += A.conjugate() * B;
  else C.noalias() += A * B;
}

template <typename T, bool ConjA>
void gemm_layouts(T* c, int64_t c_outer, const Operand<T>& a, const Operand<T>& b, int64_t n, int64_t k, int64_t m,
                  bool accumulate) {
  constexpr int R = Eigen::RowMajor, C = Eigen::ColMajor;
  if (a.row_major && b.row_major) gemm_fixed<T, R, R, ConjA>(c, c_outer, a, b, n, k, m, accumulate);
  else if (a.row_major) gemm_fixed<T, R, C, ConjA>(c, c_outer, a, b, n, k, m, accumulate);
  else if (b.row_major) gemm_fixed<T, C, R, ConjA>(c, c_outer, a, b, n, k, m, accumulate);
  else gemm_fixed<T, C, C, ConjA>(c, c_outer, a, b, n, k, m, accumulate);
}

template <typename T>
constexpr bool is_complex = !std::is_floating_point_v<T>;

// ---- a long depth against a small output, split along the depth
// A weight gradient (C' x points) @ (points x C) of balanced channels (64 x 32768 x 32, 128 x 65536
// x 64, 128 x 7310 x 64) left to Eigen scaled badly on two threads: Eigen splits the output, which is
// small, and synchronises the threads at every depth block (1.0-1.5x of one thread). Cut the depth
// into chunks instead: each thread multiplies whole chunks on its own (Eigen does not nest inside a
// parallel region) into a partial product, and the partials are added in order. The chunks depend on
// k alone (at least two, at most kDepthChunk deep, equal up to a multiple of 16), and their grouping
// into partials on the shape alone, so the result does not depend on the thread count; one thread
// runs about as fast as Eigen on the whole product (ops/BENCHMARKS.md).
constexpr int64_t kDepthChunk = 4096, kMinSplitDepth = 2048;

struct DepthChunks {
  int64_t count, depth;  // chunks of `depth`, the last one shorter
};
DepthChunks depth_chunks(int64_t k) {
  const int64_t count = std::max<int64_t>(2, (k + kDepthChunk - 1) / kDepthChunk);
  const int64_t depth = ((k + count - 1) / count + 15) / 16 * 16;
  return {(k + depth - 1) / depth, depth};
}

template <typename T>
Operand<T> depth_slice_a(const Operand<T>& a, int64_t p0) {  // columns p0.. of a (n x k)
  return {a.data + (a.row_major ? p0 : p0 * a.outer), a.row_major, a.outer};
}
template <typename T>
Operand<T> depth_slice_b(const Operand<T>& b, int64_t p0) {  // rows p0.. of b (k x m)
  return {b.data + (b.row_major ? p0 * b.outer : p0), b.row_major, b.outer};
}

// The partial products' memory, at most 256 KiB past two partials: a longer depth runs consecutive
// chunks into one partial, in order (128 x 65536 x 64 in f32: 16 chunks into 8 partials of 32 KiB).
constexpr int64_t kMaxPartialBytes = int64_t{256} << 10;

template <typename T>
void gemm_depth_split(T* c, int64_t c_outer, const Operand<T>& a, const Operand<T>& b, int64_t n, int64_t k,
                      int64_t m, bool accumulate) {
  const DepthChunks chunks = depth_chunks(k);
  const int64_t size = n * m;
  const int64_t partials =
      std::clamp<int64_t>(kMaxPartialBytes / (size * static_cast<int64_t>(sizeof(T))), 2, chunks.count);
  // Eigen ran these products faster with the smaller of n and m as its packed lhs's rows (64 x 65536
  // x 128: 60 against 52 GFLOP/s on one thread; 128 x 7310 x 64: 61 against 45 the other way round):
  // with n < m each partial is the transposed product, b^T @ a^T (m x n), and is read back
  // transposed.
  const bool transposed = n < m;
  const int64_t rows = transposed ? m : n, cols = transposed ? n : m;
  // Not value-initialised: each partial's first chunk writes it whole (Eigen's `=`).
  const std::unique_ptr<T[]> partial(new T[static_cast<size_t>(partials * size)]);
#pragma omp parallel for schedule(static)
  for (int64_t g = 0; g < partials; ++g) {
    const int64_t first = chunks.count * g / partials, last = chunks.count * (g + 1) / partials;
    for (int64_t ch = first; ch < last; ++ch) {
      const int64_t p0 = ch * chunks.depth, len = std::min(chunks.depth, k - p0);
      const Operand<T> a_part = depth_slice_a(a, p0), b_part = depth_slice_b(b, p0);
      T* out = partial.get() + g * size;
      if (transposed)
        gemm_layouts<T, false>(out, cols, {b_part.data, !b_part.row_major, b_part.outer},
                               {a_part.data, !a_part.row_major, a_part.outer}, m, len, n, ch > first);
      else
        gemm_layouts<T, false>(out, cols, a_part, b_part, n, len, m, ch > first);
    }
  }
#pragma omp parallel for schedule(static) if (size >= 4096)
  for (int64_t r = 0; r < rows; ++r) {  // row r of the partials summed into the first's, in order
    T* sum = partial.get() + r * cols;
    for (int64_t g = 1; g < partials; ++g) {
      const T* q = partial.get() + g * size + r * cols;
#pragma omp simd
      for (int64_t j = 0; j < cols; ++j) sum[j] += q[j];
    }
  }
  const T* total = partial.get();
#pragma omp parallel for schedule(static) if (size >= 4096)
  for (int64_t i = 0; i < n; ++i) {
    T* row = c + i * c_outer;
    for (int64_t j = 0; j < m; ++j) {
      const T value = transposed ? total[j * cols + i] : total[i * cols + j];
      row[j] = accumulate ? row[j] + value : value;
    }
  }
}

}  // namespace

// A product under about a million multiply-adds (a matrix-vector product with a long depth) stays
// with Eigen, which runs it on one thread: a parallel region and the partials would cost more.
bool gemm_depth_split_suits(int64_t n, int64_t k, int64_t m) {
  return k >= kMinSplitDepth && n * m <= 256 * 256 && n * k * m >= (int64_t{1} << 20);
}

template <typename T>
void gemm(T* c, int64_t c_outer, const Operand<T>& a, const Operand<T>& b, int64_t n, int64_t k, int64_t m,
          bool accumulate, bool conj_a) {
  if constexpr (is_complex<T>) {
    if (conj_a) return gemm_layouts<T, true>(c, c_outer, a, b, n, k, m, accumulate);
  } else {
    if (gemm_direct_suits(n, k, m, sizeof(T), b.row_major)) return gemm_direct<T>(c, c_outer, a, b, n, k, m, accumulate);
    // What gemm_direct leaves: a thin weight gradient Eigen would take.
    if (gemm_dots_suits(n, k, m, a.row_major, b.row_major)) return gemm_dots<T>(c, c_outer, a, b, n, k, m, accumulate);
    if (gemm_depth_split_suits(n, k, m)) return gemm_depth_split<T>(c, c_outer, a, b, n, k, m, accumulate);
  }
  gemm_layouts<T, false>(c, c_outer, a, b, n, k, m, accumulate);
}

template void gemm<float>(float*, int64_t, const Operand<float>&, const Operand<float>&, int64_t, int64_t, int64_t,
                          bool, bool);
template void gemm<double>(double*, int64_t, const Operand<double>&, const Operand<double>&, int64_t, int64_t,
                           int64_t, bool, bool);
template void gemm<std::complex<float>>(std::complex<float>*, int64_t, const Operand<std::complex<float>>&,
                                        const Operand<std::complex<float>>&, int64_t, int64_t, int64_t, bool, bool);
template void gemm<std::complex<double>>(std::complex<double>*, int64_t, const Operand<std::complex<double>>&,
                                         const Operand<std::complex<double>>&, int64_t, int64_t, int64_t, bool, bool);

}  // namespace gs::gemm_cpu
