// The CUDA allocator (a BlockPool per device over cudaMalloc, stream-ordered on the current
// stream) and the host <-> device copies, registered with engine/storage.h at start-up. Built only
// with CUDA; registering calls no CUDA function, so a process without a GPU starts as usual.
#include <cuda_runtime.h>

#include <array>
#include <memory>
#include <mutex>

#include "engine/block_pool.h"
#include "engine/cuda_runtime.h"
#include "engine/error.h"
#include "engine/storage.h"

namespace gs {
namespace {

constexpr int kMaxDevices = 16;


class CudaSegments final : public SegmentSource {
 public:
  explicit CudaSegments(int device) : device_(device) {}
  void* allocate_segment(size_t bytes) override {
    cuda::DeviceGuard on(device_);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky; the pool releases its cache and may try again
      return nullptr;
    }
    GS_CUDA_CHECK(e, "allocate");
    return p;
  }
  void free_segment(void* p, size_t) override {
    cuda::DeviceGuard on(device_);
    GS_CUDA_CHECK(cudaFree(p), "empty_cache");
  }
  EventId record_event(StreamId stream) override {
    cuda::DeviceGuard on(device_);
    cudaEvent_t e = nullptr;
    GS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "free");
    GS_CUDA_CHECK(cudaEventRecord(e, reinterpret_cast<cudaStream_t>(stream)), "free");
    return reinterpret_cast<EventId>(e);
  }
  bool event_done(EventId e) override {
    cudaError_t r = cudaEventQuery(reinterpret_cast<cudaEvent_t>(e));
    if (r == cudaErrorNotReady) {
      cudaGetLastError();  // an answer, not an error for the next launch to report
      return false;
    }
    GS_CUDA_CHECK(r, "allocate");
    return true;
  }
  void wait_event(EventId e) override {
    GS_CUDA_CHECK(cudaEventSynchronize(reinterpret_cast<cudaEvent_t>(e)), "allocate");
  }
  void release_event(EventId e) override { cudaEventDestroy(reinterpret_cast<cudaEvent_t>(e)); }

 private:
  int device_;
};

class CudaCachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, int device) override {
    const Device d = Device::cuda(device);
    cuda::require_device(d, "allocate");
    if (nbytes == 0) nbytes = 1;  // a distinct address for an empty tensor, as on the CPU
    PerDevice& pd = per_device(device);
    void* p = pd.pool.allocate(nbytes, cuda::current_stream(device).id());
    if (!p) report_oom(d, pd, nbytes);
    return p;
  }
  void deallocate(void* p, size_t, int device) override {
    // Never throws: called from destructors. A failure here is an allocator bug.
    try {
      per_device(device).pool.free(p);
    } catch (const std::exception&) {
    }
  }
  MemoryStats stats(int device) const override {
    PoolStats s = const_cast<CudaCachingAllocator*>(this)->per_device(device).pool.stats();
    return {s.allocated, s.allocated_peak, s.reserved, s.reserved_peak};
  }
  void reset_peak(int device) override { per_device(device).pool.reset_peak(); }
  void empty_cache(int device) override {
    cuda::require_device(Device::cuda(device), "empty_cache");
    per_device(device).pool.empty_cache();
  }
  void record_stream(void* p, int device, uintptr_t stream) override {
    per_device(device).pool.record_stream(p, stream);
  }

 private:
  struct PerDevice {
    explicit PerDevice(int device) : source(device), pool(source) {}
    CudaSegments source;
    BlockPool pool;
  };

  PerDevice& per_device(int device) {
    GS_CHECK(device >= 0 && device < kMaxDevices, "CUDA allocator: device index {} out of range", device);
    std::lock_guard<std::mutex> lock(mutex_);
    auto& slot = devices_[device];
    if (!slot) slot = std::make_unique<PerDevice>(device);
    return *slot;
  }

  [[noreturn]] void report_oom(Device d, PerDevice& pd, size_t nbytes) {
    PoolStats s = pd.pool.stats();
    size_t free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    cudaGetLastError();
    auto gb = [](size_t b) { return static_cast<double>(b) / 1e9; };
    fail("out of memory on {}: tried to allocate {:.3g} GB; {:.3g} GB is in use by tensors and {:.3g} GB reserved by "
         "gradsphere's allocator (its cache was released before this error); the device has {:.3g} GB free of "
         "{:.3g} GB. Use a smaller batch or model, or free tensors you still hold",
         d, gb(nbytes), gb(s.allocated), gb(s.reserved), gb(free_b), gb(total_b));
  }

  std::mutex mutex_;
  std::array<std::unique_ptr<PerDevice>, kMaxDevices> devices_;
};

// Copies between the CPU and a device, or between devices, ordered on the current stream of the
// device involved. A copy to the host waits for it: the caller reads the bytes next. A copy from
// pageable host memory returns once the driver staged the bytes, so the source may be freed.
void cuda_copy(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes) {
  const Device gpu = dst_dev.is_cpu() ? src_dev : dst_dev;
  cuda::require_device(gpu, "copy");
  cudaStream_t stream = static_cast<cudaStream_t>(cuda::current_stream(gpu.index).handle);
  if (!dst_dev.is_cpu() && !src_dev.is_cpu() && dst_dev.index != src_dev.index) {
    // Ordered after the source device's pending work (which may be writing src), and the source
    // stream after the copy (which reads src, whose block that stream may otherwise reuse).
    const cuda::Stream src_stream = cuda::current_stream(src_dev.index), dst_stream = cuda::current_stream(dst_dev.index);
    cuda::Event ready(src_dev.index);
    ready.record(src_stream);
    ready.block(dst_stream);
    GS_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_dev.index, src, src_dev.index, nbytes, stream), "copy");
    cuda::Event done(dst_dev.index);
    done.record(dst_stream);
    done.block(src_stream);
    return;
  }
  GS_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, stream), "copy");
  if (dst_dev.is_cpu()) GS_CUDA_CHECK(cudaStreamSynchronize(stream), "copy to the host");
}

const bool registered = [] {
  static CudaCachingAllocator* a = new CudaCachingAllocator();  // never destroyed, as the CPU one
  register_allocator(DeviceType::cuda, a);
  register_device_copy(DeviceType::cuda, cuda_copy);
  return true;
}();

}  // namespace
}  // namespace gs
