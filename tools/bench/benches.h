// Benchmarks behind `gradsphere bench NAME`.
#pragma once
#include <string>

#include "engine/device.h"

namespace gs::tools {

struct BenchOptions {
  bool quick = false;  // small sizes, for smoke tests in the test suite
  std::string csv;     // if set, also write the results there as CSV (benchmarks that support it)
  bool train_only = false;  // bench dist: only the training step
  bool pipeline_only = false;  // bench dist: only the pipelined-transpose rows
  std::string device = "cpu";  // bench engine, sht and train: cpu, cuda or cuda:N
  bool bf16_mlp = false;  // bench train: each case also with the MLP's saved activations in bf16
  std::string grid;       // bench data, ensemble under mpiexec: the process grid [E]xDxHxW
  std::string sht_case;   // bench sht: only this case, GRID:NLATxNLON (e.g. legendre-gauss:180x360)
};

int bench_engine(const BenchOptions& opt);
// bench engine's forward-mode rows: the tape chain as dual tensors, per rule kind (bench_forward_mode.cpp).
void print_forward_mode_cost(bool quick);
int bench_engine_cuda(const BenchOptions& opt, Device d);  // bench_engine_cuda.cpp
int bench_sht(const BenchOptions& opt);
int bench_sht_cuda(const BenchOptions& opt, Device d);  // bench_sht_cuda.cpp
int bench_train(const BenchOptions& opt);  // on opt.device
int bench_memory(const BenchOptions& opt);  // checkpointing and bf16 saved activations, CPU
int bench_comm(const BenchOptions& opt);  // run under mpiexec -n N
int bench_dist(const BenchOptions& opt);  // run under mpiexec -n N
int bench_data(const BenchOptions& opt);  // one process, or under mpiexec -n N with --grid
int bench_ensemble(const BenchOptions& opt);  // one process, or under mpiexec -n E with --grid Ex1x1x1

}  // namespace gs::tools
