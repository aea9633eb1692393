// Spectral convolution (Driscoll-Healy and diagonal): forward, adjoint and weight-gradient kernels
// side by side, then the ops that record them. Three contractions over the channel dims, closed
// under differentiation, so every backward rule is one of them and gradients of gradients work:
//
//   contract(x, w)      y[b,o,..]   = sum_i x[b,i,..] w[i,o,..]        x (B, Cin, L, M)  -> (B, Cout, L, M)
//   adjoint(x, w)       y[b,i,..]   = sum_o x[b,o,..] conj(w[i,o,..])  x (B, Cout, L, M) -> (B, Cin, L, M)
//   weight_grad(x, g)   gw[i,o,..]  = sum_{b(,m)} conj(x[b,i,..]) g[b,o,..]                -> w's shape
//
// where ".." is (l, m), and w[i,o,..] means w[i,o,l] for Driscoll-Healy. Their gradients (PyTorch's
// complex convention: the gradient of a real loss w.r.t. z = a + ib is dL/da + i dL/db):
//
//   contract:     grad_x = adjoint(g, w)       grad_w = weight_grad(x, g)
//   adjoint:      grad_x = contract(g, w)      grad_w = weight_grad(g, x)
//   weight_grad:  grad_x = adjoint(g, G)       grad_g = contract(x, G)
//
// The adjoint reads w in place (no conjugated or transposed copy of a large diagonal weight).
// On CUDA the three contractions are batched GEMMs (spectral_conv_gemm.h) or hand-written kernels
// (spectral_conv_kernels.h), as the path rule of legendre/path.h says, recorded the same way.
#include "ops/sphere/spectral_conv.h"

#include <omp.h>

#include <string>
#include <vector>

#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/gemm_cpu.h"
#include "ops/kernels.h"
#include "ops/registry.h"
#include "ops/sphere/legendre/path.h"
#include "ops/sphere/spectral_conv_gemm.h"
#include "ops/sphere/spectral_conv_kernels.h"
#include "ops/view.h"

namespace gs::sphere {
namespace {

// Complex multiply-adds below which a kernel stays on one thread.
constexpr int64_t kParallelWork = 1 << 16;
// Plane elements per block in the diagonal kernels: big enough that each strided read of a weight
// plane covers half a page or more (fewer TLB misses), small enough that the blocks of x (and g) for
// every batch entry and channel stay in L2 while they are reused.
constexpr int64_t kPlaneBlock = 256;

enum class Kind { contract, adjoint, weight_grad };

const char* op_name(SpectralOperator op, Kind k) {
  const bool dh = op == SpectralOperator::driscoll_healy;
  switch (k) {
    case Kind::contract: return dh ? "spectral_conv_dh" : "spectral_conv_diagonal";
    case Kind::adjoint: return dh ? "spectral_conv_dh_adjoint" : "spectral_conv_diagonal_adjoint";
    case Kind::weight_grad: return dh ? "spectral_conv_dh_weight_grad" : "spectral_conv_diagonal_weight_grad";
  }
  return "spectral_conv";
}

template <typename F>
void parallel_for(int64_t n, int64_t work, F&& f) {
  if (n > 1 && work >= kParallelWork && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) f(i);
  } else {
    for (int64_t i = 0; i < n; ++i) f(i);
  }
}

// I and O are the weight's two channel dims (w is (I, O, L[, M])); B, L, M as in x.
struct Dims {
  int64_t B, I, O, L, M;
};

// ---- Driscoll-Healy: one (O x I) matrix per degree l, applied to every (b, l) slice of x.

// contract: x (B, I, L, M), w (I, O, L) -> y (B, O, L, M). adjoint: x (B, O, L, M) -> y (B, I, L, M)
// with the matrix conj(w[:, :, l]). All contiguous.
template <typename T, bool Adjoint>
void dh_apply_kernel(T* y, const T* x, const T* w, const Dims& d) {
  const int64_t LM = d.L * d.M;
  const int64_t cin = Adjoint ? d.O : d.I, cout = Adjoint ? d.I : d.O;
  parallel_for(d.L, d.B * d.I * d.O * LM, [&](int64_t l) {
    // contract: w[:, :, l]^T (O x I); adjoint: conj(w[:, :, l]) (I x O). Row-major.
    std::vector<T> a(static_cast<size_t>(cout * cin));
    for (int64_t i = 0; i < d.I; ++i)
      for (int64_t o = 0; o < d.O; ++o) {
        const T v = w[(i * d.O + o) * d.L + l];
        if constexpr (Adjoint) a[i * d.O + o] = std::conj(v);
        else a[o * d.I + i] = v;
      }
    for (int64_t b = 0; b < d.B; ++b) {
      // y[b, :, l, :] (cout x M) = a @ x[b, :, l, :] (cin x M); both with rows LM apart.
      gemm_cpu::gemm<T>(y + (b * cout * d.L + l) * d.M, LM, {a.data(), true, cin},
                        {x + (b * cin * d.L + l) * d.M, true, LM}, cout, cin, d.M);
    }
  });
}

// x (B, I, L, M), g (B, O, L, M) -> gw (I, O, L): per l, sum_b conj(x_b) (I x M) @ g_b^T (M x O).
template <typename T>
void dh_weight_grad_kernel(T* gw, const T* x, const T* g, const Dims& d) {
  const int64_t LM = d.L * d.M;
  parallel_for(d.L, d.B * d.I * d.O * LM, [&](int64_t l) {
    std::vector<T> acc(static_cast<size_t>(d.I * d.O));  // (I x O), row-major
    for (int64_t b = 0; b < d.B; ++b) {
      // g_b^T is g[b, :, l, :] read column-major: its columns are g_b's rows, LM apart.
      gemm_cpu::gemm<T>(acc.data(), d.O, {x + (b * d.I * d.L + l) * d.M, true, LM},
                        {g + (b * d.O * d.L + l) * d.M, false, LM}, d.I, d.M, d.O, /*accumulate=*/b > 0,
                        /*conj_a=*/true);
    }
    for (int64_t i = 0; i < d.I; ++i)
      for (int64_t o = 0; o < d.O; ++o) gw[(i * d.O + o) * d.L + l] = acc[i * d.O + o];
  });
}

// ---- diagonal: one (I x O) matrix per (l, m). Over the contiguous (l, m) plane each term is an
// elementwise complex product, so the kernels stream plane blocks instead of packing matrices.

// acc[k] += op(a[k]) * op(b[k]) over n complex numbers (op: conj where asked), on interleaved real
// pairs so the loop vectorises (std::complex's operator* carries a NaN-recovery branch that blocks it).
template <bool ConjA, bool ConjB, typename R>
inline void cmul_acc(R* __restrict acc, const R* __restrict a, const R* __restrict b, int64_t n) {
#pragma omp simd
  for (int64_t k = 0; k < n; ++k) {
    const R ar = a[2 * k], ai = ConjA ? -a[2 * k + 1] : a[2 * k + 1];
    const R br = b[2 * k], bi = ConjB ? -b[2 * k + 1] : b[2 * k + 1];
    acc[2 * k] += ar * br - ai * bi;
    acc[2 * k + 1] += ar * bi + ai * br;
  }
}

// contract: x (B, I, P), w (I, O, P) -> y (B, O, P); adjoint: x (B, O, P) -> y (B, I, P) with conj(w).
template <typename T, bool Adjoint>
void diagonal_apply_kernel(T* y, const T* x, const T* w, const Dims& d) {
  using R = real_t<T>;
  const int64_t P = d.L * d.M, nblocks = (P + kPlaneBlock - 1) / kPlaneBlock;
  const int64_t cin = Adjoint ? d.O : d.I, cout = Adjoint ? d.I : d.O;
  parallel_for(nblocks, d.B * d.I * d.O * P, [&](int64_t blk) {
    const int64_t p0 = blk * kPlaneBlock, n = std::min(kPlaneBlock, P - p0);
    for (int64_t o = 0; o < cout; ++o) {
      for (int64_t b = 0; b < d.B; ++b) {
        R* acc = reinterpret_cast<R*>(y + (b * cout + o) * P + p0);
        std::fill(acc, acc + 2 * n, R(0));
      }
      for (int64_t i = 0; i < cin; ++i) {
        // contract reads w[i, o]; the adjoint's output channel o is w's first index. Each weight
        // block is read once and reused from L1 for every batch entry.
        const R* wp = reinterpret_cast<const R*>(w + (Adjoint ? o * d.O + i : i * d.O + o) * P + p0);
        for (int64_t b = 0; b < d.B; ++b)
          cmul_acc<false, Adjoint>(reinterpret_cast<R*>(y + (b * cout + o) * P + p0),
                                   reinterpret_cast<const R*>(x + (b * cin + i) * P + p0), wp, n);
      }
    }
  });
}

// x (B, I, P), g (B, O, P) -> gw (I, O, P): sum_b conj(x) g.
template <typename T>
void diagonal_weight_grad_kernel(T* gw, const T* x, const T* g, const Dims& d) {
  using R = real_t<T>;
  const int64_t P = d.L * d.M, nblocks = (P + kPlaneBlock - 1) / kPlaneBlock;
  parallel_for(nblocks, d.B * d.I * d.O * P, [&](int64_t blk) {
    const int64_t p0 = blk * kPlaneBlock, n = std::min(kPlaneBlock, P - p0);
    for (int64_t i = 0; i < d.I; ++i)
      for (int64_t o = 0; o < d.O; ++o) {
        R* acc = reinterpret_cast<R*>(gw + (i * d.O + o) * P + p0);
        std::fill(acc, acc + 2 * n, R(0));
        for (int64_t b = 0; b < d.B; ++b)
          cmul_acc<true, false>(acc, reinterpret_cast<const R*>(x + (b * d.I + i) * P + p0),
                                reinterpret_cast<const R*>(g + (b * d.O + o) * P + p0), n);
      }
  });
}

// ---- shape and dtype checks


// x must be a complex (B, C, L, M) tensor.
void check_coefficients(const Tensor& x, const char* op, const char* what) {
  GS_CHECK(x.defined(), "{}: {} is an undefined tensor", op, what);
  GS_CHECK(is_complex(x.dtype()),
           "{}: expected complex {} (c64 or c128; f32 models use c64, f64 models c128), got {} (make real data "
           "complex with gs::to(t, DType::c64) or gs::complex(re, im))",
           op, what, x.meta_str());
  GS_CHECK(x.dim() == 4, "{}: expected {} of 4 dims (B, C, lmax, mmax), got {}", op, what, x.meta_str());
}

Shape weight_shape(int64_t I, int64_t O, int64_t L, int64_t M, SpectralOperator op) {
  return op == SpectralOperator::driscoll_healy ? Shape{I, O, L} : Shape{I, O, L, M};
}

// x is (B, C, L, M) with C = I (contract) or O (adjoint); checks w against it.
void check_weight(const Tensor& x, const Tensor& w, SpectralOperator op, Kind kind) {
  const char* name = op_name(op, kind);
  const bool adj = kind == Kind::adjoint;
  check_coefficients(x, name, adj ? "coefficients x (B, Cout, lmax, mmax)" : "coefficients x (B, Cin, lmax, mmax)");
  GS_CHECK(w.defined(), "{}: the weight is an undefined tensor", name);
  const bool dh = op == SpectralOperator::driscoll_healy;
  const int64_t nd = dh ? 3 : 4, C = x.size(1), L = x.size(2), M = x.size(3);
  const bool ok = w.dim() == nd && w.size(adj ? 1 : 0) == C && w.size(2) == L && (dh || w.size(3) == M);
  const std::string tail = std::to_string(L) + (dh ? "" : ", " + std::to_string(M));
  GS_CHECK(ok, "{}: expected a weight {} = {} for x {} = {}, got {}", name,
           dh ? "(Cin, Cout, lmax)" : "(Cin, Cout, lmax, mmax)",
           adj ? fmt::format("(Cin, {}, {})", C, tail) : fmt::format("({}, Cout, {})", C, tail),
           adj ? "(B, Cout, lmax, mmax)" : "(B, Cin, lmax, mmax)", shape_str(x.sizes()), w.meta_str());
  GS_CHECK(w.dtype() == x.dtype(), "{}: expected the weight to have x's dtype {}, got {} (weight {})", name,
           dtype_name(x.dtype()), dtype_name(w.dtype()), w.meta_str());
  kernels::check_same_device(x, w, name);
}

void check_weight_grad_operands(const Tensor& x, const Tensor& g, SpectralOperator op) {
  const char* name = op_name(op, Kind::weight_grad);
  check_coefficients(x, name, "coefficients x (B, Cin, lmax, mmax)");
  check_coefficients(g, name, "output gradient g (B, Cout, lmax, mmax)");
  GS_CHECK(g.size(0) == x.size(0) && g.size(2) == x.size(2) && g.size(3) == x.size(3),
           "{}: expected g (B, Cout, lmax, mmax) = ({}, Cout, {}, {}) to match x {}, got {}", name, x.size(0),
           x.size(2), x.size(3), shape_str(x.sizes()), shape_str(g.sizes()));
  GS_CHECK(g.dtype() == x.dtype(), "{}: expected g to have x's dtype {}, got {}", name, dtype_name(x.dtype()),
           dtype_name(g.dtype()));
  kernels::check_same_device(x, g, name);
}

// ---- the recorded ops

Tensor apply_op(const Tensor& x, const Tensor& w, SpectralOperator op, bool adjoint);
Tensor weight_grad_op(const Tensor& x, const Tensor& g, SpectralOperator op);

// contract (adjoint = false) or adjoint.
Tensor apply_op(const Tensor& x, const Tensor& w, SpectralOperator op, bool adjoint) {
  const Kind kind = adjoint ? Kind::adjoint : Kind::contract;
  check_weight(x, w, op, kind);
  const Dims d{x.size(0), w.size(0), w.size(1), x.size(2), x.size(3)};
  Tensor y;
  const ContractionPath path = spectral_contraction_path(x);  // the one rule (legendre/path.h)
  if (path == ContractionPath::device_kernels) {
    y = detail::spectral_apply_kernels(x, w, op, adjoint);
  } else if (path == ContractionPath::device_gemm) {
    y = detail::spectral_apply_gemm(x, w, op, adjoint);
  } else {
    y = empty({d.B, adjoint ? d.I : d.O, d.L, d.M}, x.dtype(), x.device());
    if (y.numel() > 0) {
      Tensor xc = contiguous_copy(x), wc = contiguous_copy(w);
      dispatch_float_complex(x.dtype(), op_name(op, kind), [&]<typename T>() {
        if constexpr (is_complex_v<T>) {
          T *py = y.data<T>(), *px = xc.data<T>(), *pw = wc.data<T>();
          if (x.size(1) == 0) std::fill(py, py + y.numel(), T(0));
          else if (op == SpectralOperator::driscoll_healy)
            adjoint ? dh_apply_kernel<T, true>(py, px, pw, d) : dh_apply_kernel<T, false>(py, px, pw, d);
          else adjoint ? diagonal_apply_kernel<T, true>(py, px, pw, d) : diagonal_apply_kernel<T, false>(py, px, pw, d);
        }
      });
    }
  }
  if (should_record({x, w})) {
    // grad_x needs w and grad_w needs x: keep only what will be used.
    Tensor keep_x = needs_gradient(w) ? x : Tensor(), keep_w = needs_gradient(x) ? w : Tensor();
    record_op(op_name(op, kind), {x, w}, {&y}, {keep_x, keep_w}, {},
              [op, adjoint](BackwardContext& ctx, const std::vector<Tensor>& g) {
                Tensor gx = ctx.needs_input_grad(0) ? apply_op(g[0], ctx.saved(1), op, !adjoint) : Tensor();
                Tensor gw;
                if (ctx.needs_input_grad(1))
                  gw = adjoint ? weight_grad_op(g[0], ctx.saved(0), op) : weight_grad_op(ctx.saved(0), g[0], op);
                return std::vector<Tensor>{gx, gw};
              });
  }
  return y;
}

Tensor weight_grad_op(const Tensor& x, const Tensor& g, SpectralOperator op) {
  check_weight_grad_operands(x, g, op);
  const Dims d{x.size(0), x.size(1), g.size(1), x.size(2), x.size(3)};
  Tensor gw;
  const ContractionPath path = spectral_contraction_path(x);  // the one rule (legendre/path.h)
  if (path == ContractionPath::device_kernels) {
    gw = detail::spectral_weight_grad_kernels(x, g, op);
  } else if (path == ContractionPath::device_gemm) {
    gw = detail::spectral_weight_grad_gemm(x, g, op);
  } else {
    gw = empty(weight_shape(d.I, d.O, d.L, d.M, op), x.dtype(), x.device());
    if (gw.numel() > 0) {
      Tensor xc = contiguous_copy(x), gc = contiguous_copy(g);
      dispatch_float_complex(x.dtype(), op_name(op, Kind::weight_grad), [&]<typename T>() {
        if constexpr (is_complex_v<T>) {
          if (d.B == 0 || d.M == 0) std::fill(gw.data<T>(), gw.data<T>() + gw.numel(), T(0));
          else if (op == SpectralOperator::driscoll_healy) dh_weight_grad_kernel<T>(gw.data<T>(), xc.data<T>(), gc.data<T>(), d);
          else diagonal_weight_grad_kernel<T>(gw.data<T>(), xc.data<T>(), gc.data<T>(), d);
        }
      });
    }
  }
  if (should_record({x, g})) {
    Tensor keep_x = needs_gradient(g) ? x : Tensor(), keep_g = needs_gradient(x) ? g : Tensor();
    record_op(op_name(op, Kind::weight_grad), {x, g}, {&gw}, {keep_x, keep_g}, {},
              [op](BackwardContext& ctx, const std::vector<Tensor>& G) {
                Tensor gx = ctx.needs_input_grad(0) ? apply_op(ctx.saved(1), G[0], op, true) : Tensor();
                Tensor gg = ctx.needs_input_grad(1) ? apply_op(ctx.saved(0), G[0], op, false) : Tensor();
                return std::vector<Tensor>{gx, gg};
              });
  }
  return gw;
}

}  // namespace

SpectralOperator parse_spectral_operator(std::string_view name) {
  if (name == "driscoll-healy" || name == "dhconv") return SpectralOperator::driscoll_healy;
  if (name == "diagonal") return SpectralOperator::diagonal;
  fail("spectral operator: expected \"driscoll-healy\" (or \"dhconv\") or \"diagonal\", got \"{}\"", name);
}

Tensor spectral_conv_dh(const Tensor& x, const Tensor& w) { return apply_op(x, w, SpectralOperator::driscoll_healy, false); }

Tensor spectral_conv_diagonal(const Tensor& x, const Tensor& w) { return apply_op(x, w, SpectralOperator::diagonal, false); }

Tensor spectral_conv(const Tensor& x, const Tensor& w, SpectralOperator op) { return apply_op(x, w, op, false); }

Tensor spectral_conv_adjoint(const Tensor& x, const Tensor& w, SpectralOperator op) { return apply_op(x, w, op, true); }

Tensor spectral_conv_weight_grad(const Tensor& x, const Tensor& g, SpectralOperator op) {
  return weight_grad_op(x, g, op);
}

namespace {

using V = std::vector<Tensor>;
constexpr DType z = DType::c128;

const OpRegistrar registrar{{
    {"spectral_conv_dh",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"odd sizes", {sample_leaf({2, 3, 3, 2}, sub_key(k, 1), z), sample_leaf({3, 2, 3}, sub_key(k, 2), z)}},
           {"non-contiguous x", {sample_leaf_transposed({2, 2, 3, 2}, sub_key(k, 3), z), sample_leaf({2, 3, 3}, sub_key(k, 4), z)}}};
     },
     [](const V& x) { return V{spectral_conv_dh(x[0], x[1])}; }},
    {"spectral_conv_diagonal",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"odd sizes", {sample_leaf({2, 3, 3, 2}, sub_key(k, 1), z), sample_leaf({3, 2, 3, 2}, sub_key(k, 2), z)}},
           {"non-contiguous w", {sample_leaf({2, 2, 2, 3}, sub_key(k, 3), z), sample_leaf_transposed({2, 1, 2, 3}, sub_key(k, 4), z)}}};
     },
     [](const V& x) { return V{spectral_conv_diagonal(x[0], x[1])}; }},
    {"spectral_conv_adjoint",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"x (B, Cout, L, M) and both weights",
            {sample_leaf({2, 2, 3, 2}, sub_key(k, 1), z), sample_leaf({3, 2, 3}, sub_key(k, 2), z), sample_leaf({3, 2, 3, 2}, sub_key(k, 3), z)}}};
     },
     [](const V& x) {
       return V{spectral_conv_adjoint(x[0], x[1], SpectralOperator::driscoll_healy),
                spectral_conv_adjoint(x[0], x[2], SpectralOperator::diagonal)};
     }},
    {"spectral_conv_weight_grad",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"x and g", {sample_leaf({2, 3, 3, 2}, sub_key(k, 1), z), sample_leaf({2, 2, 3, 2}, sub_key(k, 2), z)}}};
     },
     [](const V& x) {
       return V{spectral_conv_weight_grad(x[0], x[1], SpectralOperator::driscoll_healy),
                spectral_conv_weight_grad(x[0], x[1], SpectralOperator::diagonal)};
     }},
}};

}  // namespace
}  // namespace gs::sphere
