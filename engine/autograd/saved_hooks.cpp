#include "engine/autograd/saved_hooks.h"

#include <vector>

namespace gs {
namespace {

thread_local std::vector<SavedTensorHookPair> t_hooks;

// What SaveInBf16 / SaveOnHost store: the packed data and where it came from.
struct Narrowed {
  Tensor data;
  DType dtype;
};
struct OnHost {
  Tensor data;
  Device device;
};

}  // namespace

SavedTensorHooks::SavedTensorHooks(PackHook pack, UnpackHook unpack) {
  GS_CHECK(pack && unpack, "SavedTensorHooks: both a pack and an unpack hook are needed");
  t_hooks.push_back({std::move(pack), std::move(unpack)});
}
SavedTensorHooks::~SavedTensorHooks() { t_hooks.pop_back(); }

const SavedTensorHookPair* current_saved_tensor_hooks() { return t_hooks.empty() ? nullptr : &t_hooks.back(); }

SaveInBf16::SaveInBf16()
    : SavedTensorHooks(
          [](const Tensor& t) -> std::any {
            if (t.dtype() != DType::f32 && t.dtype() != DType::f64) return t;
            return Narrowed{cast_copy(t, DType::bf16), t.dtype()};
          },
          [](const std::any& p) -> Tensor {
            if (const auto* n = std::any_cast<Narrowed>(&p)) return cast_copy(n->data, n->dtype);
            return std::any_cast<Tensor>(p);
          }) {}

SaveOnHost::SaveOnHost()
    : SavedTensorHooks(
          [](const Tensor& t) -> std::any {
            if (t.device().type == DeviceType::cpu) return t;
            return OnHost{to_device_copy(t, Device::cpu()), t.device()};
          },
          [](const std::any& p) -> Tensor {
            if (const auto* h = std::any_cast<OnHost>(&p)) return to_device_copy(h->data, h->device);
            return std::any_cast<Tensor>(p);
          }) {}

}  // namespace gs
