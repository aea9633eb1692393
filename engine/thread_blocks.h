// Per-thread stacks of free small CPU blocks, in front of the CPU allocator's shared lists
// (storage.cpp). The tape allocates and frees a few small blocks per recorded op (outputs,
// gradients); taking the shared lists' mutex for each was a visible share of an op's cost.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <new>
#include <vector>

namespace gs::detail {

class ThreadBlocks {
 public:
  // Size classes 64 B .. 4 KiB (class c holds blocks of 64 << c bytes); larger blocks go to the
  // shared lists directly (their mutex is small beside their work).
  static constexpr size_t kClasses = 7;
  // Up to 1 MiB of each class per thread: a 10,000-op tape of small tensors keeps all of its
  // blocks here between steps.
  static constexpr size_t kBytesPerClass = size_t{1} << 20;
  static constexpr size_t block_bytes(size_t c) { return size_t{64} << c; }
  static constexpr size_t capacity(size_t c) { return kBytesPerClass / block_bytes(c); }

  void* pop(size_t c) {
    std::vector<void*>& list = free_[c];
    if (list.empty()) return nullptr;
    void* p = list.back();
    list.pop_back();
    set_cached(cached_bytes() - block_bytes(c));
    return p;
  }
  // false: this class is full here (the caller hands the block on).
  bool push(size_t c, void* p) {
    std::vector<void*>& list = free_[c];
    if (list.size() >= capacity(c)) return false;
    if (list.size() == list.capacity()) {
      // Called from destructors (a tensor's storage): a failed growth hands the block on instead.
      try {
        list.reserve(std::max<size_t>(64, 2 * list.size()));
      } catch (const std::bad_alloc&) {
        return false;
      }
    }
    list.push_back(p);
    set_cached(cached_bytes() + block_bytes(c));
    return true;
  }
  // Read by stats() on any thread; written only by the owning thread, so a load and a store (no
  // atomic read-modify-write on the hot path).
  size_t cached_bytes() const { return cached_bytes_.load(std::memory_order_relaxed); }
  std::vector<void*> take_all(size_t c) {
    set_cached(cached_bytes() - free_[c].size() * block_bytes(c));
    return std::move(free_[c]);
  }

 private:
  void set_cached(size_t b) { cached_bytes_.store(b, std::memory_order_relaxed); }
  std::vector<void*> free_[kClasses];
  std::atomic<size_t> cached_bytes_{0};
};

}  // namespace gs::detail
