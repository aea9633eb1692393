// Complex construction, parts and conjugation. real()/imag() are views into the complex storage
// (a real tensor with doubled strides), so writes through them are visible in the complex tensor.
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/complex_ops.h"
#include "ops/elementwise.h"
#include "ops/elementwise_launch.h"
#include "ops/kernels.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {
namespace {

// A real-dtype view of complex `z`'s storage: component 0 (real) or 1 (imaginary).
Tensor component_view(const Tensor& z, int component) {
  Shape strides = z.strides();
  for (auto& s : strides) s *= 2;
  return alias_with_geometry(z, z.sizes(), strides, z.offset() * 2 + component, real_dtype(z.dtype()));
}

}  // namespace

Tensor conj(const Tensor& z) {
  kernels::check_defined(z, "conj");
  if (!is_complex(z.dtype())) return z;
  Tensor out = empty(z.sizes(), z.dtype(), z.device());
  if (kernels::on_cuda(z)) {
    kernels::cuda_unary(math::UnaryCode::conj, 0, out, z, "conj");
  } else {
    kernels::check_cpu(z, "conj");
    dispatch_float_complex(z.dtype(), "conj", [&]<typename T>() {
      if constexpr (is_complex_v<T>) kernels::unary_loop<T, T>(out, z, math::Conj{});
    });
  }
  if (should_record({z}))
    record_op("conj", {z}, {&out}, {}, {},
              [](BackwardContext&, const std::vector<Tensor>& g) { return std::vector<Tensor>{conj(g[0])}; });
  return out;
}

Tensor complex(const Tensor& re, const Tensor& im) {
  kernels::check_same_dtype(re, im, "complex");
  kernels::check_same_device(re, im, "complex");
  GS_CHECK(is_floating(re.dtype()), "complex: expected f32 or f64 parts, got {}", dtype_name(re.dtype()));
  Tensor out = empty(broadcast_shapes(re.sizes(), im.sizes(), "complex"), complex_dtype(re.dtype()), re.device());
  if (kernels::on_cuda(re)) {
    kernels::launch_strided_cuda<3>("complex", out, {&re, &im}, [&](const auto& loop, void* stream) {
      return GS_CUDA_CALL(
          cuda_kernels::make_complex(re.dtype(), out.raw_data(), re.raw_data(), im.raw_data(), loop, stream));
    });
  } else {
    kernels::check_cpu(re, "complex");
    dispatch_float(re.dtype(), "complex", [&]<typename T>() {
      kernels::binary_loop<std::complex<T>, T, T>(out, re, im, math::MakeComplex<std::complex<T>>{});
    });
  }
  if (should_record({re, im}))
    record_op("complex", {re, im}, {&out}, {}, {}, [](BackwardContext& ctx, const std::vector<Tensor>& g) {
      // L depends on x = Re z and y = Im z: dL/dre = Re g, dL/dim = Im g.
      return std::vector<Tensor>{ctx.needs_input_grad(0) ? real(g[0]) : Tensor(),
                                 ctx.needs_input_grad(1) ? imag(g[0]) : Tensor()};
    });
  return out;
}

Tensor real(const Tensor& z) {
  kernels::check_defined(z, "real");
  if (!is_complex(z.dtype())) return z;
  Tensor out = component_view(z, 0);
  if (should_record({z}))
    record_op("real", {z}, {&out}, {}, {}, [](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{complex(g[0], zeros_like(g[0]))};
    });
  return out;
}

Tensor imag(const Tensor& z) {
  kernels::check_defined(z, "imag");
  GS_CHECK(is_complex(z.dtype()), "imag: expected a complex tensor (c64 or c128), got {}", z.meta_str());
  Tensor out = component_view(z, 1);
  if (should_record({z}))
    record_op("imag", {z}, {&out}, {}, {}, [](BackwardContext&, const std::vector<Tensor>& g) {
      // L = f(Im z): the gradient w.r.t. z is i * dL/dy.
      return std::vector<Tensor>{complex(zeros_like(g[0]), g[0])};
    });
  return out;
}

Tensor complex_mul(const Tensor& a, const Tensor& b) {
  kernels::check_defined(a, "complex_mul", "the first input");
  GS_CHECK(is_complex(a.dtype()), "complex_mul: expected complex inputs, got {}", a.meta_str());
  return mul(a, b);
}

Tensor view_as_real(const Tensor& z) {
  kernels::check_defined(z, "view_as_real");
  GS_CHECK(is_complex(z.dtype()), "view_as_real: expected a complex tensor, got {}", z.meta_str());
  Shape sizes = z.sizes(), strides = z.strides();
  for (auto& s : strides) s *= 2;
  sizes.push_back(2);
  strides.push_back(1);
  Tensor out = alias_with_geometry(z, sizes, strides, z.offset() * 2, real_dtype(z.dtype()));
  if (should_record({z}))
    record_op("view_as_real", {z}, {&out}, {}, {}, [](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{complex(select(g[0], -1, 0), select(g[0], -1, 1))};
    });
  return out;
}

Tensor view_as_complex(const Tensor& x) {
  kernels::check_defined(x, "view_as_complex");
  GS_CHECK(is_floating(x.dtype()) && x.dim() >= 1 && x.sizes().back() == 2 && x.strides().back() == 1,
           "view_as_complex: expected an f32/f64 tensor whose last dim has size 2 and stride 1, got {} with "
           "strides {}",
           x.meta_str(), shape_str(x.strides()));
  Shape sizes(x.sizes().begin(), x.sizes().end() - 1), strides(x.strides().begin(), x.strides().end() - 1);
  for (size_t d = 0; d < strides.size(); ++d) {
    if (sizes[d] == 1) {  // never stepped along, so any stride describes the same elements (as torch)
      strides[d] = 1;
      continue;
    }
    GS_CHECK(strides[d] % 2 == 0, "view_as_complex: strides {} are not multiples of 2 (in a dim of size > 1)",
             shape_str(x.strides()));
    strides[d] /= 2;
  }
  GS_CHECK(x.offset() % 2 == 0, "view_as_complex: the storage offset {} is odd", x.offset());
  Tensor out = alias_with_geometry(x, sizes, strides, x.offset() / 2, complex_dtype(x.dtype()));
  if (should_record({x}))
    record_op("view_as_complex", {x}, {&out}, {}, {}, [](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{view_as_real(contiguous(g[0]))};
    });
  return out;
}

namespace {
using V = std::vector<Tensor>;
const OpRegistrar registrar{
    {"conj", [](RandomKey k) { return std::vector<OpSample>{{"c128", {sample_leaf({3, 2}, {k.seed, 1}, DType::c128)}}}; },
     [](const V& x) { return V{conj(x[0])}; }},
    {"complex",
     [](RandomKey k) {
       return std::vector<OpSample>{{"broadcast", {sample_leaf({3, 2}, {k.seed, 2}), sample_leaf({2}, {k.seed, 3})}}};
     },
     [](const V& x) { return V{complex(x[0], x[1])}; }},
    {"real_imag",
     [](RandomKey k) {
       return std::vector<OpSample>{{"non-contiguous", {sample_leaf_transposed({2, 3}, {k.seed, 4}, DType::c128)}}};
     },
     [](const V& x) { return V{real(x[0]), imag(x[0])}; }},
    {"complex_mul",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"broadcast", {sample_leaf({2, 3}, {k.seed, 5}, DType::c128), sample_leaf({3}, {k.seed, 6}, DType::c128)}}};
     },
     [](const V& x) { return V{complex_mul(x[0], x[1])}; }},
    {"view_as_real_complex",
     [](RandomKey k) { return std::vector<OpSample>{{"c128", {sample_leaf({3}, {k.seed, 7}, DType::c128)}}}; },
     [](const V& x) { return V{view_as_real(x[0]), view_as_complex(view_as_real(x[0]))}; }},
};
}  // namespace

}  // namespace gs
