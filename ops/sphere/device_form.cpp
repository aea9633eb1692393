// The device form setting (device_form.h).
#include "ops/sphere/device_form.h"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "engine/error.h"

namespace gs::sphere {
namespace {

DeviceSphereForm form_from_environment() {
  const char* v = std::getenv("GS_DEVICE_SPHERE");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "gemm") == 0) return DeviceSphereForm::gemm;
  GS_CHECK(std::strcmp(v, "kernels") == 0, "GS_DEVICE_SPHERE: expected gemm or kernels, got '{}'", v);
  return DeviceSphereForm::kernels;
}

std::atomic<int>& setting() {  // -1: not read from the environment yet
  static std::atomic<int> f{-1};
  return f;
}

}  // namespace

DeviceSphereForm set_device_sphere_form(DeviceSphereForm form) {
  const DeviceSphereForm previous = device_sphere_form();
  setting().store(static_cast<int>(form));
  return previous;
}

DeviceSphereForm device_sphere_form() {
  int f = setting().load();
  if (f < 0) {
    f = static_cast<int>(form_from_environment());
    setting().store(f);
  }
  return static_cast<DeviceSphereForm>(f);
}

const char* device_sphere_form_name(DeviceSphereForm form) {
  return form == DeviceSphereForm::kernels ? "kernels" : "gemm";
}

}  // namespace gs::sphere
