// Saved-tensor hooks, as torch.autograd.graph.saved_tensors_hooks: while a guard lives, every
// tensor an op saves for backward goes through `pack` (its result is stored instead of the tensor),
// and each time backward reads it, through `unpack`, which must give back a tensor of the packed
// one's shape, dtype and device.
//
//   { gs::SaveInBf16 bf16;  loss = model(x); }   // activations held in bf16 (half of f32)
//   loss.backward();
//
// PyTorch's rules: pack runs once, when the op records its node (for inputs and outputs alike, on an
// alias without history, so a hook cannot make a reference cycle); unpack runs on every read, in
// backward. The version check still sees an in-place write made after saving (the version counter is
// watched, not the data). The innermost guard applies; guards nest and restore the outer one. The
// unpacked tensor gets back the saved tensor's reverse-mode history, so double backward works.
// Activation checkpointing (ops/checkpoint.h) is built on these hooks.
#pragma once
#include <any>
#include <functional>

#include "engine/tensor.h"

namespace gs {

using PackHook = std::function<std::any(const Tensor& saved)>;
using UnpackHook = std::function<Tensor(const std::any& packed)>;

struct SavedTensorHookPair {
  PackHook pack;
  UnpackHook unpack;
};

class SavedTensorHooks {
 public:
  SavedTensorHooks(PackHook pack, UnpackHook unpack);
  virtual ~SavedTensorHooks();
  SavedTensorHooks(const SavedTensorHooks&) = delete;
  SavedTensorHooks& operator=(const SavedTensorHooks&) = delete;
};

// The innermost active pair, or null.
const SavedTensorHookPair* current_saved_tensor_hooks();

// Ready-made hooks.
// Floating tensors (f32, f64) saved as bf16 and cast back on unpack (to their own dtype): half the
// memory of f32 activations, at bf16's 8-bit mantissa in the gradients' inputs. Others as they are.
class SaveInBf16 : public SavedTensorHooks {
 public:
  SaveInBf16();
};
// Device tensors copied to host memory on pack and back to their device on unpack (torch's
// save_on_cpu); host tensors are kept as they are.
class SaveOnHost : public SavedTensorHooks {
 public:
  SaveOnHost();
};

}  // namespace gs
