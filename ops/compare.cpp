// Comparisons (bool masks, never differentiable) and where(), whose gradient routes g to the
// branch that was taken.
#include <cmath>

#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/compare.h"
#include "ops/elementwise_launch.h"
#include "ops/kernels.h"
#include "ops/registry.h"

namespace gs {
namespace {

Tensor compare(const Tensor& a, const Tensor& b, const char* op, math::CompareCode code) {
  if (a.defined() && is_storage_only(a.dtype())) fail_storage_only(op, a.dtype());  // before the device's kernel
  kernels::check_same_dtype(a, b, op);
  kernels::check_same_device(a, b, op);
  const bool ordered = code != math::CompareCode::eq && code != math::CompareCode::ne;
  GS_CHECK(!ordered || !(is_complex(a.dtype()) || a.dtype() == DType::b8),
           "{}: ordering comparisons need a real dtype (f32, f64, i64), got {}", op, dtype_name(a.dtype()));
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), op), DType::b8, a.device());
  if (kernels::on_cuda(a)) {
    kernels::launch_strided_cuda<3>(op, out, {&a, &b}, [&](const auto& loop, void* stream) {
      return GS_CUDA_CALL(
          cuda_kernels::compare(code, a.dtype(), out.raw_data(), a.raw_data(), b.raw_data(), loop, stream));
    });
    return out;
  }
  kernels::check_cpu(a, op);
  math::with_compare(code, [&](auto f) {
    dispatch_all(a.dtype(), op, [&]<typename T>() {
      if constexpr (std::is_invocable_v<decltype(f), T, T>) kernels::binary_loop<bool, T, T>(out, a, b, f);
    });
  });
  return out;
}

// The scalar as a tensor to compare against. An integer tensor compared with a non-integer scalar is
// compared in f64 (casting the scalar to i64 would turn 0.5 into 0 and give wrong answers).
std::pair<Tensor, Tensor> scalar_operands(const Tensor& like, double v) {
  kernels::check_defined(like, "comparison");
  if (like.dtype() == DType::i64 && v != static_cast<double>(static_cast<int64_t>(v)))
    return {cast_copy(like, DType::f64), full({}, v, DType::f64, like.device())};
  return {like, full({}, v, like.dtype(), like.device())};
}

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare(a, b, "eq", math::CompareCode::eq); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare(a, b, "ne", math::CompareCode::ne); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare(a, b, "lt", math::CompareCode::lt); }
Tensor le(const Tensor& a, const Tensor& b) { return compare(a, b, "le", math::CompareCode::le); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare(a, b, "gt", math::CompareCode::gt); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare(a, b, "ge", math::CompareCode::ge); }
Tensor eq(const Tensor& a, double b) {
  auto [x, y] = scalar_operands(a, b);
  return eq(x, y);
}
Tensor lt(const Tensor& a, double b) {
  auto [x, y] = scalar_operands(a, b);
  return lt(x, y);
}
Tensor le(const Tensor& a, double b) {
  auto [x, y] = scalar_operands(a, b);
  return le(x, y);
}
Tensor gt(const Tensor& a, double b) {
  auto [x, y] = scalar_operands(a, b);
  return gt(x, y);
}
Tensor ge(const Tensor& a, double b) {
  auto [x, y] = scalar_operands(a, b);
  return ge(x, y);
}

Tensor logical_not(const Tensor& mask) {
  kernels::check_defined(mask, "logical_not");
  GS_CHECK(mask.dtype() == DType::b8, "logical_not: expected a bool mask, got {}", mask.meta_str());
  Tensor out = empty(mask.sizes(), DType::b8, mask.device());
  if (kernels::on_cuda(mask)) kernels::cuda_unary(math::UnaryCode::logical_not, 0, out, mask, "logical_not");
  else kernels::unary_loop<bool, bool>(out, mask, math::LogicalNot{});
  return out;
}

Tensor logical_and(const Tensor& a, const Tensor& b) {
  GS_CHECK(a.defined() && b.defined() && a.dtype() == DType::b8 && b.dtype() == DType::b8,
           "logical_and: expected two bool masks, got {} and {}", a.meta_str(),
           b.meta_str());
  kernels::check_same_device(a, b, "logical_and");
  Tensor out = empty(broadcast_shapes(a.sizes(), b.sizes(), "logical_and"), DType::b8, a.device());
  if (kernels::on_cuda(a)) kernels::cuda_binary(math::BinaryCode::logical_and, out, a, b, "logical_and");
  else kernels::binary_loop<bool, bool, bool>(out, a, b, math::LogicalAnd{});
  return out;
}

Tensor isfinite(const Tensor& t) {
  kernels::check_defined(t, "isfinite");
  if (is_storage_only(t.dtype())) fail_storage_only("isfinite", t.dtype());
  Tensor out = empty(t.sizes(), DType::b8, t.device());
  if (kernels::on_cuda(t)) {
    kernels::launch_strided_cuda<2>("isfinite", out, {&t}, [&](const auto& loop, void* stream) {
      return GS_CUDA_CALL(cuda_kernels::isfinite(t.dtype(), out.raw_data(), t.raw_data(), loop, stream));
    });
    return out;
  }
  kernels::check_cpu(t, "isfinite");
  dispatch_all(t.dtype(), "isfinite", [&]<typename T>() { kernels::unary_loop<bool, T>(out, t, math::IsFinite{}); });
  return out;
}

bool all_true(const Tensor& mask) {
  GS_CHECK(mask.defined() && mask.dtype() == DType::b8, "all_true: expected a bool mask, got {}",
           mask.meta_str());
  for (bool v : mask.to_vector<bool>())
    if (!v) return false;
  return true;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  kernels::check_defined(cond, "where", "the condition");
  GS_CHECK(cond.dtype() == DType::b8, "where: the condition must be a bool mask, got {}", cond.meta_str());
  kernels::check_same_dtype(a, b, "where");
  if (is_storage_only(a.dtype())) fail_storage_only("where", a.dtype());
  kernels::check_same_device(a, b, "where");
  kernels::check_same_device(cond, a, "where");
  Shape shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes(), "where"), b.sizes(), "where");
  Tensor out = empty(shape, a.dtype(), a.device());
  if (kernels::on_cuda(a)) {
    kernels::launch_strided_cuda<4>("where", out, {&cond, &a, &b}, [&](const auto& loop, void* stream) {
      return GS_CUDA_CALL(cuda_kernels::where(a.dtype(), out.raw_data(), cond.raw_data(), a.raw_data(), b.raw_data(),
                                              loop, stream));
    });
  } else {
    kernels::check_cpu(a, "where");
    dispatch_all(a.dtype(), "where", [&]<typename T>() {
      T* o = out.data<T>();
      const bool* pc = static_cast<const bool*>(cond.storage()->data());
      const T* pa = static_cast<const T*>(a.storage()->data());
      const T* pb = static_cast<const T*>(b.storage()->data());
      kernels::parallel_runs<4>(
          shape,
          {contiguous_strides(shape), kernels::expanded_strides(cond, shape), kernels::expanded_strides(a, shape),
           kernels::expanded_strides(b, shape)},
          {0, cond.offset(), a.offset(), b.offset()}, [&](auto off, auto in, int64_t len) {
            for (int64_t i = 0; i < len; ++i)
              o[off[0] + i] = pc[off[1] + i * in[1]] ? pa[off[2] + i * in[2]] : pb[off[3] + i * in[3]];
          });
    });
  }
  if (should_record({a, b}))
    record_op("where", {a, b}, {&out}, {cond}, {}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      Tensor c = ctx.saved(0), zero = full({}, 0.0, g[0].dtype(), g[0].device());
      return std::vector<Tensor>{ctx.needs_input_grad(0) ? where(c, g[0], zero) : Tensor(),
                                 ctx.needs_input_grad(1) ? where(c, zero, g[0]) : Tensor()};
    });
  return out;
}

namespace {
using V = std::vector<Tensor>;
const OpRegistrar registrar{
    {"where",
     [](RandomKey k) {
       Tensor c = gt(randn({3, 1}, {k.seed, 31}, DType::f64), 0.0);
       return std::vector<OpSample>{
           {"broadcast", {c, sample_leaf({3, 4}, {k.seed, 32}), sample_leaf({4}, {k.seed, 33})}},
           {"complex", {c, sample_leaf({3, 2}, {k.seed, 34}, DType::c128), sample_leaf({3, 2}, {k.seed, 35}, DType::c128)}}};
     },
     [](const V& x) { return V{where(x[0], x[1], x[2])}; }},
};
}  // namespace

}  // namespace gs
