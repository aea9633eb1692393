// GPU timing for benchmarks: CUDA events on the device's current stream around each repeat.
#pragma once
#include <algorithm>
#include <vector>

#include "engine/cuda_runtime.h"
#include "engine/device.h"

namespace gs::tools {

// Median milliseconds of `body` on the current stream of `d` over `repeats` timed runs (after one
// warm-up run and a synchronize, so earlier work is not counted).
template <typename F>
double median_ms(Device d, F&& body, int repeats = 9) {
  body();
  cuda::synchronize(d);
  const cuda::Stream s = cuda::current_stream(d.index);
  std::vector<double> t;
  for (int i = 0; i < repeats; ++i) {
    cuda::Event start(d.index, true), stop(d.index, true);
    start.record(s);
    body();
    stop.record(s);
    stop.synchronize();
    t.push_back(start.elapsed_ms(stop));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace gs::tools
