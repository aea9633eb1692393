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
#include <complex>
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

}  // namespace

template <typename T>
void gemm(T* c, int64_t c_outer, const Operand<T>& a, const Operand<T>& b, int64_t n, int64_t k, int64_t m,
          bool accumulate, bool conj_a) {
  if constexpr (is_complex<T>) {
    if (conj_a) return gemm_layouts<T, true>(c, c_outer, a, b, n, k, m, accumulate);
  } else {
    if (gemm_direct_suits(n, k, m, sizeof(T), b.row_major)) return gemm_direct<T>(c, c_outer, a, b, n, k, m, accumulate);
    // What gemm_direct leaves: a thin weight gradient Eigen would take.
    if (gemm_dots_suits(n, k, m, a.row_major, b.row_major)) return gemm_dots<T>(c, c_outer, a, b, n, k, m, accumulate);
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
