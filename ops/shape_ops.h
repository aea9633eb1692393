// Joining, splitting and padding tensors.
#pragma once
#include <vector>

#include "engine/tensor.h"

namespace gs {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
// Pieces of `split_size` along dim (the last may be smaller); views of t.
std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim = 0);
enum class PadMode { constant, circular };
// pads = {last_left, last_right, second_last_left, second_last_right, ...} as torch.nn.functional.pad.
// constant: fill with `value`; circular: wrap around (periodic), each pad at most the dim's size.
Tensor pad(const Tensor& t, const std::vector<int64_t>& pads, PadMode mode = PadMode::constant, double value = 0.0);

}  // namespace gs
