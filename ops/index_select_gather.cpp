// index_select and gather: reads at host-computed positions (ops/index_map.h), whose backward
// sums g back into the positions read (index_add / scatter_add into zeros).
#include <algorithm>

#include "ops/index_map.h"
#include "ops/indexing.h"
#include "ops/kernels.h"
#include "ops/registry.h"

namespace gs {

using indexing::Names;

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  kernels::check_defined(x, "index_select");
  GS_CHECK(x.dim() >= 1, "index_select: expected a tensor with at least 1 dim, got {} (unsqueeze it first)",
           x.meta_str());
  const int64_t d = wrap_dim(dim, x.dim(), "index_select");
  return indexing::take_at(x, indexing::slices_map(x.sizes(), d, index, "index_select"),
                           Names{"index_select", "index_add"});
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  kernels::check_defined(x, "gather");
  const int64_t d = wrap_dim(dim, std::max<int64_t>(x.dim(), 1), "gather");
  return indexing::take_at(x, indexing::elementwise_map(x.sizes(), d, index, "gather"), Names{"gather", "scatter_add"});
}

namespace {
using V = std::vector<Tensor>;
using indexing::dim_of;
using indexing::sample_dim;
using indexing::sample_index;

// Duplicated indices in every sample: their gradients must add up.
const OpRegistrar registrar{
    {"index_select",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"duplicates, non-contiguous",
            {sample_leaf_transposed({4, 3}, sub_key(k, 1)), sample_index({2, 0, 2, 3}, {4}), sample_dim(0)}},
           {"0-dim index, last dim", {sample_leaf({2, 3, 4}, sub_key(k, 2)), sample_index({3}, {}), sample_dim(-1)}},
           {"complex, middle dim",
            {sample_leaf({2, 3, 2}, sub_key(k, 3), DType::c128), sample_index({1, 1, 0}, {3}), sample_dim(1)}}};
     },
     [](const V& x) { return V{index_select(x[0], dim_of(x[2]), x[1])}; }},
    {"gather",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"dim 1, duplicates, non-contiguous",
            {sample_leaf_transposed({3, 4}, sub_key(k, 4)), sample_index({0, 3, 1, 1, 2, 0}, {3, 2}), sample_dim(1)}},
           {"dim 0, index longer along dim",
            {sample_leaf({3, 4}, sub_key(k, 5)), sample_index({2, 0, 1, 1, 0, 0, 2, 1, 2, 2}, {5, 2}), sample_dim(0)}},
           {"complex 3-d",
            {sample_leaf({2, 2, 3}, sub_key(k, 6), DType::c128), sample_index({2, 2, 0, 1}, {1, 2, 2}),
             sample_dim(-1)}}};
     },
     [](const V& x) { return V{gather(x[0], dim_of(x[2]), x[1])}; }},
};

}  // namespace
}  // namespace gs
