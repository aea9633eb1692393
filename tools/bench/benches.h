// Benchmarks behind `gradsphere bench NAME`.
#pragma once
#include <string>

namespace gs::tools {

struct BenchOptions {
  bool quick = false;  // small sizes, for smoke tests in the test suite
  std::string csv;     // if set, also write the results there as CSV (benchmarks that support it)
  bool train_only = false;  // bench dist: only the training step
};

int bench_engine(const BenchOptions& opt);
int bench_sht(const BenchOptions& opt);
int bench_train(const BenchOptions& opt);
int bench_comm(const BenchOptions& opt);  // run under mpiexec -n N
int bench_dist(const BenchOptions& opt);  // run under mpiexec -n N

}  // namespace gs::tools
