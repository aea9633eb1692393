// matmul, bmm, linear. bf16 operands pair with f32 ones: read as f32, accumulated and returned in
// f32 (the saved bf16 operand is what backward reads, so the tape keeps it at half the bytes).
// The CPU kernel is Eigen's GEMM (ops/gemm_cpu.h) on row- or column-major operands,
// so transposed views (W^T in linear, b^H in backward) are multiplied without a copy.
//
//   forward:  out (..., n, m) = a (..., n, k) @ b (..., k, m)
//   backward: grad_a = g @ b^H   (..., n, k)    grad_b = a^H @ g   (..., k, m)
//
// Batch dims broadcast (NumPy); the engine sums broadcast gradients back to each input's shape.
// 1-D operands are promoted by reshapes that are themselves on the tape, so their gradients come
// back in the right shape without special cases in the rule.

#include <omp.h>

#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/gemm_cpu.h"
#include "ops/kernels.h"
#include "ops/linalg.h"
#include "ops/linalg_cuda.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {
namespace {

// Below this many multiply-adds per matrix, a batch is split across threads one matrix per task;
// above it, each GEMM is large enough for Eigen to split it across threads itself.
constexpr int64_t kSmallGemm = 128 * 128 * 128;
// Below this many multiply-adds in total, stay on one thread.
constexpr int64_t kParallelWork = 64 * 64 * 64;

// How one matrix of an operand sits in memory. The GEMM reads it directly when one of its strides
// is 1 (row-major or column-major with an outer stride); other layouts are copied first.
enum class Layout { row, col, other };

struct MatrixGeometry {
  Layout layout;
  int64_t outer;  // the stride between rows (row-major) or columns (column-major)
};

MatrixGeometry geometry_of(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  // A dim of size 1 never moves, so its stride is free to be anything.
  if ((cols == 1 || col_stride == 1) && (rows == 1 || row_stride >= cols))
    return {Layout::row, rows == 1 ? cols : row_stride};
  if ((rows == 1 || row_stride == 1) && (cols == 1 || col_stride >= rows))
    return {Layout::col, cols == 1 ? rows : col_stride};
  return {Layout::other, 0};
}

MatrixGeometry geometry_of(const Tensor& t) {
  int64_t d = t.dim();
  return geometry_of(t.sizes()[d - 2], t.sizes()[d - 1], t.strides()[d - 2], t.strides()[d - 1]);
}

struct BatchedGemm {
  int64_t n, k, m;
  int64_t outer_a, outer_b;
  std::vector<int64_t> a_offsets, b_offsets;  // element offsets of each matrix, one per batch entry
};

template <typename T>
void run_gemms(T* out, const T* pa, const T* pb, bool a_row, bool b_row, const BatchedGemm& p) {
  const int64_t batch = static_cast<int64_t>(p.a_offsets.size());
  auto one = [&](int64_t i) {
    gemm_cpu::gemm<T>(out + i * p.n * p.m, p.m, {pa + p.a_offsets[i], a_row, p.outer_a},
                      {pb + p.b_offsets[i], b_row, p.outer_b}, p.n, p.k, p.m);
  };
  const int64_t per = p.n * p.k * p.m;
  const bool split_batch = batch > 1 && per < kSmallGemm && per * batch >= kParallelWork &&
                           omp_get_max_threads() > 1 && !omp_in_parallel();
  if (split_batch) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < batch; ++i) one(i);
  } else {
    // Eigen splits each GEMM across the OpenMP threads when it is worth it.
    for (int64_t i = 0; i < batch; ++i) one(i);
  }
}

// Element offsets of every matrix of `t` when its batch dims are broadcast to `batch`.
std::vector<int64_t> batch_offsets(const Tensor& t, const Shape& batch) {
  const int64_t nb = static_cast<int64_t>(batch.size());
  Shape st(nb, 0);
  const int64_t tb = t.dim() - 2, shift = nb - tb;
  for (int64_t d = 0; d < tb; ++d) st[d + shift] = t.sizes()[d] == 1 ? 0 : t.strides()[d];
  std::vector<int64_t> offs;
  offs.reserve(static_cast<size_t>(numel_of(batch)));
  Shape idx(nb, 0);
  int64_t off = t.offset();
  for (int64_t i = 0, n = numel_of(batch); i < n; ++i) {
    offs.push_back(off);
    for (int64_t d = nb - 1; d >= 0; --d) {
      off += st[d];
      if (++idx[d] < batch[d]) break;
      off -= st[d] * batch[d];
      idx[d] = 0;
    }
  }
  return offs;
}

// The forward kernel: a (..., n, k) @ b (..., k, m) -> contiguous (broadcast batch..., n, m).
Tensor matmul_kernel(Tensor a, Tensor b, const Shape& batch) {
  // bf16 storage is read as f32 (exact) and multiplied by the f32 GEMM: f32 accumulation, f32 result.
  a = kernels::widen_storage(a);
  b = kernels::widen_storage(b);
  const int64_t n = a.sizes()[a.dim() - 2], k = a.sizes().back(), m = b.sizes().back();
  Shape out_sizes = batch;
  out_sizes.push_back(n);
  out_sizes.push_back(m);
  if (k == 0) return zeros(out_sizes, a.dtype(), a.device());
  Tensor out = empty(out_sizes, a.dtype(), a.device());
  if (out.numel() == 0) return out;
  MatrixGeometry ga = geometry_of(a), gb = geometry_of(b);
  if (ga.layout == Layout::other) a = contiguous_copy(a, true), ga = geometry_of(a);
  if (gb.layout == Layout::other) b = contiguous_copy(b, true), gb = geometry_of(b);
  if (kernels::on_cuda(a)) {
    cuda_blas::batched_gemm(out, {&a, ga.layout == Layout::row, ga.outer, batch_offsets(a, batch)},
                            {&b, gb.layout == Layout::row, gb.outer, batch_offsets(b, batch)}, n, k, m);
    return out;
  }
  BatchedGemm p{n, k, m, ga.outer, gb.outer, batch_offsets(a, batch), batch_offsets(b, batch)};
  dispatch_float_complex(a.dtype(), "matmul", [&]<typename T>() {
    run_gemms<T>(out.data<T>(), static_cast<const T*>(a.storage()->data()),
                 static_cast<const T*>(b.storage()->data()), ga.layout == Layout::row, gb.layout == Layout::row, p);
  });
  return out;
}

void check_operands(const Tensor& a, const Tensor& b, const char* op) {
  const DType d = kernels::check_mixed_storage_pair(a, b, op);
  kernels::check_same_device(a, b, op);
  if (!kernels::on_cuda(a)) kernels::check_cpu(a, op);
  GS_CHECK(is_differentiable(d), "{}: expected f32, f64, c64 or c128 tensors (or bf16 with f32), got {} and {}", op,
           a.meta_str(), b.meta_str());
}

Tensor conj_transpose(const Tensor& t) { return conj(transpose(t, -1, -2)); }

// a (..., n, k) @ b (..., k, m), both at least 2-D, batch dims broadcast. Shapes already checked.
Tensor matmul_nd(const Tensor& a, const Tensor& b, const char* op) {
  Shape ba(a.sizes().begin(), a.sizes().end() - 2), bb(b.sizes().begin(), b.sizes().end() - 2);
  Shape batch;
  {
    const size_t nb = std::max(ba.size(), bb.size());
    batch.resize(nb);
    for (size_t i = 0; i < nb; ++i) {
      int64_t da = i < nb - ba.size() ? 1 : ba[i - (nb - ba.size())];
      int64_t db = i < nb - bb.size() ? 1 : bb[i - (nb - bb.size())];
      GS_CHECK(da == db || da == 1 || db == 1,
               "{}: the batch dims {} of a {} and {} of b {} cannot be broadcast together (batch dim {}: {} vs {}; "
               "expected equal sizes or 1)",
               op, shape_str(ba), shape_str(a.sizes()), shape_str(bb), shape_str(b.sizes()), i, da, db);
      batch[i] = da == 1 ? db : da;
    }
  }
  Tensor out = matmul_kernel(a, b, batch);
  if (should_record({a, b})) {
    // grad_a needs b and grad_b needs a: keep only what will be used.
    Tensor keep_a = needs_gradient(b) ? a : Tensor(), keep_b = needs_gradient(a) ? b : Tensor();
    record_op(op, {a, b}, {&out}, {keep_a, keep_b}, {}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      Tensor ga = ctx.needs_input_grad(0) ? matmul(g[0], conj_transpose(ctx.saved(1))) : Tensor();
      Tensor gb = ctx.needs_input_grad(1) ? matmul(conj_transpose(ctx.saved(0)), g[0]) : Tensor();
      return std::vector<Tensor>{ga, gb};
    });
  }
  return out;
}

}  // namespace

Tensor matmul(const Tensor& a, const Tensor& b) {
  check_operands(a, b, "matmul");
  GS_CHECK(a.dim() >= 1 && b.dim() >= 1,
           "matmul: both operands need at least 1 dim, got a {} and b {} (use mul() to scale by a 0-dim tensor)",
           a.meta_str(), b.meta_str());
  const int64_t k = a.sizes().back(), kb = b.dim() == 1 ? b.sizes()[0] : b.sizes()[b.dim() - 2];
  GS_CHECK(k == kb,
           "matmul: inner dims differ: a {} has {} columns (its last dim) but b {} has {} rows (its {} dim); "
           "expected a (..., n, k) @ b (..., k, m)",
           shape_str(a.sizes()), k, shape_str(b.sizes()), kb, b.dim() == 1 ? "only" : "second-to-last");
  if (a.dim() == 1 && b.dim() == 1)  // dot product: (k) @ (k) -> ()
    return kernels::own_result(reshape(matmul_nd(reshape(a, {1, k}), reshape(b, {k, 1}), "matmul"), {}));
  if (b.dim() <= 2 && a.dim() >= 2) {
    // b is one matrix (or vector): fold a's batch dims into its rows, one GEMM for all of them.
    Tensor b2 = b.dim() == 1 ? reshape(b, {k, 1}) : b;
    Shape out_sizes(a.sizes().begin(), a.sizes().end() - 1);
    if (b.dim() == 2) out_sizes.push_back(b.sizes()[1]);
    Tensor a2 = a.dim() == 2 ? a : reshape(a, {numel_of(Shape(a.sizes().begin(), a.sizes().end() - 1)), k});
    Tensor out = matmul_nd(a2, b2, "matmul");
    return out.sizes() == out_sizes ? out : kernels::own_result(reshape(out, out_sizes));
  }
  Tensor a2 = a.dim() == 1 ? reshape(a, {1, k}) : a;
  Tensor b2 = b.dim() == 1 ? reshape(b, {k, 1}) : b;
  Tensor out = matmul_nd(a2, b2, "matmul");
  if (a.dim() == 1) out = squeeze(out, -2);
  if (b.dim() == 1) out = squeeze(out, -1);
  return a.dim() == 1 || b.dim() == 1 ? kernels::own_result(out) : out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  check_operands(a, b, "bmm");
  GS_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors a (B, n, k) and b (B, k, m), got a {} and b {}",
           a.meta_str(), b.meta_str());
  GS_CHECK(a.sizes()[0] == b.sizes()[0],
           "bmm: batch sizes differ: a {} has {} matrices but b {} has {} (bmm does not broadcast; use matmul)",
           shape_str(a.sizes()), a.sizes()[0], shape_str(b.sizes()), b.sizes()[0]);
  GS_CHECK(a.sizes()[2] == b.sizes()[1],
           "bmm: inner dims differ: a {} has {} columns but b {} has {} rows; expected a (B, n, k) and b (B, k, m)",
           shape_str(a.sizes()), a.sizes()[2], shape_str(b.sizes()), b.sizes()[1]);
  return matmul_nd(a, b, "bmm");
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  kernels::check_defined(x, "linear", "the input x");
  kernels::check_defined(weight, "linear", "the weight");
  GS_CHECK(weight.dim() == 2, "linear: expected a 2-D weight (out_features, in_features), got {}", weight.meta_str());
  GS_CHECK(x.dim() >= 1 && x.sizes().back() == weight.sizes()[1],
           "linear: the input's last dim must equal the weight's in_features {}: got input {} and weight {} (out, in)",
           weight.sizes()[1], x.meta_str(), weight.meta_str());
  const DType out_dtype = kernels::check_mixed_storage_pair(x, weight, "linear");
  if (bias.defined()) {
    GS_CHECK(bias.dim() == 1 && bias.sizes()[0] == weight.sizes()[0],
             "linear: expected a bias of shape ({},) to match the weight's out_features, got {}", weight.sizes()[0],
             bias.meta_str());
    GS_CHECK(bias.dtype() == out_dtype, "linear: expected a bias of the result's dtype {}, got {}",
             dtype_name(out_dtype), bias.meta_str());
  }
  Tensor out = matmul(x, transpose(weight, 0, 1));
  return bias.defined() ? add(out, bias) : out;
}

namespace {

using V = std::vector<Tensor>;

std::vector<OpSample> matmul_samples(RandomKey k) {
  const DType z = DType::c128;
  return {
      {"2-D, odd shapes", {sample_leaf({3, 5}, sub_key(k, 1)), sample_leaf({5, 2}, sub_key(k, 2))}},
      {"1-D @ 2-D", {sample_leaf({4}, sub_key(k, 3)), sample_leaf({4, 3}, sub_key(k, 4))}},
      {"2-D @ 1-D", {sample_leaf({3, 4}, sub_key(k, 5)), sample_leaf({4}, sub_key(k, 6))}},
      {"1-D @ 1-D (dot)", {sample_leaf({4}, sub_key(k, 7)), sample_leaf({4}, sub_key(k, 8))}},
      {"broadcast batch", {sample_leaf({2, 1, 3, 2}, sub_key(k, 9)), sample_leaf({3, 2, 2}, sub_key(k, 10))}},
      {"batched @ 2-D (folded)", {sample_leaf({2, 3, 4}, sub_key(k, 11)), sample_leaf({4, 2}, sub_key(k, 12))}},
      {"2-D @ batched", {sample_leaf({2, 3}, sub_key(k, 13)), sample_leaf({2, 3, 2}, sub_key(k, 14))}},
      {"1-D @ batched", {sample_leaf({3}, sub_key(k, 15)), sample_leaf({2, 3, 2}, sub_key(k, 16))}},
      {"non-contiguous", {sample_leaf_transposed({3, 4}, sub_key(k, 17)), sample_leaf_transposed({4, 2}, sub_key(k, 18))}},
      {"complex", {sample_leaf({3, 2}, sub_key(k, 19), z), sample_leaf({2, 3}, sub_key(k, 20), z)}},
      {"complex broadcast batch", {sample_leaf({2, 2, 3}, sub_key(k, 21), z), sample_leaf({3}, sub_key(k, 22), z)}},
  };
}

const OpRegistrar registrar{
    {"matmul", matmul_samples, [](const V& x) { return V{matmul(x[0], x[1])}; }},
    // b given as (..., m, k) and transposed inside: exercises the column-major kernel path in
    // gradcheck too (gradcheck hands the function contiguous copies of the samples).
    {"matmul_transposed_b",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"f64", {sample_leaf({2, 3, 4}, sub_key(k, 1)), sample_leaf({2, 3, 4}, sub_key(k, 2))}},
           {"c128", {sample_leaf({3, 2}, sub_key(k, 3), DType::c128), sample_leaf({4, 2}, sub_key(k, 4), DType::c128)}}};
     },
     [](const V& x) { return V{matmul(x[0], transpose(x[1], -1, -2))}; }},
    {"bmm",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"f64", {sample_leaf({2, 3, 4}, sub_key(k, 1)), sample_leaf({2, 4, 2}, sub_key(k, 2))}},
           {"c128", {sample_leaf({2, 2, 3}, sub_key(k, 3), DType::c128), sample_leaf({2, 3, 2}, sub_key(k, 4), DType::c128)}}};
     },
     [](const V& x) { return V{bmm(x[0], x[1])}; }},
    {"linear",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"with bias", {sample_leaf({2, 3, 4}, sub_key(k, 1)), sample_leaf({5, 4}, sub_key(k, 2)), sample_leaf({5}, sub_key(k, 3))}},
           {"1-D input, no bias", {sample_leaf({4}, sub_key(k, 4)), sample_leaf({3, 4}, sub_key(k, 5))}},
           {"c128", {sample_leaf({3, 2}, sub_key(k, 6), DType::c128), sample_leaf({4, 2}, sub_key(k, 7), DType::c128),
                     sample_leaf({4}, sub_key(k, 8), DType::c128)}}};
     },
     [](const V& x) { return V{linear(x[0], x[1], x.size() > 2 ? x[2] : Tensor())}; }},
};

}  // namespace
}  // namespace gs
