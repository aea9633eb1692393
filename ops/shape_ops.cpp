// cat, stack, split and pad. cat, stack and pad copy into a fresh tensor; split returns views.
// Each backward hands every input its part of g with differentiable ops (narrow, select, pad,
// add), so gradients of gradients flow through them as well.
#include <algorithm>

#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/kernels.h"
#include "ops/registry.h"
#include "ops/shape_ops.h"
#include "ops/view.h"

namespace gs {
namespace {

// dst = src elementwise (same shape and dtype, any strides); large copies use all threads.
void parallel_copy(const Tensor& dst, const Tensor& src) {
  if (kernels::on_cuda(dst)) return copy_values(dst, src);  // the strided CUDA copy
  kernels::check_cpu(dst, "copy");
  dispatch_storage(dst.dtype(), "copy", [&]<typename T>() {
    T* d = static_cast<T*>(dst.storage()->data());
    const T* s = static_cast<const T*>(src.storage()->data());
    kernels::parallel_runs<2>(dst.sizes(), {dst.strides(), src.strides()}, {dst.offset(), src.offset()},
                              [&](auto off, auto inner, int64_t len) {
                                if (inner[0] == 1 && inner[1] == 1) {
                                  std::copy_n(s + off[1], len, d + off[0]);
                                } else {
                                  for (int64_t i = 0; i < len; ++i) d[off[0] + i * inner[0]] = s[off[1] + i * inner[1]];
                                }
                              });
  });
}

// The part of `out` of `sizes` that starts at `start` along `dim` (no autograd: a kernel's window).
Tensor window(const Tensor& out, const Shape& sizes, int64_t dim, int64_t start) {
  return alias_with_geometry(out, sizes, out.strides(), out.offset() + start * out.strides()[dim]);
}

// The tensors of a cat or stack: at least one, all defined, one dtype, one device.
void check_joinable(const std::vector<Tensor>& ts, const char* op) {
  GS_CHECK(!ts.empty(), "{}: expected a non-empty list of tensors, got an empty one", op);
  for (size_t i = 0; i < ts.size(); ++i) {
    GS_CHECK(ts[i].defined(), "{}: tensor {} of the list is undefined", op, i);
    GS_CHECK(ts[i].dtype() == ts[0].dtype(),
             "{}: expected every tensor to have dtype {} (that of tensor 0), but tensor {} is {} (convert it "
             "with to(dtype))",
             op, dtype_name(ts[0].dtype()), i, ts[i].meta_str());
    GS_CHECK(ts[i].device() == ts[0].device(),
             "{}: expected every tensor on {} (where tensor 0 is), but tensor {} is {}", op, ts[0].device(), i,
             ts[i].meta_str());
  }
}

// Tensor i may differ from tensor 0 only along `dim`.
void check_cat_shapes(const std::vector<Tensor>& ts, int64_t dim) {
  const Shape& s0 = ts[0].sizes();
  for (size_t i = 1; i < ts.size(); ++i) {
    const Shape& si = ts[i].sizes();
    bool match = si.size() == s0.size();
    for (size_t d = 0; match && d < s0.size(); ++d) match = static_cast<int64_t>(d) == dim || si[d] == s0[d];
    GS_CHECK(match,
             "cat: tensor {} has shape {}, but tensor 0 has shape {}; they must have the same number of dims and "
             "the same sizes in every dim except dim {}",
             i, shape_str(si), shape_str(s0), dim);
  }
}

}  // namespace

// ---- cat: tensors (..., n_i, ...) -> (..., sum n_i, ...); backward: slice i of g along dim.
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  check_joinable(tensors, "cat");
  GS_CHECK(tensors[0].dim() > 0, "cat: tensor 0 is 0-dim ({}); 0-dim tensors cannot be concatenated (use stack)",
           tensors[0].meta_str());
  const int64_t d = wrap_dim(dim, tensors[0].dim(), "cat");
  check_cat_shapes(tensors, d);
  std::vector<int64_t> starts, lengths;
  Shape out_sizes = tensors[0].sizes();
  out_sizes[d] = 0;
  for (const auto& t : tensors) {
    starts.push_back(out_sizes[d]);
    lengths.push_back(t.sizes()[d]);
    out_sizes[d] += t.sizes()[d];
  }
  Tensor out = empty(out_sizes, tensors[0].dtype(), tensors[0].device());
  for (size_t i = 0; i < tensors.size(); ++i) parallel_copy(window(out, tensors[i].sizes(), d, starts[i]), tensors[i]);
  if (should_record(tensors))
    record_op("cat", tensors, {&out}, {}, {}, [d, starts, lengths](BackwardContext& ctx, const std::vector<Tensor>& g) {
      std::vector<Tensor> grads(starts.size());
      for (size_t i = 0; i < starts.size(); ++i)
        if (ctx.needs_input_grad(i)) grads[i] = narrow(g[0], d, starts[i], lengths[i]);
      return grads;
    });
  return out;
}

// ---- stack: n tensors of one shape S -> S with a new dim of size n at `dim`; backward: select i.
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  check_joinable(tensors, "stack");
  const Shape& shape = tensors[0].sizes();
  for (size_t i = 1; i < tensors.size(); ++i)
    GS_CHECK(tensors[i].sizes() == shape,
             "stack: expected every tensor to have shape {} (that of tensor 0), but tensor {} has shape {}",
             shape_str(shape), i, shape_str(tensors[i].sizes()));
  const int64_t d = wrap_dim(dim, static_cast<int64_t>(shape.size()) + 1, "stack");
  Shape out_sizes = shape;
  out_sizes.insert(out_sizes.begin() + d, static_cast<int64_t>(tensors.size()));
  Tensor out = empty(out_sizes, tensors[0].dtype(), tensors[0].device());
  Shape slot_strides = out.strides();  // of one slot out[..., i, ...]
  slot_strides.erase(slot_strides.begin() + d);
  for (size_t i = 0; i < tensors.size(); ++i)
    parallel_copy(alias_with_geometry(out, shape, slot_strides, static_cast<int64_t>(i) * out.strides()[d]),
                  tensors[i]);
  if (should_record(tensors)) {
    size_t n = tensors.size();
    record_op("stack", tensors, {&out}, {}, {}, [d, n](BackwardContext& ctx, const std::vector<Tensor>& g) {
      std::vector<Tensor> grads(n);
      for (size_t i = 0; i < n; ++i)
        if (ctx.needs_input_grad(i)) grads[i] = select(g[0], d, static_cast<int64_t>(i));
      return grads;
    });
  }
  return out;
}

// ---- split: views via narrow, so each piece's backward is narrow's.
std::vector<Tensor> split(const Tensor& t, const std::vector<int64_t>& sizes, int64_t dim) {
  kernels::check_defined(t, "split");
  GS_CHECK(t.dim() > 0, "split: cannot split a 0-dim tensor ({})", t.meta_str());
  const int64_t d = wrap_dim(dim, t.dim(), "split"), n = t.sizes()[d];
  int64_t total = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    GS_CHECK(sizes[i] >= 0, "split: piece {} has negative size {} (sizes {})", i, sizes[i], shape_str(sizes));
    total += sizes[i];
  }
  GS_CHECK(total == n, "split: the sizes {} add up to {}, but dim {} of the input {} has size {}", shape_str(sizes),
           total, dim, shape_str(t.sizes()), n);
  std::vector<Tensor> pieces;
  int64_t start = 0;
  for (auto s : sizes) {
    pieces.push_back(narrow(t, d, start, s));
    start += s;
  }
  return pieces;
}

std::vector<Tensor> split(const Tensor& t, int64_t split_size, int64_t dim) {
  kernels::check_defined(t, "split");
  GS_CHECK(t.dim() > 0, "split: cannot split a 0-dim tensor ({})", t.meta_str());
  GS_CHECK(split_size > 0, "split: split_size must be positive, got {}", split_size);
  const int64_t n = t.sizes()[wrap_dim(dim, t.dim(), "split")];
  std::vector<int64_t> sizes;
  for (int64_t start = 0; start < n; start += split_size) sizes.push_back(std::min(split_size, n - start));
  if (sizes.empty()) sizes.push_back(0);  // an empty dim splits into one empty piece, as in torch
  return split(t, sizes, dim);
}

// ---- pad
//
// Decision on negative pads: constant mode crops (as torch.nn.functional.pad does), so a pad and
// its inverse are the same op with negated pads, which is also how its backward is written.
// Circular mode rejects them: a negative wrap has no periodic meaning.
namespace {

// Per-dim (before, after) amounts from torch's last-dim-first pad list, validated.
struct PadPlan {
  Shape before, after, out_sizes;
};

PadPlan plan_pad(const Tensor& t, const std::vector<int64_t>& pads, PadMode mode) {
  const char* mode_name = mode == PadMode::constant ? "constant" : "circular";
  GS_CHECK(pads.size() % 2 == 0,
           "pad: expected an even number of pads (a before and an after pad per dim, last dim first), got {}: {}",
           pads.size(), shape_str(pads));
  const int64_t ndims_padded = static_cast<int64_t>(pads.size()) / 2;
  GS_CHECK(ndims_padded <= t.dim(), "pad: the {} pads {} cover {} dims, but the input {} has only {}", pads.size(),
           shape_str(pads), ndims_padded, shape_str(t.sizes()), t.dim());
  PadPlan p{Shape(t.dim(), 0), Shape(t.dim(), 0), t.sizes()};
  for (int64_t k = 0; k < ndims_padded; ++k) {
    const int64_t d = t.dim() - 1 - k, n = t.sizes()[d], lo = pads[2 * k], hi = pads[2 * k + 1];
    if (mode == PadMode::circular) {
      GS_CHECK(lo >= 0 && hi >= 0, "pad: circular padding needs non-negative pads, got ({}, {}) for dim {}", lo, hi, d);
      GS_CHECK(lo <= n && hi <= n,
               "pad: circular pads ({}, {}) for dim {} of size {} would wrap more than once; each pad must be at "
               "most the dim's size",
               lo, hi, d, n);
    }
    p.before[d] = lo;
    p.after[d] = hi;
    p.out_sizes[d] = n + lo + hi;
    GS_CHECK(p.out_sizes[d] >= 0, "pad: {} pads ({}, {}) crop dim {} of size {} to a negative size {}", mode_name, lo,
             hi, d, n, p.out_sizes[d]);
  }
  return p;
}

// The pad list that pads only dim `d` of a tensor with `ndim` dims.
std::vector<int64_t> pads_for_dim(int64_t ndim, int64_t d, int64_t before, int64_t after) {
  std::vector<int64_t> pads(2 * static_cast<size_t>(ndim - d), 0);
  pads[2 * (ndim - 1 - d)] = before;
  pads[2 * (ndim - 1 - d) + 1] = after;
  return pads;
}

// (in) -> (out): `value` everywhere, then the kept part of t copied into place. Where a pad is
// negative the kept part starts -pad into t; where positive it starts pad into out.
Tensor pad_constant_forward(const Tensor& t, const PadPlan& p, double value) {
  Tensor out = full(p.out_sizes, value, t.dtype(), t.device());
  Tensor src = t.detach(), dst = out.detach();
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t crop_front = std::max<int64_t>(0, -p.before[d]), crop_back = std::max<int64_t>(0, -p.after[d]);
    const int64_t keep = t.sizes()[d] - crop_front - crop_back;
    if (keep <= 0) return out;  // cropped away entirely: nothing of t survives
    src = narrow(src, d, crop_front, keep);
    dst = narrow(dst, d, std::max<int64_t>(0, p.before[d]), keep);
  }
  parallel_copy(dst, src);
  return out;
}

// (out) -> (in): the adjoint of padding is cropping and the other way round, i.e. the same op
// with negated pads. When nothing was cropped this is a plain window of g (a view, no copy).
Tensor pad_constant_backward(const Tensor& g, const std::vector<int64_t>& pads, const PadPlan& p) {
  if (std::all_of(pads.begin(), pads.end(), [](int64_t v) { return v >= 0; })) {
    Tensor r = g;
    for (int64_t d = 0; d < g.dim(); ++d)
      if (p.before[d] != 0 || p.after[d] != 0) r = narrow(r, d, p.before[d], g.sizes()[d] - p.before[d] - p.after[d]);
    return r;
  }
  std::vector<int64_t> negated(pads.size());
  std::transform(pads.begin(), pads.end(), negated.begin(), [](int64_t v) { return -v; });
  return pad(g, negated, PadMode::constant, 0.0);
}

// (in) -> (out): out[i] = t[(i - before) mod n] along each padded dim, one dim at a time: the
// before-halo is t's last `before` entries, the after-halo its first `after` entries.
Tensor pad_circular_forward(const Tensor& t, const PadPlan& p) {
  Tensor cur = t.detach();  // no tape: the pad node records the whole op
  bool copied = false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t n = cur.sizes()[d], lo = p.before[d], hi = p.after[d];
    if (lo == 0 && hi == 0) continue;
    cur = cat({narrow(cur, d, n - lo, lo), cur, narrow(cur, d, 0, hi)}, d);
    copied = true;
  }
  return copied ? cur : contiguous_copy(cur, true);  // never an alias of t
}

// (..., lo + n + hi, ...) -> (..., n, ...) along d: each halo's gradient goes back to the
// elements it copied (the before-halo to the last lo, the after-halo to the first hi).
Tensor unwrap_dim(const Tensor& g, int64_t d, int64_t n, int64_t lo, int64_t hi) {
  Tensor core = narrow(g, d, lo, n);
  if (lo > 0) core = add(core, pad(narrow(g, d, 0, lo), pads_for_dim(g.dim(), d, n - lo, 0)));
  if (hi > 0) core = add(core, pad(narrow(g, d, lo + n, hi), pads_for_dim(g.dim(), d, 0, n - hi)));
  return core;
}

Tensor pad_circular_backward(const Tensor& g, const PadPlan& p, const Shape& in_sizes) {
  Tensor r = g;
  for (int64_t d = 0; d < g.dim(); ++d)
    if (p.before[d] != 0 || p.after[d] != 0) r = unwrap_dim(r, d, in_sizes[d], p.before[d], p.after[d]);
  return r;
}

}  // namespace

Tensor pad(const Tensor& t, const std::vector<int64_t>& pads, PadMode mode, double value) {
  kernels::check_defined(t, "pad");
  const PadPlan p = plan_pad(t, pads, mode);
  const bool constant = mode == PadMode::constant;
  GS_CHECK(constant || value == 0.0, "pad: a fill value ({}) applies to constant mode only, not circular", value);
  Tensor out = constant ? pad_constant_forward(t, p, value) : pad_circular_forward(t, p);
  if (should_record({t})) {
    Shape in_sizes = t.sizes();
    record_op(constant ? "pad_constant" : "pad_circular", {t}, {&out}, {}, {},
              [constant, pads, p, in_sizes](BackwardContext&, const std::vector<Tensor>& g) {
                return std::vector<Tensor>{constant ? pad_constant_backward(g[0], pads, p)
                                                    : pad_circular_backward(g[0], p, in_sizes)};
              });
  }
  return out;
}

namespace {
using V = std::vector<Tensor>;

const OpRegistrar registrar{
    {"cat",
     [](RandomKey k) {
       return std::vector<OpSample>{{"odd widths",
                                     {sample_leaf({2, 3}, sub_key(k, 1)), sample_leaf({2, 1}, sub_key(k, 2)),
                                      sample_leaf({2, 4}, sub_key(k, 3))}},
                                    {"non-contiguous complex",
                                     {sample_leaf_transposed({2, 3}, sub_key(k, 4), DType::c128),
                                      sample_leaf({2, 2}, sub_key(k, 5), DType::c128)}}};
     },
     [](const V& x) { return V{cat(x, -1), cat({x[0], x[0]}, 0)}; }},
    {"stack",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"3 tensors",
            {sample_leaf({2, 3}, sub_key(k, 6)), sample_leaf({2, 3}, sub_key(k, 7)),
             sample_leaf_transposed({2, 3}, sub_key(k, 8))}},
           {"complex",
            {sample_leaf({3, 2}, sub_key(k, 9), DType::c128), sample_leaf({3, 2}, sub_key(k, 10), DType::c128)}}};
     },
     [](const V& x) { return V{stack(x, 0), stack(x, -1)}; }},
    {"split",
     [](RandomKey k) { return std::vector<OpSample>{{"uneven pieces", {sample_leaf({5, 3}, sub_key(k, 11))}}}; },
     [](const V& x) {
       V pieces = split(x[0], 2, 0);  // (2, 3) (2, 3) (1, 3)
       for (auto& p : split(x[0], std::vector<int64_t>{1, 2}, -1)) pieces.push_back(mul(p, p));
       return pieces;
     }},
    {"pad",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"2 dims", {sample_leaf({2, 3, 4}, sub_key(k, 12))}},
           {"complex non-contiguous", {sample_leaf_transposed({3, 4}, sub_key(k, 13), DType::c128)}}};
     },
     [](const V& x) {
       return V{pad(x[0], {1, 2, 0, 1}, PadMode::constant, 0.5), pad(x[0], {-1, 2}),  // grow; crop and grow
                pad(x[0], {2, -3, -1, 1}),                                             // crops in two dims
                pad(x[0], {2, 1, 1, 3}, PadMode::circular), pad(x[0], {4, 0}, PadMode::circular)};
     }},
};
}  // namespace

}  // namespace gs
