// The shared CPU loop behind reductions (internal to ops/): for each output element, fold the
// input elements along the reduced dims with `step(acc, x)`, then `finish(acc)`.
#pragma once
#include <algorithm>
#include <vector>

#include "ops/kernels.h"
#include "ops/reduce_cuda.h"

namespace gs::kernels {

struct ReductionPlan {
  Shape out_sizes_keepdim;  // reduced dims set to 1
  Shape out_sizes;          // as returned (reduced dims dropped unless keepdim)
  std::vector<bool> reduced;
  int64_t reduced_count = 1;
};

ReductionPlan plan_reduction(const Tensor& t, std::vector<int64_t> dims, bool keepdim, const char* op);

// The CUDA twin of reduce_loop for sum (times `scale`), max and min (ops/reduce_cuda.cu); out has
// out_sizes_keepdim elements, contiguous, on t's device.
void cuda_reduce(cuda_kernels::ReduceKind kind, const Tensor& t, const ReductionPlan& plan, const Tensor& out, double scale,
                 const char* op);

// Acc is the accumulator type; out has out_sizes_keepdim elements, contiguous.
template <typename T, typename Out, typename Acc, typename Step, typename Finish>
void reduce_loop(const Tensor& t, const ReductionPlan& plan, const Tensor& out, Acc init, Step step, Finish finish) {
  const int64_t nd = t.dim();
  Shape outer_sizes, outer_strides, inner_sizes, inner_strides;
  for (int64_t d = 0; d < nd; ++d) {
    if (plan.reduced[d]) inner_sizes.push_back(t.sizes()[d]), inner_strides.push_back(t.strides()[d]);
    else outer_sizes.push_back(t.sizes()[d]), outer_strides.push_back(t.strides()[d]);
  }
  const T* p = static_cast<const T*>(t.storage()->data());
  Out* o = static_cast<Out*>(out.storage()->data()) + out.offset();
  const int64_t n_out = numel_of(outer_sizes);
  const int64_t n_in = numel_of(inner_sizes);
  auto fold = [&](int64_t base) {
    Acc acc = init;
    for_each_run<1>(inner_sizes, {&inner_strides}, {base}, [&](auto off, auto inner, int64_t len) {
      for (int64_t i = 0; i < len; ++i) acc = step(acc, p[off[0] + i * inner[0]]);
    });
    return acc;
  };
  if (n_out == 1 && n_in >= kParallelGrain && t.is_contiguous()) {
    // One output, many inputs: per-thread partial folds over a flat range, then combined in order
    // (deterministic for a fixed thread count).
    const T* x = p + t.offset();
    int nt = omp_get_max_threads();
    std::vector<Acc> partial(nt, init);
#pragma omp parallel num_threads(nt)
    {
      int th = omp_get_thread_num();
      int64_t lo = n_in * th / nt, hi = n_in * (th + 1) / nt;
      Acc acc = init;
      for (int64_t i = lo; i < hi; ++i) acc = step(acc, x[i]);
      partial[th] = acc;
    }
    Acc acc = partial[0];
    for (int th = 1; th < nt; ++th) acc = step.combine(acc, partial[th]);
    o[0] = finish(acc);
    return;
  }
  Shape outer_contig = contiguous_strides(outer_sizes);
  auto output = [&](int64_t j) {
    int64_t base = t.offset(), rem = j;
    for (size_t d = 0; d < outer_sizes.size(); ++d) {
      int64_t idx = rem / outer_contig[d];
      rem %= outer_contig[d];
      base += idx * outer_strides[d];
    }
    o[j] = finish(fold(base));
  };
  if (n_out * n_in >= kParallelGrain && n_out > 1) {
#pragma omp parallel for
    for (int64_t j = 0; j < n_out; ++j) output(j);
  } else {
    for (int64_t j = 0; j < n_out; ++j) output(j);
  }
}

}  // namespace gs::kernels
