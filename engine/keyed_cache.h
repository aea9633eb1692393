// KeyedCache: the one cache type behind every table and plan cache in the tree (Legendre tables
// and their device copies, recurrence plans, FFT plans, halo-exchange plans). Each cache is a
// (key -> immutable value) map with one builder, one lifetime rule and the same guarantees:
//   - build once: the first lookup of a key builds it outside the lock; concurrent lookups of the
//     same key wait for that build instead of building again; other keys stay available;
//   - a failed build is not kept: every waiter gets its exception, the next lookup tries again;
//   - values are shared_ptr<const V>: a value handed out (saved in an autograd graph, in use on
//     another thread) stays alive after the cache drops it;
//   - a byte budget (unlimited unless set): past it, the least recently used entries are dropped,
//     never the one just built, so one oversized value is still served;
//   - clear() drops every entry and returns the bytes they held; stats() says what is held.
// Plain C++ (no fmt, no Tensor), so the CUDA sources may use it too.
#pragma once
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <vector>

namespace gs {

inline constexpr size_t kUnlimitedBytes = std::numeric_limits<size_t>::max();

struct CacheStats {
  int64_t entries = 0;    // values held (built and not dropped)
  size_t bytes = 0;       // their bytes, as the cache's sizer counts them
  int64_t builds = 0;     // successful builds since the process started
  int64_t hits = 0;       // lookups answered by a held (or in-flight) entry
  int64_t evictions = 0;  // entries dropped to keep within the byte budget
};

template <typename Key, typename Value>
class KeyedCache {
 public:
  using Ptr = std::shared_ptr<const Value>;
  using Builder = std::function<Ptr(const Key&)>;
  using Sizer = std::function<size_t(const Value&)>;

  // `build` makes the value of a key (it may throw; it must not return null); `bytes` sizes a value
  // for the budget and the stats (none: 0 bytes each).
  explicit KeyedCache(Builder build, Sizer bytes = nullptr, size_t byte_budget = kUnlimitedBytes)
      : build_(std::move(build)), bytes_of_(std::move(bytes)), budget_(byte_budget) {}
  // A cache whose values are built from more than the key (a device copy of a given table): every
  // lookup passes its builder to get(key, build).
  explicit KeyedCache(Sizer bytes, size_t byte_budget = kUnlimitedBytes)
      : bytes_of_(std::move(bytes)), budget_(byte_budget) {}
  KeyedCache(const KeyedCache&) = delete;
  KeyedCache& operator=(const KeyedCache&) = delete;

  // The value of `key`, built on first use by the cache's builder.
  Ptr get(const Key& key) { return get(key, build_); }

  // The value of `key`, built on first use by `build` (which must give equal keys equal values).
  Ptr get(const Key& key, const Builder& build) {
    std::promise<Ptr> promise;
    std::shared_future<Ptr> value;
    uint64_t id = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (auto it = entries_.find(key); it != entries_.end()) {
        it->second.last_use = ++tick_;
        ++hits_;
        value = it->second.value;
      } else {
        id = ++tick_;
        value = promise.get_future().share();
        entries_.emplace(key, Entry{value, 0, id, id, false});
      }
    }
    if (id != 0) build_entry(key, id, promise, build);
    return value.get();
  }

  // Drops every entry (builds in flight finish for their callers and are not kept); returns the
  // bytes the dropped entries held.
  size_t clear() {
    std::map<Key, Entry> dropped;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      dropped.swap(entries_);
      bytes_ = 0;
    }
    size_t bytes = 0;
    for (const auto& [key, e] : dropped) bytes += e.ready ? e.bytes : 0;
    return bytes;  // the values go when `dropped` does, outside the lock
  }

  CacheStats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    CacheStats s;
    for (const auto& [key, e] : entries_) s.entries += e.ready;
    s.bytes = bytes_;
    s.builds = builds_;
    s.hits = hits_;
    s.evictions = evictions_;
    return s;
  }

  // Applies at once (dropping least recently used entries) and to later builds.
  void set_byte_budget(size_t bytes) {
    std::vector<std::shared_future<Ptr>> dropped;  // released after the lock
    std::lock_guard<std::mutex> lock(mutex_);
    budget_ = bytes;
    evict_over_budget(nullptr, dropped);
  }
  size_t byte_budget() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return budget_;
  }

 private:
  struct Entry {
    std::shared_future<Ptr> value;
    size_t bytes = 0;
    uint64_t id = 0;        // which build made it (a clear during the build drops the entry)
    uint64_t last_use = 0;  // for least-recently-used eviction
    bool ready = false;
  };

  void build_entry(const Key& key, uint64_t id, std::promise<Ptr>& promise, const Builder& build) {
    Ptr v;
    size_t b = 0;
    try {  // only the build can fail a lookup: its waiters get the exception, nothing is kept
      if (!build) throw std::logic_error("KeyedCache: a lookup without a builder");
      v = build(key);
      if (!v) throw std::logic_error("KeyedCache: the builder returned no value");
      b = bytes_of_ ? bytes_of_(*v) : 0;
    } catch (...) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (auto it = entries_.find(key); it != entries_.end() && it->second.id == id) entries_.erase(it);
      }
      promise.set_exception(std::current_exception());
      return;
    }
    promise.set_value(v);
    std::vector<std::shared_future<Ptr>> dropped;  // evicted values, released after the lock
    std::lock_guard<std::mutex> lock(mutex_);
    ++builds_;
    auto it = entries_.find(key);
    if (it == entries_.end() || it->second.id != id) return;  // cleared meanwhile: served, not kept
    it->second.ready = true;
    it->second.bytes = b;
    bytes_ += b;
    evict_over_budget(&key, dropped);
  }

  // Under the lock: drops the least recently used ready entries (never `keep`) until within budget,
  // moving their values to `dropped` so that no value's destructor runs under the lock.
  void evict_over_budget(const Key* keep, std::vector<std::shared_future<Ptr>>& dropped) {
    while (bytes_ > budget_) {
      auto victim = entries_.end();
      for (auto it = entries_.begin(); it != entries_.end(); ++it) {
        if (!it->second.ready || (keep && !(it->first < *keep) && !(*keep < it->first))) continue;
        if (victim == entries_.end() || it->second.last_use < victim->second.last_use) victim = it;
      }
      if (victim == entries_.end()) return;
      bytes_ -= victim->second.bytes;
      dropped.push_back(std::move(victim->second.value));
      entries_.erase(victim);
      ++evictions_;
    }
  }

  Builder build_;
  Sizer bytes_of_;
  mutable std::mutex mutex_;
  std::map<Key, Entry> entries_;
  size_t budget_;
  size_t bytes_ = 0;
  uint64_t tick_ = 0;
  int64_t builds_ = 0, hits_ = 0, evictions_ = 0;
};

}  // namespace gs
