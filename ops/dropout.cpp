// Dropout, feature dropout and drop path (ops/dropout.h): one kernel, ops/dropout_math.h's mask on
// the CPU loop here and in the CUDA kernel of dropout_cuda.cu. The three differ only in which dims
// carry decisions: every dim, the first two (sample, channel), or the first (sample).
#include "ops/dropout.h"

#include <cmath>

#include "engine/autograd/record.h"
#include "engine/error.h"
#include "engine/strided_index.h"
#include "ops/dropout_cuda.h"
#include "ops/dropout_math.h"
#include "ops/kernels.h"
#include "ops/registry.h"

namespace gs {

namespace {

enum class Decisions { element, channel, sample };

const char* op_name(Decisions d) {
  return d == Decisions::element ? "dropout" : d == Decisions::channel ? "feature_dropout" : "drop_path";
}

// The global mask index of x's elements as an affine map of their local coordinates: index =
// base + sum_d i_d * strides[d], the row-major index in the global mask (global sizes along the dims
// that carry decisions, 1 along the others, whose strides here are 0).
struct MaskIndex {
  Shape strides;
  uint64_t base = 0;
};

MaskIndex mask_index(const Tensor& x, Decisions d, const RandomWindow* w) {
  const char* op = op_name(d);
  const auto n = static_cast<size_t>(x.dim());
  const size_t varying = d == Decisions::element ? n : d == Decisions::channel ? 2 : 1;
  GS_CHECK(n >= varying, "{}: expected a tensor with at least {} dims ({}), got {}", op, varying,
           d == Decisions::channel ? "samples, channels, ..." : "samples, ...", x.meta_str());
  Shape global = x.sizes(), start(n, 0);
  if (w) {
    GS_CHECK(w->global_sizes.size() == n && w->start.size() == n,
             "{}: expected a window with global sizes and start of {} dims (x is {}), got {} and {}", op, n,
             x.meta_str(), shape_str(w->global_sizes), shape_str(w->start));
    for (size_t k = 0; k < n; ++k)
      GS_CHECK(w->start[k] >= 0 && w->start[k] + x.size(static_cast<int64_t>(k)) <= w->global_sizes[k],
               "{}: x {} starting at {} does not fit in the global shape {}", op, x.meta_str(), shape_str(w->start),
               shape_str(w->global_sizes));
    global = w->global_sizes, start = w->start;
  }
  Shape mask_sizes(n, 1);
  for (size_t k = 0; k < varying; ++k) mask_sizes[k] = global[k];
  const Shape cs = contiguous_strides(mask_sizes);
  MaskIndex m{Shape(n, 0), 0};
  for (size_t k = 0; k < varying; ++k) {
    m.strides[k] = cs[k];
    m.base += static_cast<uint64_t>(start[k] * cs[k]);
  }
  return m;
}

// out = x * mask, contiguous, on x's device.
Tensor apply_mask(Decisions d, const Tensor& x, const math::DropoutMask& mask, const MaskIndex& idx) {
  const char* op = op_name(d);
  Tensor out = empty(x.sizes(), x.dtype(), x.device());
  const Shape out_strides = contiguous_strides(x.sizes());
  if (kernels::on_cuda(x)) {
    const auto loop = make_strided_loop<3>(x.sizes(), {&out_strides, &x.strides(), &idx.strides});
    kernels::launch_cuda(op, "dropout_apply", x, [&](void* stream) {
      return GS_CUDA_CALL(
          cuda_kernels::dropout_apply(x.dtype(), out.raw_data(), x.raw_data(), idx.base, mask, loop, stream));
    });
    return out;
  }
  kernels::check_cpu(x, op);
  dispatch_float(x.dtype(), op, [&]<typename T>() {
    T* o = out.data<T>();
    const T* px = static_cast<const T*>(x.storage()->data());
    kernels::parallel_runs<3>(x.sizes(), {out_strides, x.strides(), idx.strides}, {0, x.offset(), 0},
                              [&](auto off, auto inner, int64_t len) {
                                // Shared decisions (inner index stride 0) draw once per run.
                                if (inner[2] == 0) {
                                  const T m = mask.keep(idx.base + static_cast<uint64_t>(off[2]))
                                                  ? static_cast<T>(mask.scale) : T(0);
                                  for (int64_t i = 0; i < len; ++i) o[off[0] + i] = px[off[1] + i * inner[1]] * m;
                                  return;
                                }
                                for (int64_t i = 0; i < len; ++i)
                                  o[off[0] + i] = mask.apply(px[off[1] + i * inner[1]],
                                                             idx.base + static_cast<uint64_t>(off[2] + i * inner[2]));
                              });
  });
  return out;
}

// The op on x (or, in backward, on the gradient: the same mask, so the rule is the op itself).
Tensor masked(Decisions d, const Tensor& x, const math::DropoutMask& mask, const MaskIndex& idx) {
  Tensor out = apply_mask(d, x, mask, idx);
  if (should_record({x})) {
    auto rule = [d, mask, idx](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{masked(d, g[0], mask, idx)};
    };
    // One literal name per kind (the registry's coverage scan reads them).
    if (d == Decisions::element) record_op("dropout", {x}, {&out}, {}, {}, rule);
    else if (d == Decisions::channel) record_op("feature_dropout", {x}, {&out}, {}, {}, rule);
    else record_op("drop_path", {x}, {&out}, {}, {}, rule);
  }
  return out;
}

Tensor dropout_kind(Decisions d, const Tensor& x, double p, RandomKey key, bool training, const RandomWindow* w) {
  const char* op = op_name(d);
  kernels::check_defined(x, op);
  dispatch_float(x.dtype(), op, []<typename T>() {});  // f32 or f64, with the shared message otherwise
  GS_CHECK(std::isfinite(p) && p >= 0.0 && p <= 1.0, "{}: expected a drop probability p in [0, 1], got {}", op, p);
  const MaskIndex idx = mask_index(x, d, w);  // checked in eval too, so a wrong window fails at once
  if (!training || p == 0.0 || x.numel() == 0) return x;
  return masked(d, x, math::DropoutMask{key.seed, key.stream, p, p < 1.0 ? 1.0 / (1.0 - p) : 0.0}, idx);
}

}  // namespace

Tensor dropout(const Tensor& x, double p, RandomKey key, bool training, const RandomWindow* window) {
  return dropout_kind(Decisions::element, x, p, key, training, window);
}

Tensor feature_dropout(const Tensor& x, double p, RandomKey key, bool training, const RandomWindow* window) {
  return dropout_kind(Decisions::channel, x, p, key, training, window);
}

Tensor drop_path(const Tensor& x, double p, RandomKey key, bool training, const RandomWindow* window) {
  return dropout_kind(Decisions::sample, x, p, key, training, window);
}

namespace {

// Fixed keys: the registry's functions must be deterministic (gradcheck evaluates them many times).
constexpr RandomKey kDropKey{0x64726f70ULL, 7};

// Samples large enough that some elements (or channels, or samples) are kept and some dropped.
std::vector<OpSample> drop_samples(RandomKey k, const Shape& plain) {
  return {{"plain", {sample_leaf(plain, k)}},
          {"non-contiguous", {sample_leaf_transposed({6, 5}, sub_key(k, 1))}}};
}

const OpRegistrar kDropoutOps{
    OpInfo{"dropout", [](RandomKey k) { return drop_samples(k, {3, 4, 5}); },
           [](const std::vector<Tensor>& in) { return std::vector<Tensor>{dropout(in[0], 0.4, kDropKey)}; }},
    // A (2, 3, 4) block at (1, 2, 3) of a (4, 6, 9) field: the index map with offsets.
    OpInfo{"dropout_tile",
           [](RandomKey k) { return std::vector<OpSample>{{"tile of a global field", {sample_leaf({2, 3, 4}, k)}}}; },
           [](const std::vector<Tensor>& in) {
             const RandomWindow w{{4, 6, 9}, {1, 2, 3}};
             return std::vector<Tensor>{dropout(in[0], 0.4, kDropKey, true, &w)};
           }},
    OpInfo{"feature_dropout", [](RandomKey k) { return drop_samples(k, {3, 4, 2, 3}); },
           [](const std::vector<Tensor>& in) { return std::vector<Tensor>{feature_dropout(in[0], 0.4, kDropKey)}; }},
    OpInfo{"drop_path", [](RandomKey k) { return drop_samples(k, {6, 2, 3}); },
           [](const std::vector<Tensor>& in) { return std::vector<Tensor>{drop_path(in[0], 0.4, kDropKey)}; }},
};

}  // namespace
}  // namespace gs
