#include "distributed/shards.h"

#include <vector>

#include "distributed/collectives.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/view.h"

namespace gs::dist {

Tensor local_shard(const Tensor& whole, const Distribution& d, const ProcessGrid& grid) {
  GS_CHECK(whole.defined() && d.h_dim < whole.dim() && d.w_dim < whole.dim(),
           "local_shard: a tensor declared {} must have those dims, got {}", d.str(),
           whole.defined() ? whole.meta_str() : "an undefined tensor");
  Tensor t = whole;
  if (d.h_dim >= 0) {
    const Block b = split_block(whole.size(d.h_dim), grid.h_size(), grid.h_rank());
    t = narrow(t, d.h_dim, b.start, b.count);
  }
  if (d.w_dim >= 0) {
    const Block b = split_block(whole.size(d.w_dim), grid.w_size(), grid.w_rank());
    t = narrow(t, d.w_dim, b.start, b.count);
  }
  return contiguous_copy(t, true);
}

namespace {
// The whole size of `dim` from every rank's share of it over `g`.
int64_t whole_size(const Tensor& t, int64_t dim, const ProcessGrid& grid, Group g) {
  Tensor n = from_vector(std::vector<int64_t>{t.size(dim)});
  grid.comm(g)->all_reduce(n, ReduceOp::sum);
  return n.item<int64_t>();
}
}  // namespace

Tensor gather_shards(const Tensor& shard, const Distribution& d, const ProcessGrid& grid) {
  forward_ad::PrimalOnlyGuard ng;
  Tensor t = shard.detach();
  if (d.h_dim >= 0 && grid.h_size() > 1) t = gather_along(t, d.h_dim, whole_size(t, d.h_dim, grid, Group::h), grid.comm(Group::h));
  if (d.w_dim >= 0 && grid.w_size() > 1) t = gather_along(t, d.w_dim, whole_size(t, d.w_dim, grid, Group::w), grid.comm(Group::w));
  return contiguous_copy(t, true);
}

}  // namespace gs::dist
