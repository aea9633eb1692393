// index_put / index_put_: x[indices] = values (or += with accumulate), advanced indexing over the
// leading dims, as torch's Tensor.index_put_. Writes at host-computed positions (ops/index_map.h):
// duplicates are summed in index order with accumulate, else the last write in index order wins.
#include "ops/index_map.h"
#include "ops/indexing.h"
#include "ops/kernels.h"
#include "ops/registry.h"
#include "ops/view.h"

namespace gs {
namespace {

using indexing::Names;
using indexing::PutMode;

struct IndexPutPlan {
  indexing::IndexMapPtr map;
  Tensor values;  // broadcast to the indexed result's shape
};

IndexPutPlan plan_index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, const char* op) {
  kernels::check_defined(x, op, "the tensor to write into");
  kernels::check_defined(values, op, "the values");
  kernels::check_same_dtype(x, values, op);
  kernels::check_same_device(x, values, op);
  const int64_t k = static_cast<int64_t>(indices.size());
  GS_CHECK(k >= 1 && k <= x.dim(), "{}: expected 1 to {} index tensors (one per leading dim of {}), got {}", op,
           x.dim(), x.meta_str(), k);
  // The index tensors broadcast together; each is read at its broadcast strides.
  Shape b;
  std::vector<std::vector<int64_t>> idx(k);
  for (int64_t d = 0; d < k; ++d) {
    const std::string what = fmt::format("index tensor {}", d);
    idx[d] = indexing::read_indices(indices[d], op, what.c_str());
    b = d == 0 ? indices[0].sizes() : broadcast_shapes(b, indices[d].sizes(), op);
  }
  Shape result = b;
  int64_t rest = 1;
  for (int64_t d = k; d < x.dim(); ++d) result.push_back(x.sizes()[d]), rest *= x.sizes()[d];
  GS_CHECK(is_expandable_to(values.sizes(), result),
           "{}: values of shape {} cannot be broadcast to the indexed result's shape {} (the indices' broadcast shape "
           "{} followed by the unindexed dims of {})",
           op, shape_str(values.sizes()), shape_str(result), shape_str(b), shape_str(x.sizes()));
  std::vector<Shape> strides(k);
  for (int64_t d = 0; d < k; ++d) {
    const Shape own = contiguous_strides(indices[d].sizes());
    Shape s(b.size(), 0);  // strides of index d broadcast to b (trailing dims aligned)
    const size_t lead = b.size() - own.size();
    for (size_t j = 0; j < own.size(); ++j) s[lead + j] = indices[d].sizes()[j] == 1 ? 0 : own[j];
    strides[d] = s;
  }
  const Shape xs = contiguous_strides(x.sizes());
  std::vector<std::string> whats(k);  // the names errors give, made once
  for (int64_t d = 0; d < k; ++d) whats[d] = fmt::format("{} (index tensor {})", op, d);
  const int64_t nb = numel_of(b), nd = static_cast<int64_t>(b.size());
  std::vector<int64_t> pos(static_cast<size_t>(nb * rest));
  Shape at(nd, 0);
  for (int64_t q = 0; q < nb; ++q) {
    int64_t base = 0;
    for (int64_t d = 0; d < k; ++d) {
      int64_t off = 0;
      for (int64_t j = 0; j < nd; ++j) off += at[j] * strides[d][j];
      const int64_t i =
          indexing::checked_index(idx[d][off], off, indices[d].sizes(), d, x.sizes()[d], true, whats[d].c_str());
      base += i * xs[d];
    }
    for (int64_t r = 0; r < rest; ++r) pos[q * rest + r] = base + r;
    for (int64_t j = nd - 1; j >= 0 && ++at[j] == b[j]; --j) at[j] = 0;
  }
  return {indexing::make_map(x.sizes(), result, std::move(pos)),
          values.sizes() == result ? values : expand(values, result)};
}

}  // namespace

Tensor index_put(const Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  const IndexPutPlan p = plan_index_put(x, indices, values, "index_put");
  return accumulate ? indexing::put_at(x, p.map, p.values, PutMode::accumulate, Names{"index_put_accumulate", "index"})
                    : indexing::put_at(x, p.map, p.values, PutMode::overwrite, Names{"index_put", "index"});
}

Tensor& index_put_(Tensor& x, const std::vector<Tensor>& indices, const Tensor& values, bool accumulate) {
  const IndexPutPlan p = plan_index_put(x, indices, values, "index_put_");
  if (accumulate)
    return indexing::put_at_(x, p.map, p.values, PutMode::accumulate, Names{"index_put_accumulate_", "index"});
  return indexing::put_at_(x, p.map, p.values, PutMode::overwrite, Names{"index_put_", "index"});
}

namespace {
using V = std::vector<Tensor>;
using indexing::sample_index;

// Overwriting samples have distinct targets (see ops/indexing.h on duplicates); accumulating ones
// have duplicates, a negative index and broadcast values.
const OpRegistrar registrar{
    {"index_put",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"two broadcast index tensors, non-contiguous",
            {sample_leaf_transposed({3, 4}, sub_key(k, 1)), sample_index({0, 2}, {2, 1}), sample_index({1, -1}, {2}),
             sample_leaf({2, 2}, sub_key(k, 2))}},
           {"one index over rows, broadcast values, complex",
            {sample_leaf({3, 2}, sub_key(k, 3), DType::c128), sample_index({2, 0}, {2}), sample_index({0}, {1}),
             sample_leaf({2}, sub_key(k, 4), DType::c128)}}};
     },
     [](const V& x) {
       // The second sample's index 2 is a dummy: only the first index tensor is used there.
       const bool two = x[2].numel() > 1;
       return V{two ? index_put(x[0], {x[1], x[2]}, x[3]) : index_put(x[0], {x[1]}, x[3])};
     }},
    {"index_put_accumulate",
     [](RandomKey k) {
       return std::vector<OpSample>{
           {"duplicates, negative index, broadcast values",
            {sample_leaf_transposed({4, 3}, sub_key(k, 5)), sample_index({1, -3, 3, 1, 1}, {5}),
             sample_leaf({1, 3}, sub_key(k, 6))}},
           {"complex, 2-d index with duplicates",
            {sample_leaf({3, 2}, sub_key(k, 7), DType::c128), sample_index({2, 2, 0, 2}, {2, 2}),
             sample_leaf({2, 2, 2}, sub_key(k, 8), DType::c128)}}};
     },
     [](const V& x) {
       Tensor y = clone(x[0]);
       index_put_(y, {x[1]}, x[2], true);
       return V{index_put(x[0], {x[1]}, x[2], true), y};
     }},
    {"index_put_",
     [](RandomKey k) {
       return std::vector<OpSample>{{"distinct targets",
                                     {sample_leaf({4, 3}, sub_key(k, 9)), sample_index({3, 0, -3}, {3}),
                                      sample_leaf({3, 3}, sub_key(k, 10))}}};
     },
     [](const V& x) {
       Tensor y = clone(x[0]);
       index_put_(y, {x[1]}, x[2]);
       return V{y};
     }},
};

}  // namespace
}  // namespace gs
