// Spectral convolution on SHT coefficients: the channel mixing of an SFNO block, done per degree
// (Driscoll-Healy) or per (degree, order) (diagonal). Both are bilinear complex contractions over
// the input channel; their backward rules are the same contractions with conjugated, transposed
// arguments, so gradients of gradients work.
//
//   x (B, Cin, lmax, mmax)                                    complex (c64 or c128)
//   Driscoll-Healy  w (Cin, Cout, lmax):        y[b,o,l,m] = sum_i x[b,i,l,m] w[i,o,l]
//   diagonal        w (Cin, Cout, lmax, mmax):  y[b,o,l,m] = sum_i x[b,i,l,m] w[i,o,l,m]
//   y (B, Cout, lmax, mmax), same dtype
//
// Weight layout (Cin, Cout, lmax[, mmax]), complex: Makani's and earlier ACE's SpectralConvS2
// (weight_shape = [in_channels, out_channels] + modes; current ACE still reads ungrouped
// (Cin, Cout, nlat, 2) real-pair checkpoints and reorders them). Other layouts, to load them:
//   - torch-harmonics (examples/models/_layers.py, SpectralConvS2): (Cout, Cin, lmax[, mmax]) with
//     einsum "...ilm,oil->...olm" / "...ilm,oilm->...olm": permute({1, 0, 2[, 3]});
//   - current ACE (dhconv only): (groups, lmax, Cout, Cin) real pairs, einsum "bgixy,gxoi->bgoxy":
//     with one group, permute({2, 1, 0}) of the (lmax, Cout, Cin) complex view.
// f32 models carry c64 coefficients and c64 weights; f64 models c128. Real inputs are rejected
// (make them complex with gs::complex or gs::to first); x and w must share the dtype.
#pragma once
#include <string_view>

#include "engine/tensor.h"

namespace gs::sphere {

enum class SpectralOperator { driscoll_healy, diagonal };

// "driscoll-healy" or "diagonal" (torch-harmonics' operator_type names; "dhconv" is accepted too).
SpectralOperator parse_spectral_operator(std::string_view name);

// y (B, Cout, L, M) = x (B, Cin, L, M) contracted with w (Cin, Cout, L).
Tensor spectral_conv_dh(const Tensor& x, const Tensor& w);
// y (B, Cout, L, M) = x (B, Cin, L, M) contracted with w (Cin, Cout, L, M).
Tensor spectral_conv_diagonal(const Tensor& x, const Tensor& w);
// One of the two, by `op`.
Tensor spectral_conv(const Tensor& x, const Tensor& w, SpectralOperator op);

// The adjoint of spectral_conv in x: y[b,i,l,m] = sum_o x[b,o,l,m] conj(w[i,o,l(,m)]), taking
// x (B, Cout, L, M) to (B, Cin, L, M). It is spectral_conv's gradient w.r.t. x; an op of its own
// (reading w in place) so that it can be differentiated again.
Tensor spectral_conv_adjoint(const Tensor& x, const Tensor& w, SpectralOperator op);

// The weight-gradient contraction (spectral_conv's gradient w.r.t. w; an op of its own too):
//   Driscoll-Healy  gw (Cin, Cout, L)    [i,o,l]   = sum_{b,m} conj(x[b,i,l,m]) g[b,o,l,m]
//   diagonal        gw (Cin, Cout, L, M) [i,o,l,m] = sum_b     conj(x[b,i,l,m]) g[b,o,l,m]
// x (B, Cin, L, M), g (B, Cout, L, M).
Tensor spectral_conv_weight_grad(const Tensor& x, const Tensor& g, SpectralOperator op);

}  // namespace gs::sphere
