#include "engine/storage.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <map>
#include <mutex>
#include <new>
#include <vector>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>

#include "engine/cuda_runtime.h"
#include "engine/object_pool.h"
#include "engine/thread_blocks.h"
#include "engine/thread_owned.h"

namespace gs {
namespace {

// Freed blocks are kept for reuse instead of going back to the system:
// - small blocks (<= 64 KiB) in per-size-class free lists: the tape allocates and frees many tiny
//   tensors (scalars, gradients of small parameters), and malloc for each costs more than the
//   arithmetic;
// - large blocks by size class (8 classes per power of two, at most 12.5% slack) up to
//   kMaxCachedLarge bytes in all: a training step allocates the same activation sizes every
//   step, and returning them to the system made every step page-fault its memory in again (6-20%
//   of an SFNO step). Like PyTorch's caching allocator, this trades resident memory for speed;
//   bytes_in_use and peak_bytes count only live tensors.
// Small blocks (<= 4 KiB) go first to a stack of the freeing thread (thread_blocks.h), without a
// lock; the shared lists take what overflows it and what a thread leaves when it ends.
// Under AddressSanitizer nothing is cached, so a use after free is still caught.
constexpr bool kCacheBlocks = kReuseFreedMemory;

class CpuAllocator final : public Allocator {
 public:
  static constexpr size_t kMinClass = 64, kMaxClass = 64 * 1024, kMaxCachedPerClass = 256;
  static constexpr size_t kMaxCachedLarge = size_t{1} << 30;

  void* allocate(size_t nbytes, int) override {
    const size_t rounded = round_up(nbytes);
    void* p = nullptr;
    if (kCacheBlocks && rounded <= kMaxThreadClass)
      if (detail::ThreadBlocks* t = thread_blocks()) p = t->pop(class_index(rounded));
    if (kCacheBlocks && !p) p = take_cached(rounded);
    if (!p) p = system_allocate(rounded);
    if (!p) {
      release_large_cache();  // the cache may hold what the system lacks; try once more
      p = system_allocate(rounded);
    }
    if (!p)
      fail("out of CPU memory: could not allocate {} bytes ({:.3g} GB) with {:.3g} GB already held by tensors", nbytes,
           static_cast<double>(nbytes) / 1e9, static_cast<double>(in_use_.load()) / 1e9);
    size_t now = in_use_.fetch_add(nbytes) + nbytes;
    size_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    return p;
  }
  void deallocate(void* p, size_t nbytes, int) override {
    in_use_.fetch_sub(nbytes);
    const size_t rounded = round_up(nbytes);
    if (kCacheBlocks && rounded <= kMaxThreadClass)
      if (detail::ThreadBlocks* t = thread_blocks(); t && t->push(class_index(rounded), p)) return;
    if (kCacheBlocks) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (rounded <= kMaxClass) {
        auto& list = free_[class_index(rounded)];
        if (list.size() < kMaxCachedPerClass) {
          list.push_back(p);
          return;
        }
      } else if (cached_large_bytes_ + rounded <= kMaxCachedLarge) {
        large_.emplace(rounded, p);
        cached_large_bytes_ += rounded;
        return;
      }
    }
    system_free(p, rounded);
  }
  MemoryStats stats(int) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    MemoryStats s;
    s.in_use = in_use_.load();
    s.peak = peak_.load();
    s.reserved = s.in_use + cached_large_bytes_;
    for (size_t c = 0; c < std::size(free_); ++c) s.reserved += free_[c].size() * (kMinClass << c);
    for (const detail::ThreadBlocks* t : threads_) s.reserved += t->cached_bytes();
    s.reserved_peak = s.reserved;  // not tracked on the CPU (its cache only grows to a bound)
    return s;
  }
  void reset_peak(int) override { peak_.store(in_use_.load()); }
  // Other threads' stacks stay theirs (only the owner may touch them); they go back when those
  // threads end.
  void empty_cache(int) override {
    release_large_cache();
    if (detail::ThreadBlocks* t = kCacheBlocks ? thread_blocks() : nullptr)
      for (size_t c = 0; c < detail::ThreadBlocks::kClasses; ++c)
        for (void* p : t->take_all(c)) std::free(p);
    detail::pool_release();  // the calling thread's pooled tensor headers and nodes
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& list : free_) {
      for (void* p : list) std::free(p);
      list.clear();
    }
  }

 private:
  // Blocks of 4 MiB and more are mappings of their own, 2 MiB aligned and asked to be backed by
  // transparent huge pages: kernels that walk a (batch, rows, columns) array down its columns (the
  // SHT's Legendre stage reads and writes every row of a block of orders) touch a new 4 KiB page per
  // row, and with 4 KiB pages those accesses missed the TLB (ops/sphere/NOTES.md). Their own
  // mapping, not malloc's: a huge-page range inside malloc's heap also backed the small scratch
  // buffers malloc handed out and took back there, and every call faulted 2 MiB pages in again.
  // Where THP is off, madvise fails harmlessly and the mapping uses small pages.
  static constexpr size_t kHugePage = size_t{2} << 20, kOwnMapping = size_t{4} << 20;
  static size_t mapping_bytes(size_t rounded) { return (rounded + kHugePage - 1) / kHugePage * kHugePage; }
  static void* system_allocate(size_t rounded) {
    if (rounded < kOwnMapping || !kCacheBlocks) return std::aligned_alloc(64, rounded);  // ASan sees malloc's
    const size_t bytes = mapping_bytes(rounded);
    void* raw = mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return nullptr;
    // Trim to a 2 MiB aligned range (a huge page needs an aligned virtual range).
    const auto start = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (start + kHugePage - 1) / kHugePage * kHugePage;
    if (aligned > start) munmap(raw, aligned - start);
    if (const size_t tail = start + bytes + kHugePage - (aligned + bytes); tail > 0)
      munmap(reinterpret_cast<void*>(aligned + bytes), tail);
    void* p = reinterpret_cast<void*>(aligned);
#if defined(MADV_HUGEPAGE)
    madvise(p, bytes, MADV_HUGEPAGE);
#endif
    return p;
  }
  static void system_free(void* p, size_t rounded) {
    if (rounded < kOwnMapping || !kCacheBlocks) std::free(p);
    else munmap(p, mapping_bytes(rounded));
  }

  static constexpr size_t kMaxThreadClass = detail::ThreadBlocks::block_bytes(detail::ThreadBlocks::kClasses - 1);

  // This thread's stack: made on first use and registered (stats() counts it); null once the
  // thread's exit has handed it back (a tensor freed by a later thread-exit destructor then goes to
  // the shared lists).
  static detail::ThreadBlocks* thread_blocks() {
    return detail::thread_owned<detail::ThreadBlocks, &cpu_allocator_hand_back>(&cpu_allocator_make_blocks);
  }
  // Reached from destructors too (deallocate): out of memory here means no stack, not an exception.
  detail::ThreadBlocks* make_blocks() {
    auto* made = new (std::nothrow) detail::ThreadBlocks();
    if (!made) return nullptr;
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      threads_.push_back(made);
    } catch (const std::bad_alloc&) {
      delete made;
      return nullptr;
    }
    return made;
  }
  static detail::ThreadBlocks* cpu_allocator_make_blocks();
  static void cpu_allocator_hand_back(detail::ThreadBlocks* t);

 public:
  // A thread's stack at its end: into the shared lists up to their bound, the rest to the system.
  void hand_back(detail::ThreadBlocks* t) {
    std::lock_guard<std::mutex> lock(mutex_);
    threads_.erase(std::remove(threads_.begin(), threads_.end(), t), threads_.end());
    for (size_t c = 0; c < detail::ThreadBlocks::kClasses; ++c)
      for (void* p : t->take_all(c)) {
        if (free_[c].size() < kMaxCachedPerClass) free_[c].push_back(p);
        else std::free(p);
      }
    delete t;
  }

 private:
  void* take_cached(size_t rounded) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (rounded <= kMaxClass) {
      auto& list = free_[class_index(rounded)];
      if (list.empty()) return nullptr;
      void* p = list.back();
      list.pop_back();
      return p;
    }
    auto it = large_.find(rounded);
    if (it == large_.end()) return nullptr;
    void* p = it->second;
    large_.erase(it);
    cached_large_bytes_ -= rounded;
    return p;
  }
  void release_large_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, p] : large_) system_free(p, size);
    large_.clear();
    cached_large_bytes_ = 0;
  }
  // Powers of two from 64 B to 64 KiB; above, 8 classes per power of two (multiples of 64).
  static size_t round_up(size_t n) {
    n = std::max<size_t>(n, 1);
    if (n > kMaxClass) {
      const size_t step = std::max<size_t>(64, std::bit_floor(n) / 8);
      return (n + step - 1) / step * step;
    }
    size_t c = kMinClass;
    while (c < n) c <<= 1;
    return c;
  }
  static size_t class_index(size_t rounded) { return static_cast<size_t>(std::countr_zero(rounded) - 6); }

  std::atomic<size_t> in_use_{0}, peak_{0};
  mutable std::mutex mutex_;
  std::vector<void*> free_[11];
  std::multimap<size_t, void*> large_;  // rounded size -> block
  size_t cached_large_bytes_ = 0;
  std::vector<detail::ThreadBlocks*> threads_;  // every live thread's stack
};

// Never destroyed: tensors held by other statics (op caches) are freed during static destruction,
// possibly after this function's static would have been destroyed; the cached blocks stay
// reachable through it, so leak checkers do not report them.
CpuAllocator& cpu_allocator() {
  static CpuAllocator* a = new CpuAllocator();
  return *a;
}

void CpuAllocator::cpu_allocator_hand_back(detail::ThreadBlocks* t) { cpu_allocator().hand_back(t); }
detail::ThreadBlocks* CpuAllocator::cpu_allocator_make_blocks() { return cpu_allocator().make_blocks(); }

Allocator* g_allocators[2] = {nullptr, nullptr};
CopyFn g_copies[2] = {nullptr, nullptr};

}  // namespace

Allocator& allocator_for(DeviceType t) {
  if (t == DeviceType::cpu) return cpu_allocator();
  Allocator* a = g_allocators[static_cast<int>(t)];
  GS_CHECK(a, "no allocator for device type cuda: this gradsphere was built without CUDA (reconfigure with -Dcuda=enabled)");
  return *a;
}

void register_allocator(DeviceType t, Allocator* a) { g_allocators[static_cast<int>(t)] = a; }
void register_device_copy(DeviceType t, CopyFn fn) { g_copies[static_cast<int>(t)] = fn; }

void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_dev.is_cpu() && src_dev.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  CopyFn fn = g_copies[static_cast<int>(DeviceType::cuda)];
  GS_CHECK(fn, "copy between {} and {}: this gradsphere was built without CUDA", src_dev, dst_dev);
  fn(dst, dst_dev, src, src_dev, nbytes);
}

MemoryStats memory_stats(Device d) { return allocator_for(d.type).stats(d.index); }
void reset_peak_memory(Device d) { allocator_for(d.type).reset_peak(d.index); }
void empty_cache(Device d) { allocator_for(d.type).empty_cache(d.index); }
void record_stream(const Storage& s, uintptr_t stream) {
  if (!s || s->device().is_cpu()) return;
  allocator_for(s->device().type).record_stream(s->data(), s->device().index, stream);
}

StorageImpl::StorageImpl(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  // Without CUDA in the build, the same "cuda:N is not available: ..." as without a GPU.
  if (device.type == DeviceType::cuda && !cuda::built_with_cuda()) cuda::require_device(device, "allocate");
  data_ = allocator_for(device.type).allocate(nbytes, device.index);
}

StorageImpl::~StorageImpl() { allocator_for(device_.type).deallocate(data_, nbytes_, device_.index); }

}  // namespace gs
