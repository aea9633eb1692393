// The gradient of a view with respect to its base, for any view geometry (the rule behind the
// engine's regenerated view histories, engine/autograd/record.h): view_to_base places a view's
// gradient at the view's positions in the base's storage layout (zeros elsewhere, overlapping
// positions such as an expanded view's summed) and reads it back in the base's geometry;
// view_from_base is its adjoint (the view's elements of a base-shaped tensor). Each is the other's
// backward rule, so double backward works.
//
// Both work on one buffer over the base's storage positions, in the smaller element type of the
// two: a real view of a complex base (real, imag, view_as_real) or a complex view of a real base
// (view_as_complex) is expressed in real units, a complex element being two of them.
#include <algorithm>
#include <limits>

#include "engine/autograd/grad_arith.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/elementwise.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {
namespace {

struct Geometry {
  Shape sizes, strides;
  int64_t offset;
};

// The geometry of (sizes, strides, offset) of `dtype` in units of `unit`: a complex dtype in real
// units doubles strides and offset and gains a trailing (real, imaginary) dim.
Geometry in_units(const Shape& sizes, const Shape& strides, int64_t offset, DType dtype, DType unit) {
  if (dtype == unit) return {sizes, strides, offset};
  Geometry g{sizes, strides, offset * 2};
  for (auto& s : g.strides) s *= 2;
  g.sizes.push_back(2);
  g.strides.push_back(1);
  return g;
}

// Storage position of every element, row-major.
std::vector<int64_t> positions(const Geometry& g) {
  std::vector<int64_t> out;
  const int64_t n = numel_of(g.sizes);
  out.reserve(static_cast<size_t>(n));
  std::vector<int64_t> idx(g.sizes.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t p = g.offset;
    for (size_t d = 0; d < idx.size(); ++d) p += idx[d] * g.strides[d];
    out.push_back(p);
    for (int64_t d = static_cast<int64_t>(idx.size()) - 1; d >= 0; --d) {
      if (++idx[d] < g.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

struct Layout {
  DType unit;
  std::vector<int64_t> base_pos, view_pos;
  int64_t lo = 0, extent = 0;
};

Layout layout_of(const ViewRelation& r) {
  Layout L;
  const bool base_c = is_complex(r.base_dtype), view_c = is_complex(r.view_dtype);
  L.unit = base_c && !view_c ? r.view_dtype : !base_c && view_c ? r.base_dtype : r.view_dtype;
  L.base_pos = positions(in_units(r.base_sizes, r.base_strides, r.base_offset, r.base_dtype, L.unit));
  L.view_pos = positions(in_units(r.view_sizes, r.view_strides, r.view_offset, r.view_dtype, L.unit));
  if (L.base_pos.empty()) return L;
  auto [lo, hi] = std::minmax_element(L.base_pos.begin(), L.base_pos.end());
  L.lo = *lo;
  L.extent = *hi - *lo + 1;
  for (int64_t p : L.view_pos)
    GS_CHECK(p >= L.lo && p < L.lo + L.extent,
             "view gradient: a view element at storage position {} lies outside its base's positions [{}, {})", p,
             L.lo, L.lo + L.extent);
  return L;
}

// The values of t in `unit` elements, row-major (a complex t in real units is its (re, im) pairs).
Tensor unit_values(const Tensor& t, DType unit) {
  Tensor c = contiguous_copy(t.detach(), true);
  if (c.dtype() == unit) return c;
  Shape s = c.sizes();
  s.push_back(2);
  return alias_with_geometry(c, s, contiguous_strides(s), c.offset() * 2, unit);
}

// Reads `values` (unit elements, row-major over `from`) into positions `from`, then out of `to`.
template <typename T, bool Accumulate>
void route(const T* values, const std::vector<int64_t>& from, const std::vector<int64_t>& to, int64_t lo,
           int64_t extent, T* out) {
  std::vector<T> buf(static_cast<size_t>(extent), T{});
  for (size_t k = 0; k < from.size(); ++k) {
    if constexpr (Accumulate) buf[static_cast<size_t>(from[k] - lo)] += values[k];
    else buf[static_cast<size_t>(from[k] - lo)] = values[k];
  }
  for (size_t k = 0; k < to.size(); ++k) out[k] = buf[static_cast<size_t>(to[k] - lo)];
}

// The tensor of `sizes` and `dtype` whose unit elements are `out_units` (a contiguous unit tensor).
Tensor from_units(const Tensor& out_units, const Shape& sizes, DType dtype) {
  return alias_with_geometry(out_units, sizes, contiguous_strides(sizes), 0, dtype);
}

Tensor move_values(const Tensor& x, const ViewRelation& r, bool to_base) {
  // The routing tables live on the host. A device tensor is routed there and back: views whose
  // gradient needs this (overlapping or reinterpreting views) are rare, and not on a model's path.
  if (!x.device().is_cpu())
    return to_device_copy(move_values(to_device_copy(x, Device::cpu()), r, to_base), x.device());
  const Layout L = layout_of(r);
  Tensor vals = unit_values(x, L.unit);
  const auto& from = to_base ? L.view_pos : L.base_pos;
  const auto& to = to_base ? L.base_pos : L.view_pos;
  Tensor out = empty({static_cast<int64_t>(to.size())}, L.unit);
  dispatch_float_complex(L.unit, "view gradient", [&]<typename T>() {
    const T* v = static_cast<const T*>(vals.raw_data());
    // To the base, positions a view shares (expanded dims) sum; from it, the base has one value each.
    if (to_base) route<T, true>(v, from, to, L.lo, L.extent, out.data<T>());
    else route<T, false>(v, from, to, L.lo, L.extent, out.data<T>());
  });
  Tensor result = to_base ? from_units(out, r.base_sizes, r.base_dtype) : from_units(out, r.view_sizes, r.view_dtype);
  return contiguous_copy(result, true);
}

}  // namespace

Tensor view_complement(const Tensor& gb, const ViewRelation& r) {
  GS_CHECK(gb.sizes() == r.base_sizes && gb.dtype() == r.base_dtype,
           "view gradient: expected a tensor {} {} shaped like the base, got {}", dtype_name(r.base_dtype),
           shape_str(r.base_sizes), gb.meta_str());
  Tensor out;
  {
    forward_ad::PrimalOnlyGuard ng;
    // gb less its view part: the view's values routed out and back in are exactly that part.
    Tensor inside = move_values(move_values(gb, r, false), r, true);
    out = sub(gb.detach(), inside);
  }
  if (should_record({gb}))
    record_op("view_complement", {gb}, {&out}, {}, {}, [r](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{view_complement(g[0], r)};  // a projection is its own adjoint
    });
  return out;
}

Tensor view_to_base(const Tensor& g, const ViewRelation& r) {
  GS_CHECK(g.sizes() == r.view_sizes && g.dtype() == r.view_dtype,
           "view gradient: expected a gradient {} {} for the view, got {}", dtype_name(r.view_dtype),
           shape_str(r.view_sizes), g.meta_str());
  Tensor out = move_values(g, r, true);
  if (should_record({g}))
    record_op("view_to_base", {g}, {&out}, {}, {}, [r](BackwardContext&, const std::vector<Tensor>& gg) {
      return std::vector<Tensor>{view_from_base(gg[0], r)};
    });
  return out;
}

Tensor view_from_base(const Tensor& gb, const ViewRelation& r) {
  GS_CHECK(gb.sizes() == r.base_sizes && gb.dtype() == r.base_dtype,
           "view gradient: expected a tensor {} {} shaped like the base, got {}", dtype_name(r.base_dtype),
           shape_str(r.base_sizes), gb.meta_str());
  Tensor out = move_values(gb, r, false);
  if (should_record({gb}))
    record_op("view_from_base", {gb}, {&out}, {}, {}, [r](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{view_to_base(g[0], r)};
    });
  return out;
}

namespace {

using V = std::vector<Tensor>;

// Registry samples: a transposed window with an offset, an expanded (overlapping) view, and the
// real parts of a complex base.
ViewRelation sample_relation(const Tensor& x) {
  if (is_complex(x.dtype())) return {x.sizes(), x.strides(), 0, x.dtype(), {2, 3}, {6, 2}, 0, real_dtype(x.dtype())};
  if (x.numel() == 12) return {x.sizes(), x.strides(), 0, x.dtype(), {2, 2}, {1, 3}, 1, x.dtype()};
  return {x.sizes(), x.strides(), 0, x.dtype(), {3, 2}, {0, 1}, 0, x.dtype()};  // (2) expanded to (3, 2)
}

const OpRegistrar registrar{
    {"view_from_base",
     [](RandomKey k) {
       return std::vector<OpSample>{{"transposed window", {sample_leaf({4, 3}, sub_key(k, 1))}},
                                    {"expanded", {sample_leaf({2}, sub_key(k, 2))}},
                                    {"real parts of complex", {sample_leaf({2, 3}, sub_key(k, 3), DType::c128)}}};
     },
     [](const V& x) { return V{view_from_base(x[0], sample_relation(x[0]))}; }},
    {"view_complement",
     [](RandomKey k) {
       return std::vector<OpSample>{{"transposed window", {sample_leaf({4, 3}, sub_key(k, 4))}},
                                    {"real parts of complex", {sample_leaf({2, 3}, sub_key(k, 5), DType::c128)}}};
     },
     [](const V& x) { return V{view_complement(x[0], sample_relation(x[0]))}; }},
};

}  // namespace
}  // namespace gs
