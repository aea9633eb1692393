// Internal helpers of the SFNO block ops (sphere_norm.cpp, local_conv.cpp, area_stats.cpp): the
// argument checks they share, their task loop, and helpers for their registry samples.
#pragma once
#include <omp.h>

#include <cstdint>
#include <vector>

#include "engine/random.h"
#include "engine/tensor.h"
#include "ops/kernels.h"
#include "ops/registry.h"

namespace gs::sphere::detail {

// x must be a real (B, C, H, W) field.
// allow_storage: bf16 is accepted too (for the ops that read it as f32: conv1x1).
void check_field(const Tensor& x, const char* op, const char* what = "x (B, C, H, W)", bool allow_storage = false);
void check_eps(double eps, const char* op);
// An optional per-channel parameter (C) with x's dtype; undefined stays undefined.
Tensor channel_param(const Tensor& p, const Tensor& x, const char* op, const char* what);
// Checks per-row weights (H) for a field (..., H, W); returns their values (f64).
std::vector<double> check_row_weights(const Tensor& a, const Tensor& x, const char* op, const char* what);
// Per-row weights (H) for a field (..., H, W): checked, normalised to sum to 1 (with differentiable
// ops, so weights that require grad get one), shaped (H, 1).
Tensor row_weights(const Tensor& a, const Tensor& x, const char* op, const char* what);
// A convolution's weight (Cout, Cin) for k = 1 or (Cout, Cin, k, k), and its optional bias (Cout),
// against x (B, Cin, H, W); returns Cout.
int64_t check_conv_params(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t k, const char* op);

// f(t) for t < n, over OpenMP threads when the work is large enough (and not nested).
template <typename F>
inline void parallel_tasks(int64_t n, int64_t work, F&& f) {
  if (n > 1 && work >= kernels::kParallelGrain && omp_get_max_threads() > 1 && !omp_in_parallel()) {
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < n; ++t) f(t);
  } else {
    for (int64_t t = 0; t < n; ++t) f(t);
  }
}

// Registry samples: positive per-row weights (constants: no grad); sub-keys are registry.h's sub_key.
Tensor positive_rows(int64_t H, RandomKey k);

}  // namespace gs::sphere::detail
