#include "engine/cuda_runtime.h"

#include "gradsphere_config.h"

#if GS_HAVE_CUDA
#include <cuda_runtime.h>

#include <mutex>
#include <vector>
#endif

#include "engine/error.h"

namespace gs::cuda {

#if GS_HAVE_CUDA

namespace {

struct Availability {
  int count = 0;
  std::string reason;
};

// Asked once: the answer does not change while the process runs.
const Availability& availability() {
  static const Availability a = [] {
    Availability r;
    cudaError_t e = cudaGetDeviceCount(&r.count);
    if (e != cudaSuccess) {
      r.count = 0;
      r.reason = cudaGetErrorString(e);
      cudaGetLastError();  // not sticky: clear it so later calls do not see it
    } else if (r.count == 0) {
      r.reason = "no CUDA device found";
    }
    return r;
  }();
  return a;
}

thread_local std::vector<Stream> t_current;  // index: device


std::string fault_hint(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorAssert:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
      return "; a kernel faulted on the device (the error is sticky: this process cannot use the GPU again; "
             "rerun with CUDA_LAUNCH_BLOCKING=1 to report it at the launch that faulted)";
    default:
      return "";
  }
}

}  // namespace

bool built_with_cuda() { return true; }
int device_count() { return availability().count; }
std::string unavailable_reason() { return availability().reason; }

void require_device(Device d, const char* op) {
  GS_CHECK(d.type == DeviceType::cuda, "{}: expected a CUDA device, got {}", op, d);
  const Availability& a = availability();
  GS_CHECK(a.count > 0, "{}: {} is not available: {}", op, d, a.reason);
  GS_CHECK(d.index >= 0 && d.index < a.count, "{}: {} does not exist (this machine has {} CUDA device{})", op, d,
           a.count, a.count == 1 ? "" : "s");
  int current = -1;
  GS_CUDA_CHECK(cudaGetDevice(&current), op);
  if (current != d.index) GS_CUDA_CHECK(cudaSetDevice(d.index), op);
}

void check(int err, const char* call, const char* op) {
  if (err == 0) return;
  auto e = static_cast<cudaError_t>(err);
  cudaGetLastError();  // a non-sticky error must not be blamed on the next launch
  fail("{}: {} failed: {} ({}){}", op, call, cudaGetErrorString(e), cudaGetErrorName(e), fault_hint(e));
}

void check_launch(const char* kernel, const char* op) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    fail("{}: launching kernel {} failed: {} ({}){}", op, kernel, cudaGetErrorString(e), cudaGetErrorName(e),
         fault_hint(e));
}

Stream current_stream(int device) {
  if (device < static_cast<int>(t_current.size())) return t_current[device];
  return Stream{device, nullptr};
}

void set_current_stream(Stream s) {
  if (s.device >= static_cast<int>(t_current.size())) {
    const int old = static_cast<int>(t_current.size());
    t_current.resize(s.device + 1);
    for (int i = old; i <= s.device; ++i) t_current[i] = Stream{i, nullptr};
  }
  t_current[s.device] = s;
}

Stream new_stream(int device) {
  require_device(Device::cuda(device), "new_stream");
  cudaStream_t s = nullptr;
  GS_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "new_stream");
  return Stream{device, s};
}

DeviceGuard::DeviceGuard(int device) {
  cudaGetDevice(&previous_);
  if (previous_ != device) cudaSetDevice(device);
}

DeviceGuard::~DeviceGuard() { cudaSetDevice(previous_); }

StreamGuard::StreamGuard(Stream s) : previous_(current_stream(s.device)) {
  if (previous_ == s) return;
  set_current_stream(s);
  active_ = true;
}

StreamGuard::~StreamGuard() {
  if (active_) set_current_stream(previous_);
}

Event::Event(int device, bool timing) : device_(device) {
  require_device(Device::cuda(device), "Event");
  cudaEvent_t e = nullptr;
  GS_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming), "Event");
  handle_ = e;
}

Event::~Event() {
  if (handle_) cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
}

void Event::record(Stream s) {
  DeviceGuard on(s.device);
  GS_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(handle_), static_cast<cudaStream_t>(s.handle)),
                "Event::record");
}

void Event::block(Stream s) const {
  DeviceGuard on(s.device);
  GS_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s.handle), static_cast<cudaEvent_t>(handle_), 0),
                "Event::block");
}

bool Event::query() const {
  cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(handle_));
  if (e == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is an answer, not an error for the next launch to report
    return false;
  }
  check(e, "cudaEventQuery", "Event::query");
  return true;
}

void Event::synchronize() const {
  GS_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)), "Event::synchronize");
}

float Event::elapsed_ms(const Event& later) const {
  float ms = 0;
  GS_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(handle_), static_cast<cudaEvent_t>(later.handle_)),
                "Event::elapsed_ms");
  return ms;
}

void synchronize(Device d) {
  require_device(d, "synchronize");
  GS_CUDA_CHECK(cudaDeviceSynchronize(), "synchronize");
}

void copy_device_to_device(void* dst, const void* src, size_t nbytes, Stream s) {
  require_device(Device::cuda(s.device), "copy_device_to_device");
  GS_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDeviceToDevice, static_cast<cudaStream_t>(s.handle)),
                "copy_device_to_device");
}

#else  // built without CUDA: no device is usable; everything that needs one says why.

namespace {
constexpr const char* kNoCuda = "this gradsphere was built without CUDA (reconfigure with -Dcuda=enabled)";
}

bool built_with_cuda() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return kNoCuda; }
void require_device(Device d, const char* op) { fail("{}: {} is not available: {}", op, d, kNoCuda); }
void check(int err, const char* call, const char* op) {
  if (err != 0) fail("{}: {} failed (error {})", op, call, err);
}
void check_launch(const char*, const char*) {}
Stream current_stream(int device) { return Stream{device, nullptr}; }
void set_current_stream(Stream) {}
Stream new_stream(int device) {
  require_device(Device::cuda(device), "new_stream");
  return {};
}
DeviceGuard::DeviceGuard(int) {}
DeviceGuard::~DeviceGuard() = default;
StreamGuard::StreamGuard(Stream s) : previous_(s) {}
StreamGuard::~StreamGuard() = default;
Event::Event(int device, bool) : device_(device) { require_device(Device::cuda(device), "Event"); }
Event::~Event() = default;
void Event::record(Stream) {}
void Event::block(Stream) const {}
bool Event::query() const { return true; }
void Event::synchronize() const {}
float Event::elapsed_ms(const Event&) const { return 0; }
void synchronize(Device d) { require_device(d, "synchronize"); }
void copy_device_to_device(void*, const void*, size_t, Stream s) { require_device(Device::cuda(s.device), "copy"); }

#endif

}  // namespace gs::cuda
