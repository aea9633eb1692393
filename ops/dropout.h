// Dropout (torch.nn.Dropout), channel dropout (nn.Dropout2d) and stochastic depth (timm's and
// torch-harmonics' DropPath), with masks from the counter-based generator (engine/random.h).
//
// The keep decision of an element is Philox of (key, its GLOBAL mask index), so a tensor split
// across ranks (a lat/lon tile of the global field, a shard of the batch) draws exactly the part of
// the mask that the whole tensor draws on one process. `window` says where x sits in the global
// tensor: its global sizes and the start of x's block in each dim (engine/factory.h's RandomWindow,
// as rand/randn take it); nullptr: x is the whole tensor. Only the dims that carry decisions enter
// the index, so a batch shard only needs start[0] = the global index of its first sample.
//
// Semantics, as torch: an element is dropped with probability p, kept ones are scaled by 1 / (1 - p);
// training == false or p == 0 returns x itself; p == 1 gives x * 0 (zeros; a NaN stays NaN); p
// outside [0, 1] is an error (also in eval). Dtypes f32 and f64; the mask does not depend on the dtype
// or the device. The decision is gs::rand(f64) of the same key and index being below p.
//
// Backward: g times the same mask, recomputed from the key (nothing is saved: a mask would cost
// as much memory as the activation it drops, and the key reproduces it bit for bit). The rule is
// the op itself on g, so every derivative order works.
#pragma once
#include "engine/factory.h"
#include "engine/random.h"
#include "engine/tensor.h"

namespace gs {

// One decision per element.
Tensor dropout(const Tensor& x, double p, RandomKey key, bool training = true, const RandomWindow* window = nullptr);
// x (N, C, ...): one decision per (sample, channel), shared over the trailing dims (nn.Dropout2d on
// (N, C, H, W), whose index is the global n * C + c).
Tensor feature_dropout(const Tensor& x, double p, RandomKey key, bool training = true,
                       const RandomWindow* window = nullptr);
// x (N, ...): one decision per sample, index the global sample n (stochastic depth: the residual
// branch of a sample is dropped whole, kept ones scaled by 1 / keep_prob). p == 1 gives zeros
// where torch-harmonics' drop_path divides by 0 (NaN), as timm's newer form does.
Tensor drop_path(const Tensor& x, double p, RandomKey key, bool training = true, const RandomWindow* window = nullptr);

}  // namespace gs
