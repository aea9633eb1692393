// In-place ops. Every one follows the protocol of engine/autograd/record.h:
//
//   check_inplace(self, op, {others})   refuse read-only storage, leaves that require grad, views in the graph
//   ...write into self...                 self keeps its shape; others broadcast to it
//   finish_inplace(self, op, ...)        bump the version (every grad mode) and, when recording,
//                                        rebase self's history through a node with inputs (old self, others...)
//
// A rule that needs the value self had before the write (mul_) gets a clone taken before writing,
// and only when a gradient will need it. Operands that share self's storage are copied before the
// write, so a write never reads what it has already overwritten (x.mul_(x), x.add_(x.T)).
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/inplace.h"
#include "ops/elementwise_launch.h"
#include "ops/kernels.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {
namespace {

void check_target(const Tensor& self, const char* op) {
  kernels::check_defined(self, op, "the tensor to modify");
  kernels::check_no_self_overlap(self, op);
}

// `other` must broadcast to self's shape: an in-place op never changes the shape of self.
void check_broadcasts_to_self(const Tensor& self, const Tensor& other, const char* op) {
  GS_CHECK(is_expandable_to(other.sizes(), self.sizes()),
           "{}: the operand of shape {} cannot be broadcast to the modified tensor's shape {} (an in-place op "
           "never changes the shape of the tensor it writes; expected an operand whose shape broadcasts to {})",
           op, shape_str(other.sizes()), shape_str(self.sizes()), shape_str(self.sizes()));
}

bool shares_storage(const Tensor& a, const Tensor& b) { return a.storage().get() == b.storage().get(); }

// An operand that shares self's storage (add_(y, slice(y)), x.add_(x.T)) would change with the
// write: the kernel must read, and autograd record, its value from before. When recording, that is
// a clone on the tape (its history is the operand's, current now and stale after the write).
Tensor value_before_write(const Tensor& self, const Tensor& other) {
  if (!shares_storage(self, other)) return other;
  return should_record({other}) ? clone(other) : contiguous_copy(other, true);
}

// The dtypes add_ and mul_ write: the differentiable ones, and i64 (counters).
template <typename F>
void dispatch_arith(DType d, const char* op, F&& f) {
  if (d == DType::i64) return f.template operator()<int64_t>();
  dispatch_float_complex(d, op, std::forward<F>(f));
}

// self[i] = f(self[i], other[i]) over self's geometry, other broadcast to it.
template <typename T, typename F>
void inplace_binary(const Tensor& self, const Tensor& other, F f) {
  T* ps = static_cast<T*>(self.storage()->data());
  const T* po = static_cast<const T*>(other.storage()->data());
  if (self.is_contiguous() && other.is_contiguous() && other.sizes() == self.sizes()) {
    T* s = ps + self.offset();
    const T* o = po + other.offset();
    const int64_t n = self.numel();
#pragma omp parallel for simd if (n >= kernels::kParallelGrain)
    for (int64_t i = 0; i < n; ++i) s[i] = f(s[i], o[i]);
    return;
  }
  kernels::parallel_runs<2>(self.sizes(), {self.strides(), kernels::expanded_strides(other, self.sizes())},
                            {self.offset(), other.offset()}, [&](auto off, auto inner, int64_t len) {
                              T* s = ps + off[0];
                              const T* o = po + off[1];
                              if (inner[0] == 1 && inner[1] == 1) {
                                for (int64_t i = 0; i < len; ++i) s[i] = f(s[i], o[i]);
                              } else if (inner[1] == 0) {
                                const T y = o[0];
                                for (int64_t i = 0; i < len; ++i) s[i * inner[0]] = f(s[i * inner[0]], y);
                              } else {
                                for (int64_t i = 0; i < len; ++i)
                                  s[i * inner[0]] = f(s[i * inner[0]], o[i * inner[1]]);
                              }
                            });
}

// self[i] = f(self[i]) over self's geometry.
template <typename T, typename F>
void inplace_unary(const Tensor& self, F f) {
  T* ps = static_cast<T*>(self.storage()->data());
  if (self.is_contiguous()) {
    T* s = ps + self.offset();
    const int64_t n = self.numel();
#pragma omp parallel for simd if (n >= kernels::kParallelGrain)
    for (int64_t i = 0; i < n; ++i) s[i] = f(s[i]);
    return;
  }
  kernels::parallel_runs<1>(self.sizes(), {self.strides()}, {self.offset()}, [&](auto off, auto inner, int64_t len) {
    T* s = ps + off[0];
    for (int64_t i = 0; i < len; ++i) s[i * inner[0]] = f(s[i * inner[0]]);
  });
}

// The CUDA twin of inplace_binary: self = f(self, other) by the elementwise kernel, which writes
// through self's strides (each element read and written by one thread, so aliasing self is safe).
void cuda_inplace(math::BinaryCode code, const Tensor& self, const Tensor& other, const char* op) {
  kernels::cuda_binary(code, self, self, other, op);
}

template <typename T>
T scalar_as(double v) {
  if constexpr (is_complex_v<T>) return T(static_cast<real_t<T>>(v), 0);
  else return static_cast<T>(v);
}

void check_scalar_fits(const Tensor& self, double v, const char* op, const char* what) {
  GS_CHECK(self.dtype() != DType::i64 || v == static_cast<double>(static_cast<int64_t>(v)),
           "{}: {} {} is not an integer, but the tensor is {} (i64 tensors take integer scalars)", op, what, v,
           self.meta_str());
}

// Checks shared by the binary arithmetic ops (add_, mul_).
void check_binary(const Tensor& self, const Tensor& other, const char* op) {
  check_target(self, op);
  kernels::check_defined(other, op, "the operand");
  kernels::check_same_device(self, other, op);
  GS_CHECK(self.dtype() == other.dtype(),
           "{}: expected the operand to have the modified tensor's dtype {}, got {} (an in-place op never changes "
           "the dtype of the tensor it writes; convert the operand with to(dtype) or use copy_)",
           op, dtype_name(self.dtype()), dtype_name(other.dtype()));
  check_broadcasts_to_self(self, other, op);
}

// The zero gradient of a tensor whose value was overwritten by a constant or a copy.
std::vector<Tensor> zero_grad_rule(BackwardContext&, const std::vector<Tensor>& g) {
  return std::vector<Tensor>{zeros_like(g[0])};
}

Tensor& fill_impl(Tensor& self, double value, const char* op) {
  check_target(self, op);
  check_inplace(self, op, {});
  if (kernels::on_cuda(self)) {
    copy_values(self, full({}, value, self.dtype(), self.device()));
    finish_inplace(self, op, {}, zero_grad_rule);
    return self;
  }
  kernels::check_cpu(self, op);
  dispatch_storage(self.dtype(), op, [&]<typename T>() {  // bf16 too: a fill computes nothing
    const T v = [&] {
      if constexpr (std::is_same_v<T, bool>) return value != 0.0;
      else return scalar_as<T>(value);
    }();
    inplace_unary<T>(self, [v](T) { return v; });
  });
  finish_inplace(self, op, {}, zero_grad_rule);
  return self;
}

}  // namespace

Tensor& add_(Tensor& self, const Tensor& other, double alpha) {
  check_binary(self, other, "add_");
  check_scalar_fits(self, alpha, "add_", "alpha");
  check_inplace(self, "add_", {other});
  const Tensor src = value_before_write(self, other);
  if (kernels::on_cuda(self)) {
    Tensor scaled = src;
    if (alpha != 1.0) {  // alpha * src by the kernel itself: mul() refuses the i64 that add_ takes
      scaled = empty(self.sizes(), self.dtype(), self.device());
      kernels::cuda_binary(math::BinaryCode::mul, scaled, src, full({}, alpha, self.dtype(), self.device()), "add_");
    }
    cuda_inplace(math::BinaryCode::add, self, scaled, "add_");
  } else {
    kernels::check_cpu(self, "add_");
    dispatch_arith(self.dtype(), "add_", [&]<typename T>() {
      const T a = scalar_as<T>(alpha);
      if (alpha == 1.0) inplace_binary<T>(self, src, math::Add{});
      else inplace_binary<T>(self, src, [a](T x, T y) { return x + a * y; });
    });
  }
  finish_inplace(self, "add_", {src}, [alpha](BackwardContext& ctx, const std::vector<Tensor>& g) {
    Tensor g_other = !ctx.needs_input_grad(1) ? Tensor() : alpha == 1.0 ? g[0] : mul(g[0], alpha);
    return std::vector<Tensor>{g[0], g_other};
  });
  return self;
}

Tensor& add_(Tensor& self, double value) {
  check_target(self, "add_");
  check_scalar_fits(self, value, "add_", "the value");
  check_inplace(self, "add_", {});
  if (kernels::on_cuda(self)) {
    cuda_inplace(math::BinaryCode::add, self, full({}, value, self.dtype(), self.device()), "add_");
  } else {
    kernels::check_cpu(self, "add_");
    dispatch_arith(self.dtype(), "add_", [&]<typename T>() {
      const T v = scalar_as<T>(value);
      inplace_unary<T>(self, [v](T x) { return x + v; });
    });
  }
  finish_inplace(self, "add_", {}, [](BackwardContext&, const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  return self;
}

Tensor& mul_(Tensor& self, const Tensor& other) {
  check_binary(self, other, "mul_");
  check_inplace(self, "mul_", {other});
  const bool record = should_record({self, other});
  // d(self * other)/d other = old self: keep a differentiable clone of it (its history is self's
  // history before this write) so that double backward sees how it depends on the inputs.
  Tensor old_self = record && needs_gradient(other) ? clone(self) : Tensor();
  // An aliased operand is read, recorded and saved as its value before the write (x.mul_(x) reuses
  // the clone of old self).
  const Tensor src = other.is_same(self) && old_self.defined() ? old_self : value_before_write(self, other);
  const Tensor saved_other = record && needs_gradient(self) ? src : Tensor();
  if (kernels::on_cuda(self)) {
    cuda_inplace(math::BinaryCode::mul, self, src, "mul_");
  } else {
    kernels::check_cpu(self, "mul_");
    dispatch_arith(self.dtype(), "mul_", [&]<typename T>() { inplace_binary<T>(self, src, math::Mul{}); });
  }
  finish_inplace(
      self, "mul_", {src},
      [](BackwardContext& ctx, const std::vector<Tensor>& g) {
        Tensor g_self = ctx.needs_input_grad(0) ? mul(g[0], conj(ctx.saved(1))) : Tensor();
        Tensor g_other = ctx.needs_input_grad(1) ? mul(g[0], conj(ctx.saved(0))) : Tensor();
        return std::vector<Tensor>{g_self, g_other};
      },
      {old_self, saved_other});
  return self;
}

Tensor& mul_(Tensor& self, double value) {
  check_target(self, "mul_");
  check_scalar_fits(self, value, "mul_", "the value");
  check_inplace(self, "mul_", {});
  if (kernels::on_cuda(self)) {
    cuda_inplace(math::BinaryCode::mul, self, full({}, value, self.dtype(), self.device()), "mul_");
  } else {
    kernels::check_cpu(self, "mul_");
    dispatch_arith(self.dtype(), "mul_", [&]<typename T>() {
      const T v = scalar_as<T>(value);
      inplace_unary<T>(self, [v](T x) { return x * v; });
    });
  }
  finish_inplace(self, "mul_", {}, [value](BackwardContext&, const std::vector<Tensor>& g) {
    return std::vector<Tensor>{mul(g[0], value)};
  });
  return self;
}

Tensor& copy_(Tensor& self, const Tensor& src) {
  check_target(self, "copy_");
  kernels::check_defined(src, "copy_", "the source");
  GS_CHECK(self.device() == src.device(),
           "copy_: expected the source on the destination's device {}, got {} (move it with to(device) first)",
           self.device(), src.meta_str());
  check_broadcasts_to_self(self, src, "copy_");
  check_inplace(self, "copy_", {src});
  const Tensor before = value_before_write(self, src);
  copy_values(self, before);
  const DType src_dtype = gradient_dtype(src.dtype());  // f32 for a bf16 source: never rounded
  finish_inplace(self, "copy_", {before}, [src_dtype](BackwardContext& ctx, const std::vector<Tensor>& g) {
    // The old value of self is gone: no gradient reaches it. The source gets g, cast back to its
    // gradient dtype (complex -> real keeps the real part, as the forward cast); the engine sums it to
    // the source's shape when the source was broadcast.
    Tensor g_src = ctx.needs_input_grad(1) ? to(g[0], src_dtype) : Tensor();
    return std::vector<Tensor>{zeros_like(g[0]), g_src};
  });
  return self;
}

Tensor& fill_(Tensor& self, double value) { return fill_impl(self, value, "fill_"); }

Tensor& zero_(Tensor& self) { return fill_impl(self, 0.0, "zero_"); }

namespace {

using V = std::vector<Tensor>;

// In-place ops are checked through out-of-place wrappers: clone() gives a non-leaf that may be
// written, and its rebased history must give the gradient of the composite function.
std::vector<OpSample> binary_inplace_samples(RandomKey k) {
  const DType z = DType::c128;
  return {
      {"same shape", {sample_leaf({3, 4}, sub_key(k, 1)), sample_leaf({3, 4}, sub_key(k, 2))}},
      {"broadcast operand", {sample_leaf({2, 3, 4}, sub_key(k, 3)), sample_leaf({3, 1}, sub_key(k, 4))}},
      {"non-contiguous operand", {sample_leaf({4, 3}, sub_key(k, 5)), sample_leaf_transposed({4, 3}, sub_key(k, 6))}},
      {"complex broadcast", {sample_leaf({2, 3}, sub_key(k, 7), z), sample_leaf({3}, sub_key(k, 8), z)}},
  };
}

const OpRegistrar registrar{
    {"add_", binary_inplace_samples,
     [](const V& x) {
       Tensor y = clone(x[0]);
       add_(y, x[1], 0.5);
       add_(y, 1.5);
       return V{y};
     }},
    {"mul_", binary_inplace_samples,
     [](const V& x) {
       Tensor y = mul(x[0], 2.0);
       mul_(y, x[1]);
       mul_(y, -1.5);
       return V{y};
     }},
    {"mul_self_aliased",
     [](RandomKey k) {
       return std::vector<OpSample>{{"f64", {sample_leaf({3, 2}, sub_key(k, 1))}},
                                    {"c128", {sample_leaf({3}, sub_key(k, 2), DType::c128)}}};
     },
     [](const V& x) {
       Tensor y = clone(x[0]);
       mul_(y, y);  // y = x^2: the operand is read before the write
       return V{y};
     }},
    {"copy_",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"broadcast source", {sample_leaf({3, 4}, sub_key(k, 1)), sample_leaf({4}, sub_key(k, 2))}},
           {"real source into complex", {sample_leaf({2, 3}, sub_key(k, 3), DType::c128), sample_leaf({2, 3}, sub_key(k, 4))}},
           {"complex source into real", {sample_leaf({2, 3}, sub_key(k, 5)), sample_leaf({3}, sub_key(k, 6), DType::c128)}}};
     },
     [](const V& x) {
       Tensor y = clone(x[0]);
       copy_(y, x[1]);
       return V{mul(y, x[0])};  // the old value of y gets no gradient; x[0] still does through mul
     }},
    {"fill_zero_",
     [](RandomKey k) {
       return std::vector<OpSample>{{"f64", {sample_leaf({3, 2}, sub_key(k, 1))}},
                                    {"c128", {sample_leaf({4}, sub_key(k, 2), DType::c128)}}};
     },
     [](const V& x) {
       Tensor y = clone(x[0]), z = clone(x[0]);
       fill_(y, 2.0);
       zero_(z);
       return V{mul(y, x[0]), add(z, x[0])};
     }},
};

}  // namespace
}  // namespace gs
