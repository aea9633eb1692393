// The CUDA stream bookkeeping of one backward pass (engine/README.md, "Streams"): a node's backward
// runs on its forward's stream; where a gradient is read on another stream than the one that made
// it, the reader waits for an event and the gradient's block is marked used there (the caching
// allocator is stream-ordered); when the pass ends, the caller's streams wait for everything it
// queued. The engine keeps it apart from the gradient arithmetic; on a CPU graph it does nothing.
#pragma once
#include <optional>
#include <vector>

#include "engine/autograd/node.h"
#include "engine/cuda_runtime.h"

namespace gs {

class BackwardStreams {
 public:
  // Before `n` runs: the stream its rule (and the sums of the gradients it hands on) runs on, none
  // for a node that has no CUDA output; that stream waits for the streams that made n's incoming
  // gradients.
  std::optional<cuda::Stream> enter(Node& n);
  // Before the gradient `g`, just made on the current stream, is summed into `slot`, one of the
  // gradients arriving at `consumer`: that stream waits for those already in the slot, and is
  // recorded as one of the consumer's producers.
  void before_accumulate(const Tensor& g, const Tensor& slot, Node& consumer);
  // After the pass: the caller reads the results (captured gradients, .grad) on its own streams,
  // so they wait for every stream the pass queued work on.
  void hand_back_to_caller();

 private:
  std::vector<cuda::Stream> used_;  // every CUDA stream this pass queued work on
};

}  // namespace gs
