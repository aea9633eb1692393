#include "distributed/collectives.h"

#include <atomic>

#include "distributed/block_transpose.h"
#include "distributed/replica_check.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/shape_ops.h"
#include "ops/view.h"

namespace gs::dist {
namespace {

int64_t wrap_dim(int64_t dim, const Tensor& x, const char* op) {
  const int64_t n = x.dim();
  GS_CHECK(dim >= -n && dim < n, "{}: dim {} is out of range for a tensor of {} dims ({})", op, dim, n, x.meta_str());
  return dim < 0 ? dim + n : dim;
}

void check_input(const Tensor& x, const CommPtr& comm, const char* op) {
  GS_CHECK(x.defined(), "{}: the input tensor is undefined", op);
  GS_CHECK(comm != nullptr, "{}: no communicator", op);
}

// The dims of x with `dim` moved to the front, and back.
std::vector<int64_t> front_perm(int64_t dim, int64_t n) {
  std::vector<int64_t> p{dim};
  for (int64_t d = 0; d < n; ++d)
    if (d != dim) p.push_back(d);
  return p;
}
std::vector<int64_t> inverse_perm(const std::vector<int64_t>& p) {
  std::vector<int64_t> q(p.size());
  for (size_t k = 0; k < p.size(); ++k) q[p[k]] = static_cast<int64_t>(k);
  return q;
}

// A fresh contiguous tensor (never a view of x: a collective's result is not a view).
Tensor fresh(const Tensor& x) { return contiguous_copy(x.detach(), true); }

// ---- kernels (no autograd)

Tensor gather_kernel(const Tensor& x, int64_t dim, int64_t global, Communicator& comm) {
  forward_ad::PrimalOnlyGuard ng;
  const int n = comm.size();
  const Block mine = split_block(global, n, comm.rank());
  GS_CHECK(x.size(dim) == mine.count,
           "gather_along on {}: this rank holds {} indices along dim {} of {}, but its block of {} over {} ranks has "
           "{} (blocks follow split_block: the first n % k ranks hold one more)",
           comm.describe(), x.size(dim), dim, x.meta_str(), global, n, mine.count);
  // Blocks are contiguous runs only along the outermost dim: gather with `dim` in front, then put
  // it back (dim 0 needs neither move).
  auto perm = front_perm(dim, x.dim());
  Tensor send = dim == 0 ? contiguous(x.detach()) : contiguous(permute(x.detach(), perm));
  Shape front = send.sizes();
  int64_t rest_elems = 1;
  for (size_t d = 1; d < front.size(); ++d) rest_elems *= front[d];
  std::vector<int64_t> counts(n);
  for (int r = 0; r < n; ++r) counts[r] = split_block(global, n, r).count * rest_elems;
  front[0] = global;
  Tensor recv = empty(front, x.dtype(), x.device());
  comm.all_gather(reshape(send, {send.numel()}), reshape(recv, {recv.numel()}), counts);
  return dim == 0 ? recv : fresh(permute(recv, inverse_perm(perm)));
}

Tensor scatter_kernel(const Tensor& x, int64_t dim, Communicator& comm) {
  forward_ad::PrimalOnlyGuard ng;
  const Block b = split_block(x.size(dim), comm.size(), comm.rank());
  return fresh(narrow(x.detach(), dim, b.start, b.count));
}


// The all-to-all with every rank's blocks by split_block (block_transpose.h packs, moves and counts).
Tensor transpose_kernel(const Tensor& x, int64_t from, int64_t to, int64_t from_global, Communicator& comm) {
  const int n = comm.size();
  const Block mine = split_block(from_global, n, comm.rank());
  GS_CHECK(x.size(from) == mine.count,
           "transpose on {}: this rank holds {} indices along dim {} of {}, but its block of {} over {} ranks has {}",
           comm.describe(), x.size(from), from, x.meta_str(), from_global, n, mine.count);
  return BlockTranspose(x, from, to, split_counts(from_global, n), split_counts(x.size(to), n), comm).finish();
}

}  // namespace

namespace {
std::atomic<int64_t> g_transpose{0}, g_halo{0}, g_all_reduce{0};
}  // namespace

void count_traffic(int64_t CollectiveTraffic::*kind, int64_t bytes) {
  if (kind == &CollectiveTraffic::transpose) g_transpose += bytes;
  else if (kind == &CollectiveTraffic::halo) g_halo += bytes;
  else g_all_reduce += bytes;
}

CollectiveTraffic collective_traffic() { return {g_transpose.load(), g_halo.load(), g_all_reduce.load()}; }

// ---- reduce_replicated / copy_to_group

Tensor reduce_replicated(const Tensor& x, const CommPtr& comm) {
  check_input(x, comm, "reduce_replicated");
  Tensor out = fresh(x);
  comm->all_reduce(out, ReduceOp::sum);
  if (comm->size() > 1) count_traffic(&CollectiveTraffic::all_reduce, out.numel() * static_cast<int64_t>(dtype_size(out.dtype())));
  maybe_check_replicated(out, *comm, "the output of reduce_replicated");
  if (should_record({x}))
    record_op("reduce_replicated", {x}, {&out}, {}, {}, [comm](BackwardContext&, const std::vector<Tensor>& g) {
      // The result is replicated: its gradient is too, and passes through once (not summed).
      maybe_check_replicated(g[0], *comm, "the gradient reaching reduce_replicated's output");
      return std::vector<Tensor>{copy_to_group(g[0], comm)};
    });
  return out;
}

Tensor copy_to_group(const Tensor& x, const CommPtr& comm) {
  check_input(x, comm, "copy_to_group");
  maybe_check_replicated(x, *comm, "the input of copy_to_group");
  Tensor out = fresh(x);
  if (should_record({x}))
    record_op("copy_to_group", {x}, {&out}, {}, {}, [comm](BackwardContext&, const std::vector<Tensor>& g) {
      // Each rank used the replicated value in its own way: the gradient is the sum of all uses.
      return std::vector<Tensor>{reduce_replicated(g[0], comm)};
    });
  return out;
}

// ---- gather_along / scatter_along

Tensor gather_along(const Tensor& x, int64_t dim, int64_t global_size, const CommPtr& comm) {
  check_input(x, comm, "gather_along");
  dim = wrap_dim(dim, x, "gather_along");
  GS_CHECK(global_size >= 0, "gather_along: expected a global size >= 0, got {}", global_size);
  Tensor out = gather_kernel(x, dim, global_size, *comm);
  maybe_check_replicated(out, *comm, "the output of gather_along");
  if (should_record({x}))
    record_op("gather_along", {x}, {&out}, {}, {}, [comm, dim](BackwardContext&, const std::vector<Tensor>& g) {
      maybe_check_replicated(g[0], *comm, "the gradient reaching gather_along's output");
      return std::vector<Tensor>{scatter_along(g[0], dim, comm)};
    });
  return out;
}

Tensor scatter_along(const Tensor& x, int64_t dim, const CommPtr& comm) {
  check_input(x, comm, "scatter_along");
  dim = wrap_dim(dim, x, "scatter_along");
  maybe_check_replicated(x, *comm, "the input of scatter_along");
  Tensor out = scatter_kernel(x, dim, *comm);
  const int64_t global = x.size(dim);
  if (should_record({x}))
    record_op("scatter_along", {x}, {&out}, {}, {}, [comm, dim, global](BackwardContext&, const std::vector<Tensor>& g) {
      return std::vector<Tensor>{gather_along(g[0], dim, global, comm)};
    });
  return out;
}

// ---- transpose

Tensor transpose(const Tensor& x, int64_t from_dim, int64_t to_dim, int64_t from_global, const CommPtr& comm) {
  check_input(x, comm, "transpose");
  from_dim = wrap_dim(from_dim, x, "transpose");
  to_dim = wrap_dim(to_dim, x, "transpose");
  GS_CHECK(from_dim != to_dim, "transpose: the split moves from dim {} to dim {}; they must differ", from_dim, to_dim);
  Tensor out = transpose_kernel(x, from_dim, to_dim, from_global, *comm);
  const int64_t to_global = x.size(to_dim);
  if (should_record({x}))
    record_op("transpose", {x}, {&out}, {}, {},
              [comm, from_dim, to_dim, to_global](BackwardContext&, const std::vector<Tensor>& g) {
                return std::vector<Tensor>{transpose(g[0], to_dim, from_dim, to_global, comm)};
              });
  return out;
}

}  // namespace gs::dist
