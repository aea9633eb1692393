// In-place ops: write into `self`, bump its version, and (when recording) route its history
// through a new node. On a leaf that requires grad they are errors unless grad mode is off
// (optimizer steps run under NoGradGuard); read-only tensors always refuse them.
#pragma once
#include "engine/tensor.h"

namespace gs {

Tensor& add_(Tensor& self, const Tensor& other, double alpha = 1.0);  // self += alpha * other
Tensor& add_(Tensor& self, double value);
Tensor& mul_(Tensor& self, const Tensor& other);
Tensor& mul_(Tensor& self, double value);
Tensor& copy_(Tensor& self, const Tensor& src);  // broadcasting src, casting dtype
Tensor& fill_(Tensor& self, double value);
Tensor& zero_(Tensor& self);

}  // namespace gs
