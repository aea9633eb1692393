#include "engine/autograd/checkpoint.h"

#include <memory>

#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/saved_hooks.h"

namespace gs {
namespace {

// One checkpointed call: what it needs to replay, and the replay's saved tensors.
struct Frame {
  CheckpointFn fn;
  std::vector<Tensor> inputs;
  size_t saved_in_first_run = 0;
  bool replayed = false;
  std::vector<Tensor> replayed_saved;
};

void replay(Frame& frame) {
  std::vector<Tensor> saved;
  {
    GradModeGuard on(true);               // the first run recorded (checkpoint returns early otherwise)
    forward_ad::PauseGuard no_tangents;   // the replay is for reverse mode only
    SavedTensorHooks capture(
        [&saved](const Tensor& t) -> std::any {
          saved.push_back(t);
          return saved.size() - 1;
        },
        [](const std::any&) -> Tensor {
          fail("checkpoint: a tensor saved during the replay was read during the replay (internal error)");
        });
    frame.fn(frame.inputs);
  }
  GS_CHECK(saved.size() == frame.saved_in_first_run,
           "checkpoint: the replayed forward saved {} tensors for backward, the first run {}. A checkpointed function "
           "must do the same work on every call (same ops and branches, same random keys, no state it changes)",
           saved.size(), frame.saved_in_first_run);
  frame.replayed_saved = std::move(saved);
  frame.replayed = true;
}

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs) {
  if (!recording_enabled()) return fn(inputs);
  auto frame = std::make_shared<Frame>();
  frame->fn = fn;
  frame->inputs = inputs;
  // The unpack hook holds the frame; the frame must not hold the nodes (it holds inputs and fn).
  SavedTensorHooks placeholders(
      [frame](const Tensor&) -> std::any { return frame->saved_in_first_run++; },
      [frame](const std::any& packed) -> Tensor {
        if (!frame->replayed) replay(*frame);
        return frame->replayed_saved.at(std::any_cast<size_t>(packed));
      });
  return fn(inputs);
}

}  // namespace gs
