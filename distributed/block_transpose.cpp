// The packed all-to-all of a transpose (block_transpose.h): each destination's block of `to` is
// copied straight into one send buffer, and each source's block of `from` straight from the
// receive buffer into the result: two copies around one all-to-all.
#include "distributed/block_transpose.h"

#include <numeric>

#include "distributed/collectives.h"
#include "distributed/process_grid.h"
#include "engine/autograd/forward_ad.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "ops/view.h"

namespace gs::dist {
namespace {

int64_t sum(const std::vector<int64_t>& v) { return std::accumulate(v.begin(), v.end(), int64_t{0}); }

}  // namespace

std::vector<int64_t> split_counts(int64_t n, int parts) {
  std::vector<int64_t> c(parts);
  for (int p = 0; p < parts; ++p) c[p] = split_block(n, parts, p).count;
  return c;
}

BlockTranspose::BlockTranspose(const Tensor& x, int64_t from, int64_t to, std::vector<int64_t> from_counts,
                               std::vector<int64_t> to_counts, Communicator& comm)
    : from_(from), from_counts_(std::move(from_counts)) {
  forward_ad::PrimalOnlyGuard ng;
  const int n = comm.size(), me = comm.rank();
  GS_CHECK(static_cast<int>(from_counts_.size()) == n && static_cast<int>(to_counts.size()) == n,
           "transpose on {}: expected {} block counts per dim, got {} and {}", comm.describe(), n,
           from_counts_.size(), to_counts.size());
  GS_CHECK(x.size(from) == from_counts_[me] && x.size(to) == sum(to_counts),
           "transpose on {}: this rank should hold {} indices along dim {} and all {} along dim {}, got {}",
           comm.describe(), from_counts_[me], from, sum(to_counts), to, x.meta_str());
  const Tensor src = x.detach();
  std::vector<int64_t> send_counts(n), recv_counts(n);
  std::vector<Shape> send_shapes(n);
  recv_shapes_.resize(n);
  for (int p = 0; p < n; ++p) {
    send_shapes[p] = x.sizes();
    send_shapes[p][to] = to_counts[p];
    send_counts[p] = numel_of(send_shapes[p]);
    recv_shapes_[p] = x.sizes();
    recv_shapes_[p][from] = from_counts_[p];
    recv_shapes_[p][to] = to_counts[me];
    recv_counts[p] = numel_of(recv_shapes_[p]);
  }
  Tensor send = empty({sum(send_counts)}, x.dtype(), x.device());
  recv_ = empty({sum(recv_counts)}, x.dtype(), x.device());
  int64_t off = 0, start = 0;
  for (int p = 0; p < n; ++p) {
    if (send_counts[p] > 0)
      copy_values(reshape(narrow(send, 0, off, send_counts[p]), send_shapes[p]), narrow(src, to, start, to_counts[p]));
    off += send_counts[p];
    start += to_counts[p];
  }
  work_ = comm.all_to_all_async(send, send_counts, recv_, recv_counts);
  count_traffic(&CollectiveTraffic::transpose,
                (sum(send_counts) - send_counts[me]) * static_cast<int64_t>(dtype_size(x.dtype())));
  out_shape_ = x.sizes();
  out_shape_[from] = sum(from_counts_);
  out_shape_[to] = to_counts[me];
}

Tensor BlockTranspose::finish() {
  forward_ad::PrimalOnlyGuard ng;
  work_->wait();
  Tensor out = empty(out_shape_, recv_.dtype(), recv_.device());
  int64_t off = 0, start = 0;
  for (size_t p = 0; p < from_counts_.size(); ++p) {
    const int64_t count = numel_of(recv_shapes_[p]);
    if (count > 0)
      copy_values(narrow(out, from_, start, from_counts_[p]), reshape(narrow(recv_, 0, off, count), recv_shapes_[p]));
    off += count;
    start += from_counts_[p];
  }
  return out;
}

}  // namespace gs::dist
