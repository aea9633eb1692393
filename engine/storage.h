// Storage: the bytes behind one or more tensors, the device they live on, and the version counter
// that every view of them shares (DESIGN.md: views share storage and the version counter).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/device.h"

namespace gs {

// Bytes held by one device's allocator. `reserved` counts what it holds from the system or the
// driver, cached free blocks included; `in_use` only live tensors.
struct MemoryStats {
  size_t in_use = 0;
  size_t peak = 0;  // of in_use, since the last reset
  size_t reserved = 0;
  size_t reserved_peak = 0;
};

// Allocates and frees bytes on the devices of one type. CPU memory is 64-byte aligned for SIMD.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, int device_index) = 0;
  virtual void deallocate(void* p, size_t nbytes, int device_index) = 0;
  virtual MemoryStats stats(int device_index) const = 0;
  virtual void reset_peak(int device_index) = 0;
  // Gives cached free blocks back to the system (the driver). On the CPU: the shared lists and the
  // calling thread's stack of small blocks; other threads' stacks (at most 7 MiB each) stay theirs
  // until those threads end, and stay counted in `reserved`.
  virtual void empty_cache(int device_index) = 0;
  // Work on `stream` also uses the block at `p` (stream-ordered allocators delay its reuse).
  virtual void record_stream(void* /*p*/, int /*device_index*/, uintptr_t /*stream*/) {}

  // Device 0 (the CPU) shorthands that benchmarks use.
  size_t bytes_in_use() const { return stats(0).in_use; }
  size_t peak_bytes() const { return stats(0).peak; }
  void reset_peak() { reset_peak(0); }
};

// The allocator for a device type; CUDA registers its own when built with CUDA.
Allocator& allocator_for(DeviceType t);
void register_allocator(DeviceType t, Allocator* a);
// Copies bytes between (possibly different) devices.
using CopyFn = void (*)(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes);
void register_device_copy(DeviceType t, CopyFn fn);
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes);
// The allocator statistics of one device, and its cache handed back (empty_cache).
MemoryStats memory_stats(Device d);
void reset_peak_memory(Device d);
void empty_cache(Device d);

class StorageImpl {
 public:
  StorageImpl(size_t nbytes, Device device);
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }

  // Bumped by every in-place or out= write to any tensor on this storage, in every grad mode.
  uint64_t version() const { return version_; }
  void bump_version() { ++version_; }

  // Read-only storage (cached constant tables): in-place writes throw with `read_only_reason`.
  bool read_only() const { return !read_only_reason_.empty(); }
  const std::string& read_only_reason() const { return read_only_reason_; }
  void set_read_only(std::string reason) { read_only_reason_ = std::move(reason); }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  uint64_t version_ = 0;
  std::string read_only_reason_;
};

using Storage = std::shared_ptr<StorageImpl>;

// Work on `stream` (a cudaStream_t) also uses `s`'s memory: a stream-ordered allocator then delays
// the block's reuse until that work finished. No-op on the CPU.
void record_stream(const Storage& s, uintptr_t stream);

}  // namespace gs
