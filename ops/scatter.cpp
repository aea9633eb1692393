// scatter, scatter_add and index_add (out of place and in place): writes at host-computed
// positions (ops/index_map.h). scatter keeps the last write of duplicates in index order;
// scatter_add and index_add sum duplicates in index order (deterministic on every device).
#include <algorithm>

#include "ops/elementwise.h"
#include "ops/index_map.h"
#include "ops/indexing.h"
#include "ops/kernels.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {

using indexing::Names;
using indexing::PutMode;

namespace {

struct ScatterPlan {
  indexing::IndexMapPtr map;
  Tensor src;  // the part of src that index covers
};

ScatterPlan plan_scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor* src, const char* op) {
  kernels::check_defined(x, op, "the tensor to write into");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), op);
  ScatterPlan p{indexing::elementwise_map(x.sizes(), d, index, op), Tensor()};
  if (!src) return p;
  kernels::check_defined(*src, op, "src");
  kernels::check_same_dtype(x, *src, op);
  kernels::check_same_device(x, *src, op);
  const Shape& is = index.sizes();
  GS_CHECK(src->dim() == x.dim(), "{}: expected src with {} dims (as the tensor written into), got {}", op, x.dim(),
           src->meta_str());
  p.src = *src;
  for (int64_t k = 0; k < src->dim(); ++k) {
    GS_CHECK(is[k] <= src->sizes()[k], "{}: the index {} is larger than src {} in dim {}", op, shape_str(is),
             shape_str(src->sizes()), k);
    if (is[k] < src->sizes()[k]) p.src = narrow(p.src, k, 0, is[k]);  // the rest of src is never read
  }
  return p;
}

struct IndexAddPlan {
  indexing::IndexMapPtr map;
  Tensor source;  // alpha * source
};

IndexAddPlan plan_index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, double alpha,
                            const char* op) {
  kernels::check_defined(x, op, "the tensor to add into");
  kernels::check_defined(source, op, "the source");
  GS_CHECK(x.dim() >= 1, "{}: expected a tensor with at least 1 dim, got {} (unsqueeze it first)", op, x.meta_str());
  kernels::check_same_dtype(x, source, op);
  kernels::check_same_device(x, source, op);
  const int64_t d = wrap_dim(dim, x.dim(), op);
  indexing::IndexMapPtr m = indexing::slices_map(x.sizes(), d, index, op);
  GS_CHECK(source.sizes() == m->positions.sizes(),
           "{}: expected the source to have shape {} (the tensor's shape {} with the index's {} entries along dim "
           "{}), got {}",
           op, shape_str(m->positions.sizes()), shape_str(x.sizes()), index.numel(), d, source.meta_str());
  return {m, alpha == 1.0 ? source : mul(source, alpha)};
}

}  // namespace

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  const ScatterPlan p = plan_scatter(x, dim, index, &src, "scatter");
  return indexing::put_at(x, p.map, p.src, PutMode::overwrite, Names{"scatter", "gather"});
}

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, double value) {
  return indexing::fill_at(x, plan_scatter(x, dim, index, nullptr, "scatter").map, value, "scatter_value");
}

Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  const ScatterPlan p = plan_scatter(x, dim, index, &src, "scatter_");
  return indexing::put_at_(x, p.map, p.src, PutMode::overwrite, Names{"scatter_", "gather"});
}

Tensor& scatter_(Tensor& x, int64_t dim, const Tensor& index, double value) {
  return indexing::fill_at_(x, plan_scatter(x, dim, index, nullptr, "scatter_").map, value, "scatter_value_");
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  const ScatterPlan p = plan_scatter(x, dim, index, &src, "scatter_add");
  return indexing::put_at(x, p.map, p.src, PutMode::accumulate, Names{"scatter_add", "gather"});
}

Tensor& scatter_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  const ScatterPlan p = plan_scatter(x, dim, index, &src, "scatter_add_");
  return indexing::put_at_(x, p.map, p.src, PutMode::accumulate, Names{"scatter_add_", "gather"});
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
  const IndexAddPlan p = plan_index_add(x, dim, index, source, alpha, "index_add");
  return indexing::put_at(x, p.map, p.source, PutMode::accumulate, Names{"index_add", "index_select"});
}

Tensor& index_add_(Tensor& x, int64_t dim, const Tensor& index, const Tensor& source, double alpha) {
  const IndexAddPlan p = plan_index_add(x, dim, index, source, alpha, "index_add_");
  return indexing::put_at_(x, p.map, p.source, PutMode::accumulate, Names{"index_add_", "index_select"});
}

namespace {
using V = std::vector<Tensor>;
using indexing::dim_of;
using indexing::sample_dim;
using indexing::sample_index;

// scatter's samples have no duplicate targets (its source gradient is torch's rule, which is not
// the derivative of a last-write forward where writes collide); the summing ops have duplicates.
std::vector<OpSample> scatter_samples(RandomKey k) {
  return {{"dim 0, src larger than index, non-contiguous",
           {sample_leaf_transposed({3, 4}, sub_key(k, 1)), sample_index({2, 0, 1, 1, 0, 1, 2, 0}, {2, 4}),
            sample_leaf({3, 5}, sub_key(k, 2)), sample_dim(0)}},
          {"complex, last dim",
           {sample_leaf({2, 3}, sub_key(k, 3), DType::c128), sample_index({2, 0, 1, 2}, {2, 2}),
            sample_leaf({2, 2}, sub_key(k, 4), DType::c128), sample_dim(-1)}}};
}

std::vector<OpSample> scatter_add_samples(RandomKey k) {
  return {{"dim 1, duplicates, index longer along dim",
           {sample_leaf({3, 4}, sub_key(k, 5)), sample_index({3, 0, 3, 3, 1, 2, 2, 2, 0, 0, 1, 1, 1, 3, 0}, {3, 5}),
            sample_leaf_transposed({3, 5}, sub_key(k, 6)), sample_dim(1)}},
          {"complex, dim 0, duplicates",
           {sample_leaf({2, 3}, sub_key(k, 7), DType::c128), sample_index({1, 1, 0, 1, 1, 1}, {2, 3}),
            sample_leaf({2, 3}, sub_key(k, 8), DType::c128), sample_dim(0)}}};
}

std::vector<OpSample> index_add_samples(RandomKey k) {
  return {{"dim 0, duplicates, non-contiguous",
           {sample_leaf_transposed({4, 3}, sub_key(k, 9)), sample_index({1, 3, 1, 1, 0}, {5}),
            sample_leaf({5, 3}, sub_key(k, 10)), sample_dim(0)}},
          {"complex, last dim",
           {sample_leaf({2, 3}, sub_key(k, 11), DType::c128), sample_index({2, 2}, {2}),
            sample_leaf({2, 2}, sub_key(k, 12), DType::c128), sample_dim(-1)}}};
}

const OpRegistrar registrar{
    {"scatter", scatter_samples,
     [](const V& x) {
       const int64_t d = dim_of(x[3]);
       return V{scatter(x[0], d, x[1], x[2]), scatter(x[0], d, x[1], -0.5)};
     }},
    {"scatter_", scatter_samples,
     [](const V& x) {
       const int64_t d = dim_of(x[3]);
       Tensor y = mul(x[0], 2.0), z = clone(x[0]);
       scatter_(y, d, x[1], x[2]);
       scatter_(z, d, x[1], 1.5);
       return V{y, mul(z, x[0])};
     }},
    {"scatter_add", scatter_add_samples, [](const V& x) { return V{scatter_add(x[0], dim_of(x[3]), x[1], x[2])}; }},
    {"scatter_add_", scatter_add_samples,
     [](const V& x) {
       Tensor y = clone(x[0]);
       scatter_add_(y, dim_of(x[3]), x[1], x[2]);
       return V{y};
     }},
    {"index_add", index_add_samples,
     [](const V& x) {
       const int64_t d = dim_of(x[3]);
       return V{index_add(x[0], d, x[1], x[2]), index_add(x[0], d, x[1], x[2], -0.5)};
     }},
    {"index_add_", index_add_samples,
     [](const V& x) {
       Tensor y = clone(x[0]);
       index_add_(y, dim_of(x[3]), x[1], x[2], 2.0);
       return V{y};
     }},
};

}  // namespace
}  // namespace gs
