#include "engine/autograd/backward_streams.h"

#include <algorithm>

#include "engine/storage.h"

namespace gs {
namespace {

// The stream a node's backward runs on: its forward's (DESIGN.md: backward on the forward ops'
// stream); a node without one (a leaf's accumulator) on the current stream of its CUDA device.
std::optional<cuda::Stream> backward_stream(const Node& n) {
  if (n.forward_stream) return n.forward_stream;
  for (const auto& m : n.output_meta)
    if (m.device.type == DeviceType::cuda) return cuda::current_stream(m.device.index);
  return std::nullopt;
}

// Work queued on `s` from now on waits for what the producers' streams have queued so far (the
// gradients they handed on). Nothing to do when they all ran on `s`.
void wait_for_producers(const std::vector<cuda::Stream>& producers, const cuda::Stream& s) {
  for (const cuda::Stream& p : producers) {
    if (p == s) continue;
    cuda::Event e(p.device);
    e.record(p);
    e.block(s);
  }
}

void add_stream(std::vector<cuda::Stream>& streams, const cuda::Stream& s) {
  if (std::find(streams.begin(), streams.end(), s) == streams.end()) streams.push_back(s);
}

// Gradients made on other streams and read on `s`: their blocks must not be reused by their own
// stream before `s` has read them (the allocator is stream-ordered).
void mark_used_on(const std::vector<Tensor>& grads, const std::vector<cuda::Stream>& producers, const cuda::Stream& s) {
  bool crossed = false;
  for (const cuda::Stream& p : producers) crossed |= !(p == s);
  if (!crossed) return;
  for (const Tensor& g : grads)
    if (g.defined() && g.device().type == DeviceType::cuda) record_stream(g.storage(), s.id());
}

}  // namespace

std::optional<cuda::Stream> BackwardStreams::enter(Node& n) {
  const std::optional<cuda::Stream> stream = backward_stream(n);
  if (stream) {
    wait_for_producers(n.pass_state.producer_streams, *stream);
    mark_used_on(n.pass_state.buffer, n.pass_state.producer_streams, *stream);
    add_stream(used_, *stream);
  }
  return stream;
}

void BackwardStreams::before_accumulate(const Tensor& g, const Tensor& slot, Node& consumer) {
  if (g.device().type != DeviceType::cuda) return;
  auto& producers = consumer.pass_state.producer_streams;
  // Made on the current stream of its device (this node's, or the caller's for a node without
  // one, e.g. the root's seed or a to(cpu)'s copy back).
  const cuda::Stream here = cuda::current_stream(g.device().index);
  if (slot.defined()) {
    wait_for_producers(producers, here);  // the sum reads their gradient
    mark_used_on({slot}, producers, here);
  }
  add_stream(producers, here);
  add_stream(used_, here);
}

void BackwardStreams::hand_back_to_caller() {
  std::vector<cuda::Stream> caller;
  for (const cuda::Stream& s : used_) add_stream(caller, cuda::current_stream(s.device));
  for (const cuda::Stream& c : caller) wait_for_producers(used_, c);
}

}  // namespace gs
