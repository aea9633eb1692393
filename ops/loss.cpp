// nll_loss and cross_entropy on class indices, as compositions: each target selects its class
// through a one-hot mask (eq against the class numbers, broadcast), so the losses are sums of
// masked elementwise ops, run on every device those run on, and differentiable to every order.
#include "engine/factory.h"
#include "ops/compare.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/softmax.h"
#include "ops/view.h"

namespace gs {
namespace {

// What a target selects: hit (the input's shape) marks each target's class, valid (the target's
// shape) the targets that are not ignore_index, weight the selected class weight (0 where
// ignored; 1 without class weights).
struct Selection {
  int64_t class_dim = 0, classes = 0;
  Tensor hit, valid, weight;
};

Selection select_targets(const Tensor& input, const Tensor& target, const Tensor& weight, int64_t ignore_index,
                         const char* op) {
  kernels::check_defined(input, op);
  kernels::check_defined(target, op, "target");
  if (is_storage_only(input.dtype())) fail_storage_only(op, input.dtype());
  GS_CHECK(is_floating(input.dtype()), "{}: expected an f32 or f64 input, got {}", op, input.meta_str());
  GS_CHECK(input.dim() >= 1, "{}: expected an input of (N, C), (N, C, d1, ...) or (C), got a 0-dim tensor", op);
  GS_CHECK(target.dtype() == DType::i64, "{}: expected the target to hold class indices as i64, got {}{}", op,
           target.meta_str(), is_floating(target.dtype()) ? " (class probabilities as the target are not supported)" : "");
  kernels::check_same_device(input, target, op);
  Selection s;
  s.class_dim = input.dim() == 1 ? 0 : 1;
  s.classes = input.size(s.class_dim);
  Shape expected = input.sizes();
  expected.erase(expected.begin() + s.class_dim);
  GS_CHECK(target.sizes() == expected, "{}: expected a target of shape {} for the input {}, got {}", op,
           shape_str(expected), shape_str(input.sizes()), shape_str(target.sizes()));
  const std::vector<int64_t> t = target.to_vector<int64_t>();
  for (size_t i = 0; i < t.size(); ++i)
    GS_CHECK(t[i] == ignore_index || (t[i] >= 0 && t[i] < s.classes),
             "{}: target {} at flat index {} is out of range for {} classes (expected 0..{}, or ignore_index {})", op,
             t[i], i, s.classes, s.classes - 1, ignore_index);
  Shape class_shape(input.dim(), 1);
  class_shape[s.class_dim] = s.classes;
  const Tensor class_numbers = to(reshape(arange(s.classes), class_shape), input.device());
  s.valid = logical_not(eq(target, static_cast<double>(ignore_index)));
  s.hit = logical_and(eq(unsqueeze(target, s.class_dim), class_numbers), unsqueeze(s.valid, s.class_dim));
  if (weight.defined()) {
    GS_CHECK(weight.dim() == 1 && weight.size(0) == s.classes && weight.dtype() == input.dtype(),
             "{}: expected class weights of shape ({}) and the input's dtype {}, got {}", op, s.classes,
             dtype_name(input.dtype()), weight.meta_str());
    kernels::check_same_device(input, weight, op);
    s.weight = sum(where(s.hit, reshape(weight, class_shape), scalar_like(input, 0.0)), {s.class_dim});
  } else {
    s.weight = where(s.valid, scalar_like(input, 1.0), scalar_like(input, 0.0));
  }
  return s;
}

// mean: divided by the selected weights' sum (torch's total_weight), NaN when it is 0.
Tensor reduce_loss(const Tensor& losses, const Selection& s, LossReduction reduction) {
  switch (reduction) {
    case LossReduction::none: return losses;
    case LossReduction::sum: return sum(losses);
    case LossReduction::mean: return div(sum(losses), sum(s.weight));
  }
  return losses;
}

Tensor nll_selected(const Tensor& input, const Tensor& weight, const Selection& s, LossReduction reduction) {
  // -weight[t] * input[t]: the masked sum picks one element per target (0 where ignored).
  const Tensor picked = sum(where(s.hit, input, scalar_like(input, 0.0)), {s.class_dim});
  const Tensor weighted = weight.defined() ? mul(s.weight, picked) : picked;
  // torch's sign of a zero loss: -(w x) in a batch, 0 - w x for one unbatched sample.
  return reduce_loss(input.dim() == 1 ? sub(0.0, weighted) : neg(weighted), s, reduction);
}

}  // namespace

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, LossReduction reduction,
                int64_t ignore_index) {
  const Selection s = select_targets(input, target, weight, ignore_index, "nll_loss");
  return nll_selected(input, weight, s, reduction);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, LossReduction reduction,
                     int64_t ignore_index, double label_smoothing) {
  GS_CHECK(label_smoothing >= 0.0 && label_smoothing <= 1.0,
           "cross_entropy: label_smoothing must be in [0, 1], got {}", label_smoothing);
  const Selection s = select_targets(input, target, weight, ignore_index, "cross_entropy");
  const Tensor log_p = log_softmax(input, s.class_dim);
  const Tensor nll = nll_selected(log_p, weight, s, reduction);
  if (label_smoothing == 0.0) return nll;
  // torch's smoothing term: -sum_c weight_c log p_c per target, 0 where ignored.
  Shape class_shape(input.dim(), 1);
  class_shape[s.class_dim] = s.classes;
  const Tensor spread = neg(sum(weight.defined() ? mul(log_p, reshape(weight, class_shape)) : log_p, {s.class_dim}));
  const Tensor smooth = reduce_loss(where(s.valid, spread, scalar_like(input, 0.0)), s, reduction);
  return add(mul(nll, 1.0 - label_smoothing), mul(smooth, label_smoothing / static_cast<double>(s.classes)));
}

namespace {
using V = std::vector<Tensor>;

Tensor targets(std::vector<int64_t> values, Shape sizes, const Tensor& like) {
  return to(from_vector(values, std::move(sizes)), like.device());
}

// (4, 3) logits with class weights, and (2, 3, 2) with a spatial dim; targets hold an ignored
// element, and the calls cover every reduction, an ignore_index inside [0, C) and smoothing.
std::vector<OpSample> loss_samples(RandomKey k) {
  return {{"(N, C) weighted", {sample_leaf({4, 3}, sub_key(k, 1)), sample_leaf_in({3}, sub_key(k, 2), 0.5, 2.0)}},
          {"(N, C, d) weighted", {sample_leaf({2, 3, 2}, sub_key(k, 3)), sample_leaf_in({3}, sub_key(k, 4), 0.5, 2.0)}}};
}

// With one element at the default ignore_index -100, or (in_range) none: an ignore_index inside
// [0, C) leaves -100 out of range, an error as in torch.
Tensor targets_for(const Tensor& x, bool in_range = false) {
  return x.dim() == 2 ? targets({2, in_range ? 1 : -100, 0, 1}, {4}, x)
                      : targets({1, 0, in_range ? 0 : -100, 2}, {2, 2}, x);
}

const OpRegistrar registrar{
    {"nll_loss", loss_samples,
     [](const V& x) {
       const Tensor t = targets_for(x[0]);
       return V{nll_loss(x[0], t), nll_loss(x[0], t, x[1]), nll_loss(x[0], t, x[1], LossReduction::sum),
                nll_loss(x[0], t, x[1], LossReduction::none), nll_loss(x[0], targets_for(x[0], true), {}, LossReduction::mean, 1)};
     }},
    {"cross_entropy", loss_samples,
     [](const V& x) {
       const Tensor t = targets_for(x[0]);
       return V{cross_entropy(x[0], t), cross_entropy(x[0], t, x[1]),
                cross_entropy(x[0], t, x[1], LossReduction::mean, -100, 0.2),
                cross_entropy(x[0], targets_for(x[0], true), {}, LossReduction::none, 0, 0.1),
                cross_entropy(x[0], t, x[1], LossReduction::sum, -100, 0.3)};
     }},
};
}  // namespace

}  // namespace gs
