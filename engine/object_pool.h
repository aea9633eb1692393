// Per-thread free lists for the small objects a recorded op makes and a backward pass frees: the
// node, the output's TensorImpl and StorageImpl, its autograd state. A long tape holds tens of
// thousands of them; malloc's per-thread cache overflows and every pass moved them through its
// central lists (engine/BENCHMARKS.md, "The tape's cost per op"). Objects go back to the freeing
// thread's list, up to 32 MB per thread; beyond that, and when the thread ends, to
// ::operator delete; empty_cache(Device::cpu()) frees the calling thread's. Under AddressSanitizer
// nothing is pooled, so a use after free is still caught.
//
//   auto node = std::allocate_shared<FunctionNode>(PoolAllocator<FunctionNode>(), ...);
#pragma once
#include <cstddef>
#include <new>

namespace gs {

// Freed memory is kept for reuse (these pools, the CPU block cache) except under AddressSanitizer,
// so that a use after free is still caught there.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kReuseFreedMemory = false;
#else
inline constexpr bool kReuseFreedMemory = true;
#endif

namespace detail {
void* pool_allocate(size_t bytes);
void pool_free(void* p, size_t bytes);
// Frees the calling thread's pooled objects (empty_cache(Device::cpu()) calls it).
void pool_release();
}  // namespace detail

// A std allocator over the pools (single objects; arrays go to ::operator new).
template <typename T>
struct PoolAllocator {
  using value_type = T;
  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) {}  // NOLINT: rebinding, as std allocators do
  T* allocate(size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t), "pooled objects have the default alignment");
    if (n != 1) return static_cast<T*>(::operator new(n * sizeof(T)));
    return static_cast<T*>(detail::pool_allocate(sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    if (n != 1) return ::operator delete(p);
    detail::pool_free(p, sizeof(T));
  }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const { return true; }
};

}  // namespace gs
