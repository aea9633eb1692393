// The indexing primitives of ops/index_map.h: host planning (positions, the CSR table of sources
// per target), the CPU loops and the CUDA dispatch of take and put, and their backward rules.
#include "ops/index_map.h"

#include <cstring>

#include "engine/autograd/record.h"
#include "engine/factory.h"
#include "ops/indexing_cuda.h"
#include "ops/indexing_math.h"
#include "ops/kernels.h"
#include "ops/view.h"

namespace gs::indexing {
namespace {

using V = std::vector<Tensor>;

// For every target p, the sources q that write it, in increasing q: entries[starts[p] ..
// starts[p + 1]). A counting sort, O(targets + sources); it fixes the order duplicates meet in.
struct Csr {
  Tensor starts, entries;
};

Csr build_csr(const IndexMap& m) {
  const int64_t n_out = numel_of(m.target_shape), n_src = m.positions.numel();
  Csr c{zeros({n_out + 1}, DType::i64), empty({n_src}, DType::i64)};
  int64_t* starts = c.starts.data<int64_t>();
  int64_t* entries = c.entries.data<int64_t>();
  const int64_t* pos = m.positions.data<int64_t>();
  for (int64_t q = 0; q < n_src; ++q) ++starts[pos[q] + 1];
  for (int64_t p = 0; p < n_out; ++p) starts[p + 1] += starts[p];
  std::vector<int64_t> cursor(starts, starts + n_out);
  for (int64_t q = 0; q < n_src; ++q) entries[cursor[pos[q]]++] = q;
  return c;
}

template <typename F>
void parallel_for(int64_t n, F f) {
#pragma omp parallel for if (n >= kernels::kParallelGrain)
  for (int64_t i = 0; i < n; ++i) f(i);
}

// The values of take_at, no autograd.
Tensor take_values(const Tensor& x, const IndexMap& m, const char* op) {
  const Tensor xc = contiguous_copy(x);
  const int64_t n = m.positions.numel();
  Tensor out = empty(m.positions.sizes(), x.dtype(), x.device());
  if (kernels::on_cuda(x)) {
    const Tensor pos = to_device_copy(m.positions, x.device());
    kernels::launch_cuda(op, "index_take", x, [&](void* stream) {
      return GS_CUDA_CALL(cuda_kernels::index_take(x.dtype(), out.raw_data(), xc.raw_data(),
                                                   pos.device_data<int64_t>(), n, stream));
    });
    return out;
  }
  kernels::check_cpu(x, op);
  dispatch_storage(x.dtype(), op, [&]<typename T>() {
    const T* px = xc.data<T>();
    T* po = out.data<T>();
    const int64_t* pos = m.positions.data<int64_t>();
    parallel_for(n, [&](int64_t q) { po[q] = take_point(px, pos, q); });
  });
  return out;
}

// The values of put_at (src_step 1) and fill_at (src one value, src_step 0), no autograd.
Tensor put_values(const Tensor& base, const IndexMap& m, const Tensor& src, int64_t src_step, PutMode mode,
                  const char* op) {
  kernels::check_same_device(base, src, op);
  GS_CHECK(mode == PutMode::overwrite || base.dtype() != DType::b8,
           "{}: cannot sum bool values; accumulate needs f32, f64, c64, c128 or i64, got {}", op, base.meta_str());
  const Csr csr = build_csr(m);
  const Tensor b = contiguous_copy(base), s = contiguous_copy(src);
  const int64_t n_out = numel_of(m.target_shape);
  Tensor out = empty(m.target_shape, base.dtype(), base.device());
  if (kernels::on_cuda(base)) {
    const Tensor starts = to_device_copy(csr.starts, base.device());
    const Tensor entries = to_device_copy(csr.entries, base.device());
    const int64_t* st = starts.device_data<int64_t>();
    const int64_t* en = entries.device_data<int64_t>();
    if (mode == PutMode::accumulate)
      kernels::launch_cuda(op, "index_put_accumulate", base, [&](void* stream) {
        return GS_CUDA_CALL(cuda_kernels::index_put_accumulate(base.dtype(), out.raw_data(), b.raw_data(),
                                                               s.raw_data(), st, en, n_out, stream));
      });
    else
      kernels::launch_cuda(op, "index_put_overwrite", base, [&](void* stream) {
        return GS_CUDA_CALL(cuda_kernels::index_put_overwrite(base.dtype(), out.raw_data(), b.raw_data(),
                                                              s.raw_data(), src_step, st, en, n_out, stream));
      });
    return out;
  }
  kernels::check_cpu(base, op);
  const int64_t* st = csr.starts.data<int64_t>();
  const int64_t* en = csr.entries.data<int64_t>();
  if (mode == PutMode::accumulate) {
    dispatch_all(base.dtype(), op, [&]<typename T>() {
      if constexpr (!std::is_same_v<T, bool>) {
        const T *pb = b.data<T>(), *ps = s.data<T>();
        T* po = out.data<T>();
        parallel_for(n_out, [&](int64_t p) { po[p] = put_accumulate_point(pb, ps, st, en, p); });
      }
    });
  } else {
    dispatch_storage(base.dtype(), op, [&]<typename T>() {
      const T *pb = b.data<T>(), *ps = s.data<T>();
      T* po = out.data<T>();
      parallel_for(n_out, [&](int64_t p) { po[p] = put_overwrite_point(pb, ps, src_step, st, en, p); });
    });
  }
  return out;
}

void check_put_operands(const Tensor& base, const IndexMap& m, const Tensor* src, const char* op) {
  kernels::check_defined(base, op, "the tensor to write into");
  GS_CHECK(base.sizes() == m.target_shape, "{}: internal: the tensor to write into is {}, the map's target is {}", op,
           base.meta_str(), shape_str(m.target_shape));
  if (!src) return;
  kernels::check_defined(*src, op, "the source");
  kernels::check_same_dtype(base, *src, op);
  GS_CHECK(src->sizes() == m.positions.sizes(), "{}: internal: the source is {}, the map writes {}", op,
           src->meta_str(), shape_str(m.positions.sizes()));
}

// g with the written positions zeroed: the gradient of a value that was overwritten there.
Tensor zero_written(const Tensor& g, const IndexMapPtr& m) { return fill_at(g, m, 0.0, "zero_written"); }

BackwardRule put_rule(const IndexMapPtr& m, PutMode mode, Names names) {
  return [m, mode, names](BackwardContext& ctx, const V& g) {
    Tensor g_base, g_src;
    if (ctx.needs_input_grad(0)) g_base = mode == PutMode::accumulate ? g[0] : zero_written(g[0], m);
    if (ctx.needs_input_grad(1)) g_src = take_at(g[0], m, {names.adjoint, names.name});
    return V{g_base, g_src};
  };
}

BackwardRule fill_rule(const IndexMapPtr& m) {
  return [m](BackwardContext&, const V& g) { return V{zero_written(g[0], m)}; };
}

// A source that shares self's storage is read as its value before the write (as in ops/inplace.cpp).
Tensor source_before_write(const Tensor& self, const Tensor& src) {
  if (self.storage().get() != src.storage().get()) return src;
  return should_record({src}) ? clone(src) : contiguous_copy(src, true);
}

}  // namespace

Tensor take_at(const Tensor& x, const IndexMapPtr& m, Names names) {
  kernels::check_defined(x, names.name);
  GS_CHECK(x.sizes() == m->target_shape, "{}: internal: the indexed tensor is {}, the map's target is {}", names.name,
           x.meta_str(), shape_str(m->target_shape));
  Tensor out = take_values(x, *m, names.name);
  if (should_record({x}))
    record_op(names.name, {x}, {&out}, {}, {}, [m, names](BackwardContext&, const V& g) {
      const Tensor z = zeros(m->target_shape, g[0].dtype(), g[0].device());
      return V{put_at(z, m, g[0], PutMode::accumulate, {names.adjoint, names.name})};
    });
  return out;
}

Tensor put_at(const Tensor& base, const IndexMapPtr& m, const Tensor& src, PutMode mode, Names names) {
  check_put_operands(base, *m, &src, names.name);
  Tensor out = put_values(base, *m, src, 1, mode, names.name);
  if (should_record({base, src})) record_op(names.name, {base, src}, {&out}, {}, {}, put_rule(m, mode, names));
  return out;
}

Tensor fill_at(const Tensor& base, const IndexMapPtr& m, double value, const char* name) {
  check_put_operands(base, *m, nullptr, name);
  Tensor out = put_values(base, *m, full({}, value, base.dtype(), base.device()), 0, PutMode::overwrite, name);
  if (should_record({base})) record_op(name, {base}, {&out}, {}, {}, fill_rule(m));
  return out;
}

Tensor& put_at_(Tensor& self, const IndexMapPtr& m, const Tensor& src, PutMode mode, Names names) {
  check_put_operands(self, *m, &src, names.name);
  kernels::check_no_self_overlap(self, names.name);
  check_inplace(self, names.name, {src});
  const Tensor s = source_before_write(self, src);
  copy_values(self, put_values(self, *m, s, 1, mode, names.name));
  finish_inplace(self, names.name, {s}, put_rule(m, mode, names));
  return self;
}

Tensor& fill_at_(Tensor& self, const IndexMapPtr& m, double value, const char* name) {
  check_put_operands(self, *m, nullptr, name);
  kernels::check_no_self_overlap(self, name);
  check_inplace(self, name, {});
  copy_values(self, put_values(self, *m, full({}, value, self.dtype(), self.device()), 0, PutMode::overwrite, name));
  finish_inplace(self, name, {}, fill_rule(m));
  return self;
}

std::vector<int64_t> read_indices(const Tensor& index, const char* op, const char* what) {
  kernels::check_defined(index, op, what);
  GS_CHECK(index.dtype() == DType::i64,
           "{}: expected {} to be an i64 tensor, got {} (indices are i64; convert with to(index, DType::i64))", op,
           what, index.meta_str());
  return (kernels::on_cuda(index) ? to_device_copy(index, Device::cpu()) : index).to_vector<int64_t>();
}

int64_t checked_index(int64_t v, int64_t q, const Shape& index_shape, int64_t dim, int64_t size, bool allow_negative,
                      const char* op) {
  const int64_t lo = allow_negative ? -size : 0;
  if (v >= lo && v < size) return v < 0 ? v + size : v;
  Shape at(index_shape.size());
  for (int64_t d = static_cast<int64_t>(index_shape.size()) - 1, r = q; d >= 0; --d) {
    at[d] = index_shape[d] == 0 ? 0 : r % index_shape[d];
    r = index_shape[d] == 0 ? 0 : r / index_shape[d];
  }
  if (size == 0)
    fail("{}: index {} at position {} of the index is out of range for dim {} of size 0 (no index is valid)", op, v,
         shape_str(at), dim);
  fail("{}: index {} at position {} of the index is out of range for dim {} of size {} (valid indices: {} to {})", op,
       v, shape_str(at), dim, size, lo, size - 1);
}

IndexMapPtr make_map(Shape target_shape, const Shape& positions_shape, std::vector<int64_t> positions) {
  return std::make_shared<const IndexMap>(IndexMap{std::move(target_shape), sample_index(positions, positions_shape)});
}

Tensor sample_index(const std::vector<int64_t>& values, const Shape& shape) {
  Tensor t = empty(shape, DType::i64);
  GS_CHECK(t.numel() == static_cast<int64_t>(values.size()), "sample_index: {} values for shape {}", values.size(),
           shape_str(shape));
  if (!values.empty()) std::memcpy(t.data<int64_t>(), values.data(), values.size() * sizeof(int64_t));
  return t;
}

IndexMapPtr slices_map(const Shape& target, int64_t dim, const Tensor& index, const char* op) {
  kernels::check_defined(index, op, "the index");
  GS_CHECK(index.dim() <= 1, "{}: expected a 1-D (or 0-dim) index, got {}", op, index.meta_str());
  const std::vector<int64_t> idx = read_indices(index, op);
  const int64_t k = static_cast<int64_t>(idx.size()), n = target[dim];
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= target[d];
  for (int64_t d = dim + 1; d < static_cast<int64_t>(target.size()); ++d) inner *= target[d];
  for (int64_t j = 0; j < k; ++j) checked_index(idx[j], j, index.sizes(), dim, n, false, op);
  Shape shape = target;
  shape[dim] = k;
  std::vector<int64_t> pos(static_cast<size_t>(outer * k * inner));
  for (int64_t o = 0, q = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t i = 0; i < inner; ++i) pos[q++] = (o * n + idx[j]) * inner + i;
  return make_map(target, shape, std::move(pos));
}

IndexMapPtr elementwise_map(const Shape& target, int64_t dim, const Tensor& index, const char* op) {
  kernels::check_defined(index, op, "the index");
  const int64_t nd = static_cast<int64_t>(target.size());
  GS_CHECK(index.dim() == nd, "{}: expected an index with {} dims (as the indexed tensor {}), got {}", op, nd,
           shape_str(target), index.meta_str());
  const Shape& is = index.sizes();
  for (int64_t d = 0; d < nd; ++d)
    GS_CHECK(d == dim || is[d] <= target[d],
             "{}: the index {} is larger than the indexed tensor {} in dim {} (it may only be larger along dim {})",
             op, shape_str(is), shape_str(target), d, dim);
  const std::vector<int64_t> idx = read_indices(index, op);
  const Shape strides = contiguous_strides(target);
  std::vector<int64_t> pos(idx.size());
  Shape at(nd, 0);  // the coordinates of element q of the index, an odometer
  for (size_t q = 0; q < idx.size(); ++q) {
    int64_t p = checked_index(idx[q], static_cast<int64_t>(q), is, dim, nd ? target[dim] : 1, false, op) *
                (nd ? strides[dim] : 0);
    for (int64_t d = 0; d < nd; ++d)
      if (d != dim) p += at[d] * strides[d];
    pos[q] = p;
    for (int64_t d = nd - 1; d >= 0 && ++at[d] == is[d]; --d) at[d] = 0;
  }
  return make_map(target, is, std::move(pos));
}

}  // namespace gs::indexing
