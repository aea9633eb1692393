// One object per thread, made on first use and released when the thread ends, that stays safe to
// ask for from thread-exit destructors running after its release: they get null (and fall back to
// a shared path) instead of touching a destroyed thread-local. The CPU allocator's small-block
// stacks (storage.cpp) and the object pools (object_pool.cpp) are kept this way.
#pragma once

namespace gs::detail {

// `make` may return null (out of memory: the caller then takes its shared path); `Release` gets
// the object at the thread's end. Each <T, Release> pair is its own per-thread slot.
template <typename T, void (*Release)(T*)>
T* thread_owned(T* (*make)()) {
  thread_local T* object = nullptr;
  thread_local bool ended = false;
  if (object || ended) return object;
  struct Owner {
    ~Owner() {
      if (object) Release(object);
      object = nullptr;
      ended = true;
    }
  };
  [[maybe_unused]] thread_local Owner owner;  // its destructor runs at the thread's end
  object = make();
  return object;
}

}  // namespace gs::detail
