// View ops and their backward rules. Forward makes an alias of the input's storage (so the
// version counter is shared); backward maps the gradient back to the input's geometry with ops
// that are themselves differentiable, so double backward works through views.
#include <numeric>
#include <optional>

#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/kernels.h"
#include "ops/reduce.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {
namespace {

// Sizes with one -1 resolved so that the element count matches.
Shape infer_sizes(const Tensor& t, Shape sizes, const char* op) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      GS_CHECK(infer < 0, "{}: only one dimension can be -1, got {}", op, shape_str(sizes));
      infer = static_cast<int64_t>(i);
    } else {
      GS_CHECK(sizes[i] >= 0, "{}: invalid size {} in {}", op, sizes[i], shape_str(sizes));
      known *= sizes[i];
    }
  }
  if (infer >= 0) {
    GS_CHECK(known != 0 && t.numel() % known == 0, "{}: cannot infer -1 in {} for {} elements (input {})", op,
             shape_str(sizes), t.numel(), shape_str(t.sizes()));
    sizes[infer] = t.numel() / known;
  }
  GS_CHECK(numel_of(sizes) == t.numel(), "{}: shape {} has {} elements, but the input {} has {}", op,
           shape_str(sizes), numel_of(sizes), shape_str(t.sizes()), t.numel());
  return sizes;
}

// Strides that view `t`'s memory as `sizes`, if any exist (dims can merge only where the old
// strides are contiguous with each other).
std::optional<Shape> view_strides(const Tensor& t, const Shape& sizes) {
  const Shape& os = t.sizes();
  const Shape& ost = t.strides();
  if (t.numel() == 0 || os.empty()) return contiguous_strides(sizes);
  Shape st(sizes.size());
  int64_t view_d = static_cast<int64_t>(sizes.size()) - 1;
  int64_t chunk_base_stride = ost.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(os.size()) - 1; d >= 0; --d) {
    tensor_numel *= os[d];
    if (d == 0 || (os[d - 1] != 1 && ost[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || sizes[view_d] == 1)) {
        st[view_d] = view_numel * chunk_base_stride;
        view_numel *= sizes[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = ost[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return st;
}

Tensor record_view(const char* name, const Tensor& in, Tensor out, BackwardRule rule) {
  if (should_record({in})) record_op(name, {in}, {&out}, {}, {}, std::move(rule));
  return out;
}

// The gradient of slice(): g placed into zeros of the input's shape.
Tensor slice_backward(const Tensor& g, const Shape& input_sizes, int64_t dim, int64_t start, int64_t end,
                      int64_t step) {
  Tensor out = zeros(input_sizes, g.dtype(), g.device());
  {
    Shape st = out.strides();
    st[dim] *= step;
    Tensor window = alias_with_geometry(out, g.sizes(), st, start * out.strides()[dim]);
    copy_values(window, g);
  }
  if (should_record({g}))
    record_op("slice_backward", {g}, {&out}, {}, {},
              [dim, start, end, step](BackwardContext&, const std::vector<Tensor>& gg) {
                return std::vector<Tensor>{slice(gg[0], dim, start, end, step)};
              });
  return out;
}

}  // namespace

Tensor reshape(const Tensor& t, Shape sizes) {
  kernels::check_defined(t, "reshape");
  sizes = infer_sizes(t, std::move(sizes), "reshape");
  Shape in_sizes = t.sizes();
  auto st = view_strides(t, sizes);
  Tensor out = st ? alias_with_geometry(t, sizes, *st, t.offset())
                  : alias_with_geometry(contiguous_copy(t, true), sizes, contiguous_strides(sizes), 0);
  if (!st) out.impl()->view_base.reset();  // a copy, not a view of t
  return record_view("reshape", t, out, [in_sizes](BackwardContext&, const std::vector<Tensor>& g) {
    return std::vector<Tensor>{reshape(g[0], in_sizes)};
  });
}

Tensor view(const Tensor& t, Shape sizes) {
  kernels::check_defined(t, "view");
  sizes = infer_sizes(t, std::move(sizes), "view");
  GS_CHECK(view_strides(t, sizes).has_value(),
           "view: a tensor of {} with strides {} cannot be viewed as {} without copying; use reshape()",
           shape_str(t.sizes()), shape_str(t.strides()), shape_str(sizes));
  return reshape(t, sizes);
}

Tensor flatten(const Tensor& t, int64_t start_dim, int64_t end_dim) {
  kernels::check_defined(t, "flatten");
  if (t.dim() == 0) return reshape(t, {1});
  int64_t s = wrap_dim(start_dim, t.dim(), "flatten"), e = wrap_dim(end_dim, t.dim(), "flatten");
  GS_CHECK(s <= e, "flatten: start_dim {} must not come after end_dim {}", start_dim, end_dim);
  if (s == e) return t;  // nothing to merge: the tensor itself, as torch.flatten
  Shape sizes(t.sizes().begin(), t.sizes().begin() + s);
  int64_t n = 1;
  for (int64_t d = s; d <= e; ++d) n *= t.sizes()[d];
  sizes.push_back(n);
  sizes.insert(sizes.end(), t.sizes().begin() + e + 1, t.sizes().end());
  return reshape(t, sizes);
}

Tensor permute(const Tensor& t, const std::vector<int64_t>& dims) {
  kernels::check_defined(t, "permute");
  GS_CHECK(static_cast<int64_t>(dims.size()) == t.dim(), "permute: expected {} dims for a tensor of {}, got {}",
           t.dim(), shape_str(t.sizes()), shape_str(dims));
  Shape sizes(t.dim()), strides(t.dim());
  std::vector<int64_t> inverse(t.dim(), -1);
  for (int64_t i = 0; i < t.dim(); ++i) {
    int64_t d = wrap_dim(dims[i], t.dim(), "permute");
    GS_CHECK(inverse[d] < 0, "permute: dim {} appears twice in {}", d, shape_str(dims));
    inverse[d] = i;
    sizes[i] = t.sizes()[d];
    strides[i] = t.strides()[d];
  }
  Tensor out = alias_with_geometry(t, sizes, strides, t.offset());
  return record_view("permute", t, out, [inverse](BackwardContext&, const std::vector<Tensor>& g) {
    return std::vector<Tensor>{permute(g[0], inverse)};
  });
}

Tensor transpose(const Tensor& t, int64_t dim0, int64_t dim1) {
  kernels::check_defined(t, "transpose");
  std::vector<int64_t> dims(t.dim());
  std::iota(dims.begin(), dims.end(), 0);
  if (t.dim() == 0) {
    wrap_dim(dim0, 0, "transpose");  // only 0 or -1 name the (absent) dim of a 0-dim tensor
    wrap_dim(dim1, 0, "transpose");
    return permute(t, dims);
  }
  std::swap(dims[wrap_dim(dim0, t.dim(), "transpose")], dims[wrap_dim(dim1, t.dim(), "transpose")]);
  return permute(t, dims);
}

Tensor slice(const Tensor& t, int64_t dim, int64_t start, int64_t end, int64_t step) {
  kernels::check_defined(t, "slice");
  GS_CHECK(t.dim() > 0, "slice: cannot slice a 0-dim tensor");
  GS_CHECK(step > 0, "slice: step must be positive, got {}", step);
  int64_t d = wrap_dim(dim, t.dim(), "slice"), n = t.sizes()[d];
  auto clampi = [n](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + n : i, 0, n); };
  start = clampi(start);
  end = std::max(clampi(end), start);
  Shape sizes = t.sizes(), strides = t.strides();
  sizes[d] = (end - start + step - 1) / step;
  strides[d] *= step;
  Tensor out = alias_with_geometry(t, sizes, strides, t.offset() + start * t.strides()[d]);
  Shape in_sizes = t.sizes();
  return record_view("slice", t, out, [=](BackwardContext&, const std::vector<Tensor>& g) {
    return std::vector<Tensor>{slice_backward(g[0], in_sizes, d, start, end, step)};
  });
}

Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  kernels::check_defined(t, "narrow");
  GS_CHECK(t.dim() > 0, "narrow: cannot narrow a 0-dim tensor");
  int64_t d = wrap_dim(dim, t.dim(), "narrow"), n = t.sizes()[d];
  if (start < 0) start += n;
  GS_CHECK(start >= 0 && length >= 0 && start + length <= n,
           "narrow: start {} and length {} do not fit in dim {} of size {}", start, length, dim, n);
  return slice(t, d, start, start + length);
}

Tensor select(const Tensor& t, int64_t dim, int64_t index) {
  kernels::check_defined(t, "select");
  GS_CHECK(t.dim() > 0, "select: cannot select from a 0-dim tensor");
  int64_t d = wrap_dim(dim, t.dim(), "select"), n = t.sizes()[d];
  GS_CHECK(index >= -n && index < n, "select: index {} out of range for dim {} of size {}", index, dim, n);
  if (index < 0) index += n;
  Shape sizes = t.sizes(), strides = t.strides();
  sizes.erase(sizes.begin() + d);
  strides.erase(strides.begin() + d);
  Tensor out = alias_with_geometry(t, sizes, strides, t.offset() + index * t.strides()[d]);
  Shape in_sizes = t.sizes();
  return record_view("select", t, out, [=](BackwardContext&, const std::vector<Tensor>& g) {
    return std::vector<Tensor>{slice_backward(unsqueeze(g[0], d), in_sizes, d, index, index + 1, 1)};
  });
}

Tensor expand(const Tensor& t, const Shape& sizes_in) {
  kernels::check_defined(t, "expand");
  GS_CHECK(static_cast<int64_t>(sizes_in.size()) >= t.dim(),
           "expand: the target {} has fewer dims than the input {}", shape_str(sizes_in), shape_str(t.sizes()));
  Shape sizes = sizes_in, strides(sizes.size(), 0);
  int64_t off = static_cast<int64_t>(sizes.size()) - t.dim();
  for (int64_t i = 0; i < static_cast<int64_t>(sizes.size()); ++i) {
    if (i < off) {
      GS_CHECK(sizes[i] >= 0, "expand: new leading dim {} needs an explicit size, got {}", i, sizes[i]);
      continue;
    }
    int64_t have = t.sizes()[i - off];
    if (sizes[i] == -1) sizes[i] = have;
    GS_CHECK(sizes[i] >= 0, "expand: invalid size {} at dim {} of {} (expected a size >= 0, or -1 to keep it)",
             sizes_in[i], i, shape_str(sizes_in));
    GS_CHECK(have == sizes[i] || have == 1, "expand: cannot expand {} to {} (dim {}: {} is neither {} nor 1)",
             shape_str(t.sizes()), shape_str(sizes_in), i, have, sizes[i]);
    strides[i] = have == sizes[i] ? t.strides()[i - off] : 0;
  }
  Tensor out = alias_with_geometry(t, sizes, strides, t.offset());
  Shape in_sizes = t.sizes();
  return record_view("expand", t, out, [in_sizes](BackwardContext&, const std::vector<Tensor>& g) {
    return std::vector<Tensor>{sum_to(g[0], in_sizes)};
  });
}

Tensor squeeze(const Tensor& t, int64_t dim) {
  kernels::check_defined(t, "squeeze");
  int64_t d = wrap_dim(dim, t.dim(), "squeeze");  // a 0-dim tensor accepts dim 0 or -1
  if (t.dim() == 0) return reshape(t, {});
  if (t.sizes()[d] != 1) return reshape(t, t.sizes());
  Shape sizes = t.sizes();
  sizes.erase(sizes.begin() + d);
  return reshape(t, sizes);
}

Tensor squeeze(const Tensor& t) {
  kernels::check_defined(t, "squeeze");
  Shape sizes;
  for (auto s : t.sizes())
    if (s != 1) sizes.push_back(s);
  return reshape(t, sizes);
}

Tensor unsqueeze(const Tensor& t, int64_t dim) {
  kernels::check_defined(t, "unsqueeze");
  int64_t d = wrap_dim(dim, t.dim() + 1, "unsqueeze");
  Shape sizes = t.sizes();
  sizes.insert(sizes.begin() + d, 1);
  return reshape(t, sizes);
}

Tensor clone(const Tensor& t) {
  kernels::check_defined(t, "clone");
  Tensor out = contiguous_copy(t, true);
  if (should_record({t}))
    record_op("clone", {t}, {&out}, {}, {},
              [](BackwardContext&, const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0]}; });
  return out;
}

Tensor contiguous(const Tensor& t) {
  kernels::check_defined(t, "contiguous");
  return t.is_contiguous() ? t : clone(t);
}

Tensor to(const Tensor& t, DType dtype) {
  kernels::check_defined(t, "to");
  if (t.dtype() == dtype) return t;
  Tensor out = cast_copy(t, dtype);
  // The gradient comes back in the input's gradient dtype: f32 <-> bf16 passes it through unrounded.
  const DType in_grad = gradient_dtype(t.dtype());
  if (should_record({t}) && carries_gradient(dtype))
    record_op("to_dtype", {t}, {&out}, {}, {}, [in_grad](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{to(g[0], in_grad)};
    });
  return out;
}

Tensor to(const Tensor& t, Device device) {
  kernels::check_defined(t, "to");
  if (t.device() == device) return t;
  Tensor out = to_device_copy(t, device);
  Device in_device = t.device();
  if (should_record({t}))
    record_op("to_device", {t}, {&out}, {}, {}, [in_device](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{to(g[0], in_device)};
    });
  return out;
}

namespace {

using V = std::vector<Tensor>;

const OpRegistrar registrar{
    {"reshape",
     [](RandomKey k) {
       return std::vector<OpSample>{{"contiguous", {sample_leaf({2, 6}, sub_key(k, 1))}},
                                    {"non-contiguous (copies)", {sample_leaf_transposed({3, 4}, sub_key(k, 2))}}};
     },
     [](const V& x) { return V{reshape(x[0], {4, -1})}; }},
    {"permute", [](RandomKey k) { return std::vector<OpSample>{{"3-d", {sample_leaf({2, 3, 4}, sub_key(k, 1))}}}; },
     [](const V& x) { return V{permute(x[0], {2, 0, 1})}; }},
    {"transpose",
     [](RandomKey k) { return std::vector<OpSample>{{"complex", {sample_leaf({2, 3}, sub_key(k, 1), DType::c128)}}}; },
     [](const V& x) { return V{transpose(x[0], 0, 1)}; }},
    {"slice", [](RandomKey k) { return std::vector<OpSample>{{"step 2", {sample_leaf({3, 7}, sub_key(k, 1))}}}; },
     [](const V& x) { return V{slice(x[0], 1, 1, -1, 2), slice(x[0], 0, -2, 10)}; }},
    {"narrow", [](RandomKey k) { return std::vector<OpSample>{{"middle", {sample_leaf({5, 3}, sub_key(k, 1))}}}; },
     [](const V& x) { return V{narrow(x[0], 0, 1, 3)}; }},
    {"select", [](RandomKey k) { return std::vector<OpSample>{{"negative index", {sample_leaf({4, 3}, sub_key(k, 1))}}}; },
     [](const V& x) { return V{select(x[0], 1, -1), select(x[0], 0, 2)}; }},
    {"expand", [](RandomKey k) { return std::vector<OpSample>{{"new and size-1 dims", {sample_leaf({3, 1}, sub_key(k, 1))}}}; },
     [](const V& x) { return V{expand(x[0], {2, 3, 4})}; }},
    {"squeeze_unsqueeze",
     [](RandomKey k) { return std::vector<OpSample>{{"size-1 dims", {sample_leaf({3, 1, 2}, sub_key(k, 1))}}}; },
     [](const V& x) { return V{squeeze(x[0], 1), unsqueeze(x[0], -1), squeeze(x[0])}; }},
    {"flatten", [](RandomKey k) { return std::vector<OpSample>{{"middle dims", {sample_leaf({2, 3, 2, 2}, sub_key(k, 1))}}}; },
     [](const V& x) { return V{flatten(x[0], 1, 2)}; }},
    {"clone",
     [](RandomKey k) { return std::vector<OpSample>{{"non-contiguous", {sample_leaf_transposed({3, 2}, sub_key(k, 1))}}}; },
     [](const V& x) { return V{clone(x[0]), contiguous(x[0])}; }},
    {"to_dtype", [](RandomKey k) { return std::vector<OpSample>{{"f64", {sample_leaf({4}, sub_key(k, 1))}},
                                                                {"c128", {sample_leaf({4}, sub_key(k, 2), DType::c128)}}}; },
     [](const V& x) {
       // real -> complex and complex -> real, in the sample's precision
       const DType d = x[0].dtype();
       return V{to(x[0], is_complex(d) ? real_dtype(d) : complex_dtype(d))};
     }},
};

}  // namespace
}  // namespace gs
