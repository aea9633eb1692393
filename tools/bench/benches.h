// Benchmarks behind `gradsphere bench NAME`.
#pragma once

namespace gs::tools {

struct BenchOptions {
  bool quick = false;  // small sizes, for smoke tests in the test suite
};

int bench_engine(const BenchOptions& opt);

}  // namespace gs::tools
