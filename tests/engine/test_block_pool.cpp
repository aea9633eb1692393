// The caching block pool behind the CUDA allocator (engine/block_pool.h), driven by a host-memory
// segment source with a capacity and hand-completed events, so its reuse, splitting, merging,
// stream ordering and out-of-memory path are checked without a GPU.
#include <cstdlib>
#include <map>

#include "tests/engine/engine_test_util.h"
#include "engine/block_pool.h"

using namespace gs;

namespace {

constexpr size_t MiB = size_t{1} << 20;

class FakeSource final : public SegmentSource {
 public:
  explicit FakeSource(size_t capacity) : capacity_(capacity) {}
  void* allocate_segment(size_t bytes) override {
    if (used_ + bytes > capacity_) return nullptr;
    used_ += bytes;
    void* p = std::malloc(bytes);
    segments_[p] = bytes;
    return p;
  }
  void free_segment(void* p, size_t bytes) override {
    REQUIRE(segments_.count(p) == 1);
    CHECK(segments_[p] == bytes);
    segments_.erase(p);
    used_ -= bytes;
    std::free(p);
  }
  EventId record_event(StreamId) override {
    done_[++next_event_] = false;
    return next_event_;
  }
  bool event_done(EventId e) override { return done_.at(e); }
  void wait_event(EventId e) override {
    done_.at(e) = true;  // the "stream" finishes its work
    ++waits_;
  }
  int waits() const { return waits_; }
  void release_event(EventId e) override { done_.erase(e); }
  void complete_all() {
    for (auto& [e, d] : done_) d = true;
  }
  size_t used() const { return used_; }
  size_t live_events() const { return done_.size(); }
  ~FakeSource() override {
    for (auto& [p, n] : segments_) std::free(p);
  }

 private:
  size_t capacity_, used_ = 0;
  std::map<void*, size_t> segments_;
  std::map<EventId, bool> done_;
  EventId next_event_ = 0;
  int waits_ = 0;
};

constexpr StreamId s1 = 1, s2 = 2;

}  // namespace

TEST_CASE("block pool: sizes round to 512 B, small blocks share a 2 MiB segment") {
  CHECK(BlockPool::round_size(0) == 512);
  CHECK(BlockPool::round_size(513) == 1024);
  CHECK(BlockPool::segment_size(1 * MiB) == 2 * MiB);
  CHECK(BlockPool::segment_size(1 * MiB + 512) == 20 * MiB);
  CHECK(BlockPool::segment_size(10 * MiB) == 10 * MiB);
  CHECK(BlockPool::segment_size(10 * MiB + 1) == 12 * MiB);
  FakeSource src(100 * MiB);
  BlockPool pool(src);
  void* a = pool.allocate(100, s1);
  void* b = pool.allocate(1000, s1);
  CHECK(static_cast<char*>(b) - static_cast<char*>(a) == 512);  // carved from the same segment
  CHECK(pool.block_size(b) == 1024);
  PoolStats st = pool.stats();
  CHECK(st.segments == 1);
  CHECK(st.reserved == 2 * MiB);
  CHECK(st.allocated == 1536);
  CHECK(st.requested == 1100);
  pool.free(a);
  pool.free(b);
  CHECK(pool.stats().allocated == 0);
  CHECK(pool.stats().reserved == 2 * MiB);  // cached, not returned
  pool.empty_cache();
  CHECK(pool.stats().reserved == 0);
  CHECK(src.used() == 0);
}

TEST_CASE("block pool: a freed block is reused on its stream, not on another") {
  FakeSource src(100 * MiB);
  BlockPool pool(src);
  void* a = pool.allocate(4 * MiB, s1);
  pool.free(a);
  void* same = pool.allocate(4 * MiB, s1);
  CHECK(same == a);
  CHECK(pool.stats().cache_hits == 1);
  void* other = pool.allocate(4 * MiB, s2);
  CHECK(other != a);
  CHECK(pool.stats().segments == 2);
  pool.free(same);
  pool.free(other);
}

TEST_CASE("block pool: large segments split and merge back when their blocks are freed") {
  FakeSource src(100 * MiB);
  BlockPool pool(src);
  void* a = pool.allocate(4 * MiB, s1);  // a 20 MiB segment, split: 4 MiB live, 16 MiB free
  void* b = pool.allocate(6 * MiB, s1);  // from the 16 MiB remainder
  CHECK(static_cast<char*>(b) - static_cast<char*>(a) == static_cast<ptrdiff_t>(4 * MiB));
  CHECK(pool.stats().segments == 1);
  CHECK(pool.stats().splits == 2);
  pool.empty_cache();  // the segment has live blocks: nothing to return
  CHECK(pool.stats().reserved == 20 * MiB);
  pool.free(a);
  pool.free(b);
  CHECK(pool.stats().merges == 2);
  // Merged into one 20 MiB block again: a 15 MiB request fits without a new segment.
  void* c = pool.allocate(15 * MiB, s1);
  CHECK(c == a);
  CHECK(pool.stats().segments == 1);
  pool.free(c);
  pool.empty_cache();
  CHECK(src.used() == 0);
}

TEST_CASE("block pool: a block used on another stream waits for that stream's work") {
  FakeSource src(100 * MiB);
  BlockPool pool(src);
  void* a = pool.allocate(4 * MiB, s1);
  pool.record_stream(a, s2);
  pool.record_stream(a, s1);  // its own stream: no event needed
  pool.free(a);
  CHECK(pool.stats().pending_blocks == 1);
  CHECK(src.live_events() == 1);
  void* b = pool.allocate(4 * MiB, s1);
  CHECK(b != a);  // s2 may still be reading `a`
  src.complete_all();
  void* c = pool.allocate(4 * MiB, s1);
  CHECK(c == a);
  CHECK(pool.stats().pending_blocks == 0);
  CHECK(src.live_events() == 0);
  pool.free(b);
  pool.free(c);
}

TEST_CASE("block pool: out of memory releases the cache first, then reports failure") {
  FakeSource src(40 * MiB);
  BlockPool pool(src);
  void* a = pool.allocate(20 * MiB, s1);
  void* b = pool.allocate(6 * MiB, s1);  // a 20 MiB segment (mid-size requests)
  CHECK(src.used() == 40 * MiB);
  pool.free(b);  // cached
  void* c = pool.allocate(16 * MiB, s2);  // other stream: needs a segment, only after the cache is released
  REQUIRE(c != nullptr);
  CHECK(pool.stats().segment_frees == 1);
  CHECK(pool.allocate(30 * MiB, s1) == nullptr);
  CHECK(pool.stats().failed_allocations == 1);
  CHECK(pool.stats().reserved_peak == 40 * MiB);
  pool.free(a);
  pool.free(c);
  pool.reset_peak();
  CHECK(pool.stats().allocated_peak == 0);
}

TEST_CASE("block pool: out of memory waits for blocks other streams still use, then reuses them") {
  FakeSource src(40 * MiB);
  BlockPool pool(src);
  void* a = pool.allocate(20 * MiB, s1);
  void* b = pool.allocate(20 * MiB, s1);
  pool.record_stream(b, s2);
  pool.free(b);  // pending: s2 may still read it
  CHECK(pool.stats().pending_blocks == 1);
  void* c = pool.allocate(20 * MiB, s1);  // the device is full: only b's segment can serve
  CHECK(c == b);
  CHECK(src.waits() == 1);
  CHECK(pool.stats().pending_blocks == 0);
  CHECK(pool.stats().segment_frees == 0);
  pool.free(a);
  pool.free(c);
}

TEST_CASE("block pool: freeing an unknown pointer is an error, not a corruption") {
  FakeSource src(10 * MiB);
  BlockPool pool(src);
  int x = 0;
  CHECK_THROWS_WITH_AS(pool.free(&x), doctest::Contains("did not allocate"), Error);
  pool.free(nullptr);
}
