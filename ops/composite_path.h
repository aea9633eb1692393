// Composite paths: an op (or an optimizer step) with a native CPU kernel and, on CUDA, another
// path instead (the sphere ops: batched GEMMs or hand-written kernels as ops/sphere/legendre/path.h
// says, tensor-op norms; the optimizers' updates) takes that path when composite_path(t) is
// true: on CUDA, and on the CPU inside a CompositePathsOnCpu scope, so the CPU suites run those
// paths too and compare them with the native kernels.
#pragma once
#include "engine/tensor.h"

namespace gs {

bool composite_path(const Tensor& t);

class CompositePathsOnCpu {  // for tests: this thread takes the composite paths on the CPU
 public:
  CompositePathsOnCpu();
  ~CompositePathsOnCpu();
  CompositePathsOnCpu(const CompositePathsOnCpu&) = delete;
  CompositePathsOnCpu& operator=(const CompositePathsOnCpu&) = delete;

 private:
  bool prev_;
};

}  // namespace gs
