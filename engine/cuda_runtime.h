// The CUDA runtime as the engine sees it: which devices are usable, streams and events, and CUDA
// errors turned into gs::Error. The header needs no CUDA headers, so code that is built with and
// without CUDA includes it alike; without CUDA, device_count() is 0 and the rest throws saying so.
#pragma once
#include <cstdint>
#include <string>

#include "engine/block_pool.h"
#include "engine/device.h"

namespace gs::cuda {

bool built_with_cuda();
// Usable devices: 0 without CUDA in the build, without a driver or without a GPU.
int device_count();
// Why device_count() is 0, e.g. "CUDA driver version is insufficient for CUDA runtime version".
std::string unavailable_reason();
// Throws a gs::Error naming `op` unless `d` is a usable CUDA device; makes it the current device.
void require_device(Device d, const char* op);

// A stream of one device. handle is a cudaStream_t; null is the device's default stream.
struct Stream {
  int device = 0;
  void* handle = nullptr;
  StreamId id() const { return reinterpret_cast<StreamId>(handle); }
  bool operator==(const Stream&) const = default;
};

// The stream ops on `device` enqueue their work on (per host thread; the default stream unless set).
Stream current_stream(int device);
void set_current_stream(Stream s);
// A new non-blocking stream on `device`, owned by the process (streams are few and long-lived).
Stream new_stream(int device);

// Makes `device` the current CUDA device for a scope (events, allocations and the null stream
// handle belong to the current device), then restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// Makes `s` the current stream of its device for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(Stream s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream previous_;
  bool active_ = false;
};

// A point in a stream's work: record it, then wait for it on another stream or on the host.
class Event {
 public:
  explicit Event(int device, bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(Stream s);
  void block(Stream s) const;  // work queued on `s` after this waits for the event
  bool query() const;          // completed, without blocking
  void synchronize() const;    // blocks the host until completed
  float elapsed_ms(const Event& later) const;  // both recorded with timing = true

 private:
  void* handle_ = nullptr;  // cudaEvent_t
  int device_ = 0;
};

// Blocks the host until all work on `d` finished (reports a fault of an earlier kernel).
void synchronize(Device d);

// A raw device-to-device copy on stream `s` (the bandwidth baseline of `bench engine --device cuda`).
void copy_device_to_device(void* dst, const void* src, size_t nbytes, Stream s);

// Turns a failed CUDA runtime call into a gs::Error naming the call, the op and CUDA's error
// string. `err` is a cudaError_t; 0 is success.
void check(int err, const char* call, const char* op);
// After a kernel launch: reports a bad launch configuration at once, naming the kernel and op.
void check_launch(const char* kernel, const char* op);

}  // namespace gs::cuda

// GS_CUDA_CHECK(cudaMemcpy(...), "to(device)")
#define GS_CUDA_CHECK(call, op) ::gs::cuda::check(static_cast<int>(call), #call, op)
