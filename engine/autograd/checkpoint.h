// Activation checkpointing, as torch.utils.checkpoint(use_reentrant=False): `fn` runs without its
// tensors saved for backward; backward replays it (once, at the first read of anything it would have
// saved) and reads the replayed tensors instead.
//
//   auto out = gs::checkpoint([&](const std::vector<Tensor>& in) { return {block(in[0])}; }, {x});
//
// Built on saved-tensor hooks (saved_hooks.h): during the first run every saved tensor is replaced
// by its index; the replay saves the same tensors in the same order. So:
// - the replay must do the same work: same ops, branches and random keys (gradsphere's noise is
//   Philox of explicit keys, so a replay draws the same numbers); a replay that saves a different
//   number of tensors, or a tensor of another shape or dtype, is an error;
// - an input written in place between forward and backward is the version error it would be
//   without checkpointing (the inputs' version counters are watched);
// - the region's nodes stay in the graph (their saved tensors do not): hooks, anomaly names, DOT
//   export and double backward (create_graph) see the same graph as without checkpointing;
// - collectives inside `fn` are reissued by the replay at the same point of backward on every rank.
// Under no_grad or inference mode `fn` just runs.
#pragma once
#include <functional>
#include <vector>

#include "engine/tensor.h"

namespace gs {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs);

}  // namespace gs
