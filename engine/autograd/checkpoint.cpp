#include "engine/autograd/checkpoint.h"

#include <memory>

#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/saved_hooks.h"

namespace gs {
namespace {

// One saved tensor of the region: what its node keeps instead of the tensor. The replay fills the
// slots still alive; a slot goes (and its replayed tensor with it) when its node releases its saved
// tensors after running in backward, so the replay's memory shrinks as backward goes, as the first
// run's would.
struct Slot {
  Tensor value;
};

// One checkpointed call: what it needs to replay, and its slots (weakly: their nodes own them).
struct Frame {
  CheckpointFn fn;
  std::vector<Tensor> inputs;
  std::vector<std::weak_ptr<Slot>> slots;
};

void replay(Frame& frame) {
  std::vector<Tensor> saved;
  {
    GradModeGuard on(true);              // the first run recorded (checkpoint returns early otherwise)
    forward_ad::PauseGuard no_tangents;  // the replay is for reverse mode only
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
  GS_CHECK(saved.size() == frame.slots.size(),
           "checkpoint: the replayed forward saved {} tensors for backward, the first run {}. A checkpointed function "
           "must do the same work on every call (same ops and branches, same random keys, no state it changes)",
           saved.size(), frame.slots.size());
  for (size_t k = 0; k < saved.size(); ++k)
    if (auto slot = frame.slots[k].lock()) slot->value = saved[k];
}

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs) {
  if (!recording_enabled()) return fn(inputs);
  auto frame = std::make_shared<Frame>();
  frame->fn = fn;
  frame->inputs = inputs;
  // The unpack hook holds the frame; the frame holds no node (inputs, fn and weak slots).
  SavedTensorHooks placeholders(
      [frame](const Tensor&) -> std::any {
        auto slot = std::make_shared<Slot>();
        frame->slots.push_back(slot);
        return slot;
      },
      [frame](const std::any& packed) -> Tensor {
        const auto& slot = std::any_cast<const std::shared_ptr<Slot>&>(packed);
        if (!slot->value.defined()) replay(*frame);
        return slot->value;
      });
  return fn(inputs);
}

}  // namespace gs
