// KeyedCache (engine/keyed_cache.h), the one cache type behind every table and plan cache: build
// once under concurrency, failed builds not kept, values outliving a clear, the byte budget's
// least-recently-used eviction, and the stats.
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tests/engine/engine_test_util.h"
#include "engine/keyed_cache.h"

using namespace gs;

namespace {

struct Blob {
  int key = 0;
  size_t bytes = 0;
};

// A cache of blobs whose size is 100 * key bytes, counting the builder's calls.
struct Fixture {
  std::atomic<int> calls{0};
  KeyedCache<int, Blob> cache{[this](const int& k) {
                                ++calls;
                                if (k < 0) throw std::runtime_error("negative key " + std::to_string(k));
                                return std::make_shared<const Blob>(Blob{k, static_cast<size_t>(100 * k)});
                              },
                              [](const Blob& b) { return b.bytes; }};
};

}  // namespace

TEST_CASE("keyed cache: a key is built once and shared; other keys get their own value") {
  Fixture f;
  const auto a = f.cache.get(3), b = f.cache.get(3), c = f.cache.get(4);
  CHECK(a.get() == b.get());
  CHECK(a.get() != c.get());
  CHECK(a->key == 3);
  CHECK(c->key == 4);
  CHECK(f.calls == 2);
  const CacheStats s = f.cache.stats();
  CHECK(s.entries == 2);
  CHECK(s.bytes == 700);
  CHECK(s.builds == 2);
  CHECK(s.hits == 1);
  CHECK(s.evictions == 0);
}

TEST_CASE("keyed cache: concurrent first lookups of one key wait for one build") {
  std::atomic<int> calls{0};
  KeyedCache<int, Blob> cache([&](const int& k) {
    ++calls;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the others arrive meanwhile
    return std::make_shared<const Blob>(Blob{k, 8});
  });
  std::vector<std::shared_ptr<const Blob>> got(6);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = cache.get(7); });
  for (auto& t : threads) t.join();
  CHECK(calls == 1);
  for (const auto& g : got) CHECK(g.get() == got[0].get());
}

TEST_CASE("keyed cache: a failed build reaches the caller, is not kept, and the next lookup tries again") {
  Fixture f;
  CHECK(gs_test::contains(gs_test::error_of([&] { f.cache.get(-2); }), "negative key -2"));
  CHECK(f.cache.stats().entries == 0);
  CHECK(gs_test::contains(gs_test::error_of([&] { f.cache.get(-2); }), "negative key -2"));
  CHECK(f.calls == 2);
  CHECK(f.cache.stats().builds == 0);
}

TEST_CASE("keyed cache: clear drops every entry and returns their bytes; values handed out stay alive") {
  Fixture f;
  const auto a = f.cache.get(2);
  f.cache.get(5);
  CHECK(f.cache.clear() == 700);
  CHECK(f.cache.stats().entries == 0);
  CHECK(f.cache.stats().bytes == 0);
  CHECK(a->key == 2);  // still valid
  const auto again = f.cache.get(2);  // built afresh
  CHECK(again.get() != a.get());
  CHECK(f.calls == 3);
}

TEST_CASE("keyed cache: past the byte budget the least recently used entries go, never the one just built") {
  Fixture f;
  f.cache.set_byte_budget(1000);
  f.cache.get(3);  // 300
  f.cache.get(4);  // 400
  f.cache.get(3);  // 3 is now more recent than 4
  f.cache.get(5);  // 1200 > 1000: 4 (least recently used) goes, 800 remain
  CacheStats s = f.cache.stats();
  CHECK(s.entries == 2);
  CHECK(s.bytes == 800);
  CHECK(s.evictions == 1);
  const int calls = f.calls;
  f.cache.get(3);
  f.cache.get(5);
  CHECK(f.calls == calls);  // both still held
  f.cache.get(4);           // rebuilt: 1200 again, so 3 (now least recent) goes
  CHECK(f.calls == calls + 1);
  CHECK(f.cache.stats().bytes == 900);
  // One value larger than the budget is still served and kept (alone).
  f.cache.get(20);  // 2000
  s = f.cache.stats();
  CHECK(s.entries == 1);
  CHECK(s.bytes == 2000);
  // Lowering the budget applies at once.
  f.cache.set_byte_budget(0);
  CHECK(f.cache.stats().entries == 0);
  CHECK(f.cache.byte_budget() == 0);
}

TEST_CASE("keyed cache: a lookup may bring its own builder (values made from more than the key)") {
  KeyedCache<int, Blob> cache([](const Blob& b) { return b.bytes; });
  const auto a = cache.get(1, [](const int& k) { return std::make_shared<const Blob>(Blob{k * 10, 4}); });
  const auto b = cache.get(1, [](const int&) { return std::make_shared<const Blob>(Blob{-1, 4}); });
  CHECK(a.get() == b.get());  // the second builder is not called: the key is held
  CHECK(b->key == 10);
  CHECK(gs_test::contains(gs_test::error_of([&] { cache.get(2); }), "without a builder"));
}
