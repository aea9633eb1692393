// The spectral-convolution contractions (spectral_conv.h) one output value at a time, as plain
// arithmetic on interleaved (re, im) pairs of contiguous operands: the CUDA kernels
// (spectral_conv_cuda.cu) run one thread per output value through the *_at forms (which also
// decode the flat index), and the CPU loops of spectral_conv_kernels.cpp run the same forms, so
// the CPU suites test the arithmetic and the indexing the GPU runs.
// x (B, Cx, L, M); w (I, O, L) for Driscoll-Healy (DH), (I, O, L, M) for diagonal. No checks here.
#pragma once
#include <cstdint>

#include "ops/elementwise_math.h"  // GS_HD

namespace gs::sphere::spectral {

struct Dims {
  int64_t B, I, O, L, M;  // I and O: the weight's channel dims
};

// The weight element (i, o, l, m) of a DH or diagonal weight.
GS_HD inline int64_t weight_index(bool dh, const Dims& d, int64_t i, int64_t o, int64_t l, int64_t m) {
  return dh ? (i * d.O + o) * d.L + l : ((i * d.O + o) * d.L + l) * d.M + m;
}

// contract:  y[b, o, l, m] = sum_i x[b, i, l, m] w(i, o, l, m)          (c = o, x has I channels)
// adjoint:   y[b, i, l, m] = sum_o x[b, o, l, m] conj(w(i, o, l, m))    (c = i, x has O channels)
template <typename R>
GS_HD inline void apply_value(const R* x, const R* w, const Dims& d, bool dh, bool adjoint, int64_t b, int64_t c,
                              int64_t l, int64_t m, R* out) {
  const int64_t cin = adjoint ? d.O : d.I;
  R re = 0, im = 0;
  for (int64_t k = 0; k < cin; ++k) {
    const int64_t wi = adjoint ? weight_index(dh, d, c, k, l, m) : weight_index(dh, d, k, c, l, m);
    const R wr = w[2 * wi], wim = adjoint ? -w[2 * wi + 1] : w[2 * wi + 1];
    const int64_t xi = ((b * cin + k) * d.L + l) * d.M + m;
    const R xr = x[2 * xi], xim = x[2 * xi + 1];
    re += xr * wr - xim * wim;
    im += xr * wim + xim * wr;
  }
  out[0] = re;
  out[1] = im;
}

// gw(i, o, l, m) = sum_b conj(x[b, i, l, m]) g[b, o, l, m] (diagonal; m is the output's order), or
// gw(i, o, l) = the same summed over m as well (DH; m is ignored). x (B, I, L, M), g (B, O, L, M).
template <typename R>
GS_HD inline void weight_grad_value(const R* x, const R* g, const Dims& d, bool dh, int64_t i, int64_t o, int64_t l,
                                    int64_t m, R* out) {
  const int64_t m_begin = dh ? 0 : m, m_end = dh ? d.M : m + 1;
  R re = 0, im = 0;
  for (int64_t b = 0; b < d.B; ++b) {
    const R* xr = x + 2 * (((b * d.I + i) * d.L + l) * d.M);
    const R* gr = g + 2 * (((b * d.O + o) * d.L + l) * d.M);
    for (int64_t mm = m_begin; mm < m_end; ++mm) {
      const R a = xr[2 * mm], ai = xr[2 * mm + 1], c = gr[2 * mm], ci = gr[2 * mm + 1];
      re += a * c + ai * ci;  // conj(a + i ai) (c + i ci)
      im += a * ci - ai * c;
    }
  }
  out[0] = re;
  out[1] = im;
}

// Flat output indices, the order m fastest. apply: i over B * (adjoint ? I : O) * L * M.
template <typename R>
GS_HD inline void apply_at(const R* x, const R* w, R* y, const Dims& d, bool dh, bool adjoint, int64_t i) {
  const int64_t cout = adjoint ? d.I : d.O;
  const int64_t m = i % d.M, l = (i / d.M) % d.L, c = (i / (d.M * d.L)) % cout, b = i / (d.M * d.L * cout);
  apply_value(x, w, d, dh, adjoint, b, c, l, m, y + 2 * i);
}
// weight_grad: n over I * O * L (DH) or I * O * L * M (diagonal), gw's element n.
template <typename R>
GS_HD inline void weight_grad_at(const R* x, const R* g, R* gw, const Dims& d, bool dh, int64_t n) {
  const int64_t per = dh ? 1 : d.M;  // outputs per (i, o, l)
  const int64_t m = n % per, l = (n / per) % d.L, o = (n / (per * d.L)) % d.O, i = n / (per * d.L * d.O);
  weight_grad_value(x, g, d, dh, i, o, l, m, gw + 2 * n);
}

}  // namespace gs::sphere::spectral
