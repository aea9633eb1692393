// A stream-ordered caching pool of device memory blocks, in the spirit of PyTorch's CUDA caching
// allocator. Device-agnostic: it takes whole segments from a SegmentSource (cudaMalloc in
// engine/cuda_allocator.cpp) and carves them into blocks, so the CPU test suite covers all of its
// logic with a host-memory source.
//
// Why stream-ordered: a block freed by work on stream S may be handed out again at once to more
// work on S (the GPU runs S's work in order), but not to another stream until S's work that used it
// finished. Blocks therefore carry the stream they were allocated on; a block that other streams
// also used (record_stream) waits for events recorded on those streams before it is reused.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

namespace gs {

// Opaque handles: a stream (cudaStream_t) and an event (cudaEvent_t), as integers.
using StreamId = uintptr_t;
using EventId = uintptr_t;

// Where a pool gets its segments and how it learns that work on a stream finished.
class SegmentSource {
 public:
  virtual ~SegmentSource() = default;
  virtual void* allocate_segment(size_t bytes) = 0;  // nullptr when the device has no room
  virtual void free_segment(void* p, size_t bytes) = 0;
  virtual EventId record_event(StreamId stream) = 0;  // marks the work queued on `stream` so far
  virtual bool event_done(EventId e) = 0;             // without blocking
  virtual void wait_event(EventId e) = 0;             // blocks until it completed
  virtual void release_event(EventId e) = 0;
};

struct PoolStats {
  size_t requested = 0;       // bytes asked for by live blocks
  size_t allocated = 0;       // bytes of live blocks (rounded sizes)
  size_t allocated_peak = 0;  // high-water mark of `allocated` since the last reset_peak
  size_t reserved = 0;        // bytes of segments held from the source (live + cached)
  size_t reserved_peak = 0;
  int64_t segments = 0;
  int64_t allocations = 0;  // calls that returned a block
  int64_t cache_hits = 0;   // of those, served from a cached block without a new segment
  int64_t splits = 0, merges = 0;
  int64_t segment_allocs = 0, segment_frees = 0;
  int64_t failed_allocations = 0;  // the source had no room even after the cache was released
  int64_t pending_blocks = 0;      // freed, waiting for another stream's work to finish
};

class BlockPool {
 public:
  // Sizes: requests round up to kRound; up to kSmallLimit they come from kSmallSegment segments
  // shared by many small blocks; larger ones below kMidLimit from kMidSegment segments; above that
  // a segment of the request rounded up to kLargeRound.
  static constexpr size_t kRound = 512;
  static constexpr size_t kSmallLimit = size_t{1} << 20;
  static constexpr size_t kSmallSegment = size_t{2} << 20;
  static constexpr size_t kMidLimit = size_t{10} << 20;
  static constexpr size_t kMidSegment = size_t{20} << 20;
  static constexpr size_t kLargeRound = size_t{2} << 20;
  // A large block is split only when what remains is worth keeping.
  static constexpr size_t kMinLargeRemainder = size_t{1} << 20;

  explicit BlockPool(SegmentSource& source) : source_(source) {}
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // A block of at least `bytes` for work ordered on `stream`; nullptr when the source has no room
  // even after every cached segment was returned to it (the caller reports out-of-memory).
  void* allocate(size_t bytes, StreamId stream);
  // Frees a block returned by allocate (null is ignored; an unknown pointer throws gs::Error).
  void free(void* p);
  // Work on `stream` also uses the live block `p`: its reuse waits until that work finished.
  void record_stream(void* p, StreamId stream);
  // Returns every cached segment without a live block to the source.
  void empty_cache();
  PoolStats stats() const;
  void reset_peak();
  // Rounded size of the live block at `p` (0 when unknown).
  size_t block_size(const void* p) const;

  static size_t round_size(size_t bytes);
  static size_t segment_size(size_t rounded);

 private:
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    size_t requested = 0;
    StreamId stream = 0;
    bool small = false;
    bool allocated = false;
    Block* prev = nullptr;  // neighbours within the segment
    Block* next = nullptr;
    std::vector<StreamId> other_streams;  // record_stream
    std::vector<EventId> events;          // pending reuse
  };
  struct BlockOrder {
    bool operator()(const Block* a, const Block* b) const;
  };
  using FreeSet = std::set<Block*, BlockOrder>;

  Block* find_free(size_t size, bool small, StreamId stream);
  Block* new_segment(size_t size, bool small, StreamId stream);
  Block* split(Block* b, size_t size);
  void release_to_free_set(Block* b);
  void process_events(bool wait);
  void release_cached_segments(bool wait_for_pending);
  void remove_whole_segment(Block* b);
  FreeSet& free_set(bool small) { return small ? free_small_ : free_large_; }

  SegmentSource& source_;
  mutable std::mutex mutex_;
  FreeSet free_small_, free_large_;
  std::unordered_map<const void*, Block*> live_;
  std::vector<Block*> pending_;
  PoolStats stats_;
};

}  // namespace gs
