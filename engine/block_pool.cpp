#include "engine/block_pool.h"

#include <algorithm>
#include <tuple>

#include "engine/error.h"

namespace gs {

bool BlockPool::BlockOrder::operator()(const Block* a, const Block* b) const {
  return std::make_tuple(a->stream, a->size, reinterpret_cast<uintptr_t>(a->ptr)) <
         std::make_tuple(b->stream, b->size, reinterpret_cast<uintptr_t>(b->ptr));
}

size_t BlockPool::round_size(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  return (bytes + kRound - 1) / kRound * kRound;
}

size_t BlockPool::segment_size(size_t rounded) {
  if (rounded <= kSmallLimit) return kSmallSegment;
  if (rounded < kMidLimit) return kMidSegment;
  return (rounded + kLargeRound - 1) / kLargeRound * kLargeRound;
}

BlockPool::~BlockPool() {
  // Whole cached segments go back to the source; segments that still hold live blocks (tensors
  // held by statics at exit) stay with the process. The block records themselves all go.
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    release_cached_segments(false);
  } catch (const std::exception&) {
  }
  for (Block* b : pending_) {
    for (EventId e : b->events) source_.release_event(e);
    delete b;
  }
  for (FreeSet* set : {&free_small_, &free_large_})
    for (Block* b : *set) delete b;
  for (auto& [p, b] : live_) delete b;
}

void* BlockPool::allocate(size_t bytes, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  process_events(false);
  const size_t size = round_size(bytes);
  const bool small = size <= kSmallLimit;
  Block* b = find_free(size, small, stream);
  if (b) {
    ++stats_.cache_hits;
  } else {
    b = new_segment(segment_size(size), small, stream);
    if (!b && !pending_.empty()) {
      // Blocks that other streams still use may be what is needed: wait for them, look again.
      process_events(true);
      b = find_free(size, small, stream);
    }
    if (!b) {
      // The cache may hold what the device lacks: give every unused segment back, try again.
      release_cached_segments(false);
      b = new_segment(segment_size(size), small, stream);
    }
    if (!b) {
      ++stats_.failed_allocations;
      return nullptr;
    }
  }
  b = split(b, size);
  b->allocated = true;
  b->requested = bytes;
  live_[b->ptr] = b;
  ++stats_.allocations;
  stats_.allocated += b->size;
  stats_.requested += bytes;
  stats_.allocated_peak = std::max(stats_.allocated_peak, stats_.allocated);
  return b->ptr;
}

BlockPool::Block* BlockPool::find_free(size_t size, bool small, StreamId stream) {
  FreeSet& set = free_set(small);
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = set.lower_bound(&key);
  if (it == set.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  set.erase(it);
  return b;
}

BlockPool::Block* BlockPool::new_segment(size_t size, bool small, StreamId stream) {
  void* p = source_.allocate_segment(size);
  if (!p) return nullptr;
  auto* b = new Block;
  b->ptr = static_cast<char*>(p);
  b->size = size;
  b->stream = stream;
  b->small = small;
  ++stats_.segments;
  ++stats_.segment_allocs;
  stats_.reserved += size;
  stats_.reserved_peak = std::max(stats_.reserved_peak, stats_.reserved);
  return b;
}

// Keeps the first `size` bytes of `b` and puts the rest back as a free block of the same segment.
BlockPool::Block* BlockPool::split(Block* b, size_t size) {
  const size_t rest = b->size - size;
  const bool worth = b->small ? rest >= kRound : rest > kMinLargeRemainder;
  if (!worth) return b;
  auto* r = new Block;
  r->ptr = b->ptr + size;
  r->size = rest;
  r->stream = b->stream;
  r->small = b->small;
  r->prev = b;
  r->next = b->next;
  if (b->next) b->next->prev = r;
  b->next = r;
  b->size = size;
  ++stats_.splits;
  free_set(r->small).insert(r);
  return b;
}

void BlockPool::free(void* p) {
  if (!p) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(p);
  GS_CHECK(it != live_.end(), "device allocator: free of {} which it did not allocate (or freed twice)", p);
  Block* b = it->second;
  // Events first: if recording one fails, the block stays live (and the error propagates) rather
  // than vanishing from every list.
  std::vector<EventId> events;
  for (StreamId s : b->other_streams) events.push_back(source_.record_event(s));
  live_.erase(it);
  b->allocated = false;
  stats_.allocated -= b->size;
  stats_.requested -= b->requested;
  if (!events.empty()) {
    b->events = std::move(events);
    b->other_streams.clear();
    pending_.push_back(b);
    ++stats_.pending_blocks;
    return;
  }
  release_to_free_set(b);
}

void BlockPool::record_stream(void* p, StreamId stream) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(p);
  GS_CHECK(it != live_.end(), "device allocator: record_stream on {} which is not a live block", p);
  Block* b = it->second;
  if (stream == b->stream) return;  // ordered on its own stream already
  if (std::find(b->other_streams.begin(), b->other_streams.end(), stream) == b->other_streams.end())
    b->other_streams.push_back(stream);
}

// Merges `b` with free neighbours of its segment, then caches it.
void BlockPool::release_to_free_set(Block* b) {
  FreeSet& set = free_set(b->small);
  auto free_neighbour = [](Block* n) { return n && !n->allocated && n->events.empty(); };
  // Folds `right` into its left neighbour `left` of the same segment.
  auto absorb = [this](Block* left, Block* right) {
    left->size += right->size;
    left->next = right->next;
    if (right->next) right->next->prev = left;
    delete right;
    ++stats_.merges;
  };
  if (free_neighbour(b->prev)) {
    Block* prev = b->prev;
    set.erase(prev);
    absorb(prev, b);
    b = prev;
  }
  if (free_neighbour(b->next)) {
    set.erase(b->next);
    absorb(b, b->next);
  }
  set.insert(b);
}

// Pending blocks whose events completed (all of them, waiting, when `wait`) become free. Each
// leaves pending_ before it is released, so an error part-way leaves no dangling entry.
void BlockPool::process_events(bool wait) {
  for (size_t i = 0; i < pending_.size();) {
    Block* b = pending_[i];
    bool done = true;
    for (EventId e : b->events) {
      if (wait) source_.wait_event(e);
      else if (!source_.event_done(e)) done = false;
      if (!done) break;
    }
    if (!done) {
      ++i;
      continue;
    }
    pending_.erase(pending_.begin() + static_cast<ptrdiff_t>(i));
    for (EventId e : b->events) source_.release_event(e);
    b->events.clear();
    --stats_.pending_blocks;
    release_to_free_set(b);
  }
}

void BlockPool::remove_whole_segment(Block* b) {
  source_.free_segment(b->ptr, b->size);
  --stats_.segments;
  ++stats_.segment_frees;
  stats_.reserved -= b->size;
  delete b;
}

void BlockPool::release_cached_segments(bool wait_for_pending) {
  process_events(wait_for_pending);
  for (FreeSet* set : {&free_small_, &free_large_}) {
    for (auto it = set->begin(); it != set->end();) {
      Block* b = *it;
      if (!b->prev && !b->next) {
        it = set->erase(it);
        remove_whole_segment(b);
      } else {
        ++it;
      }
    }
  }
}

void BlockPool::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached_segments(false);
}

PoolStats BlockPool::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void BlockPool::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.allocated_peak = stats_.allocated;
  stats_.reserved_peak = stats_.reserved;
}

size_t BlockPool::block_size(const void* p) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = live_.find(p);
  return it == live_.end() ? 0 : it->second->size;
}

}  // namespace gs
