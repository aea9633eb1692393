// softmax and log_softmax along a dim, and the classification losses on them, with torch's
// semantics. f32 and f64; class indices are i64.
#pragma once
#include "engine/tensor.h"

namespace gs {

// ---- ops/softmax.cpp: exp(x - max) / sum(exp(x - max)) along dim, and its log, stable for any
// finite input; a slice with +inf or only -inf is NaN, as torch's. Rules as torch's
// (y (g - sum(g y)); g - exp(y) sum(g)), in differentiable ops.
Tensor softmax(const Tensor& t, int64_t dim);
Tensor log_softmax(const Tensor& t, int64_t dim);

// ---- ops/loss.cpp
enum class LossReduction { none, mean, sum };
// Negative log-likelihood of class indices (torch.nn.functional.nll_loss). input (N, C),
// (N, C, d1, ...) or (C); target i64 of the input's shape without the class dim, each in [0, C)
// or ignore_index (that element's loss is 0 and it leaves the mean). weight: none, or (C) of the
// input's dtype; loss_i = -weight[t_i] input[i, t_i]. mean divides the sum by the sum of the
// weights of the targets not ignored (NaN when there is none, as torch). The weight may require
// grad (torch refuses to differentiate it).
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                LossReduction reduction = LossReduction::mean, int64_t ignore_index = -100);
// nll_loss(log_softmax(input, class dim), ...), mixed with label smoothing e in [0, 1] as torch:
// (1 - e) nll + e / C * (-sum_c weight_c log p_c), reduced the same way (mean: over the same
// weight sum). Class probabilities as the target are not supported.
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     LossReduction reduction = LossReduction::mean, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);

}  // namespace gs
