#include "engine/object_pool.h"

#include <new>

#include "engine/thread_owned.h"

namespace gs::detail {
namespace {

constexpr bool kPool = kReuseFreedMemory;

// Size classes of 64 bytes up to 1 KiB (a node is about 800 bytes); larger objects are not pooled.
constexpr size_t kGranule = 64, kClasses = 16, kMaxPooled = kGranule * kClasses;
// A 10,000-op tape of small ops holds about 14 MB of these objects.
constexpr size_t kBytesPerThread = size_t{32} << 20;

size_t class_of(size_t bytes) { return (bytes == 0 ? 0 : bytes - 1) / kGranule; }

// Free blocks are chained through their first word (an intrusive list: no memory of its own).
struct Lists {
  void* head[kClasses] = {};
  size_t bytes = 0;
  void* pop(size_t c) {
    void* p = head[c];
    if (p) {
      head[c] = *static_cast<void**>(p);
      bytes -= (c + 1) * kGranule;
    }
    return p;
  }
  void push(size_t c, void* p) {
    *static_cast<void**>(p) = head[c];
    head[c] = p;
    bytes += (c + 1) * kGranule;
  }
  ~Lists() {
    for (size_t c = 0; c < kClasses; ++c)
      while (void* p = pop(c)) ::operator delete(p);
  }
};

// Out of memory here means no pool, not an exception: pool_free is reached from destructors.
Lists* make_lists() { return new (std::nothrow) Lists(); }
void delete_lists(Lists* l) { delete l; }

// This thread's lists; null once its exit has freed them (objects freed later by other exit-time
// destructors go straight to ::operator delete).
Lists* thread_lists() { return thread_owned<Lists, &delete_lists>(&make_lists); }

}  // namespace

void* pool_allocate(size_t bytes) {
  if (kPool && bytes <= kMaxPooled)
    if (Lists* l = thread_lists()) {
      const size_t c = class_of(bytes);
      if (void* p = l->pop(c)) return p;
      return ::operator new((c + 1) * kGranule);  // the class's size, so any object of it may reuse it
    }
  // Not pooled: the exact size (under ASan, an overflow into a class's slack is then caught).
  return ::operator new(kPool && bytes <= kMaxPooled ? (class_of(bytes) + 1) * kGranule : bytes);
}

void pool_free(void* p, size_t bytes) {
  if (kPool && bytes <= kMaxPooled)
    if (Lists* l = thread_lists()) {
      const size_t c = class_of(bytes), size = (c + 1) * kGranule;
      if (l->bytes + size <= kBytesPerThread) {
        l->push(c, p);
        return;
      }
    }
  ::operator delete(p);
}

void pool_release() {
  if (!kPool) return;
  if (Lists* l = thread_lists())
    for (size_t c = 0; c < kClasses; ++c)
      while (void* p = l->pop(c)) ::operator delete(p);
}

}  // namespace gs::detail
