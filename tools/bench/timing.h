// Wall-clock timing for benchmarks: run a body until enough time has passed, report the median.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace gs::tools {

// Median seconds per call of `body` over `repeats` timed runs (after one warm-up run).
template <typename F>
double median_seconds(F&& body, int repeats = 7) {
  body();
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    auto start = std::chrono::steady_clock::now();
    body();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace gs::tools
