// Wall-clock timing for benchmarks: run a body until enough time has passed, report the median;
// milliseconds since a time point, and the median of recorded times.
#pragma once
#include <algorithm>
#include <chrono>
#include <vector>

namespace gs::tools {

inline double ms_since(std::chrono::steady_clock::time_point t0) {
  return 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

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
