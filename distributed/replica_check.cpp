#include "distributed/replica_check.h"

#include <cmath>
#include <cstring>

#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/error.h"
#include "engine/factory.h"

namespace gs::dist {
namespace {

uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = 1469598103934665603ull) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t k = 0; k < bytes; ++k) h = (h ^ p[k]) * 1099511628211ull;
  return h;
}

}  // namespace

void check_replicated(const Tensor& t, Communicator& comm, const std::string& what) {
  if (comm.size() == 1) return;
  forward_ad::PrimalOnlyGuard no_grad;
  // Compared on the host: the hash and the differences are computed there.
  Tensor c = t.device().is_cpu() ? contiguous_copy(t.detach()) : to_device_copy(t.detach(), Device::cpu());
  uint64_t h = fnv1a(c.raw_data(), c.numel() * dtype_size(c.dtype()));
  h = fnv1a(t.sizes().data(), t.sizes().size() * sizeof(int64_t), h);
  // (hash, numel) of every rank
  Tensor mine = from_vector(std::vector<int64_t>{static_cast<int64_t>(h), t.numel()});
  Tensor all = empty({2 * comm.size()}, DType::i64);
  comm.all_gather(mine, all, std::vector<int64_t>(comm.size(), 2));
  auto v = all.to_vector<int64_t>();
  int differing = -1;
  for (int r = 1; r < comm.size() && differing < 0; ++r)
    if (v[2 * r] != v[0] || v[2 * r + 1] != v[1]) differing = r;
  if (differing < 0) return;
  for (int r = 1; r < comm.size(); ++r)
    GS_CHECK(v[2 * r + 1] == v[1],
             "replica checker: {} is declared replicated over group '{}' but rank 0 holds {} elements and rank {} "
             "holds {}",
             what, comm.name(), v[1], r, v[2 * r + 1]);
  // The values: each rank's largest difference from rank 0's copy, then the largest over the group.
  const bool cplx = is_complex(t.dtype());
  Tensor as_wide = cast_copy(c, cplx ? DType::c128 : DType::f64);
  Tensor root = contiguous_copy(as_wide, true);
  comm.broadcast(root, 0);
  double worst = 0.0;
  if (cplx) {
    const c128 *a = as_wide.data<c128>(), *b = root.data<c128>();
    for (int64_t k = 0; k < c.numel(); ++k) worst = std::max(worst, std::abs(a[k] - b[k]));
  } else {
    const double *a = as_wide.data<double>(), *b = root.data<double>();
    for (int64_t k = 0; k < c.numel(); ++k) {
      double d = std::abs(a[k] - b[k]);
      if (std::isnan(d)) d = INFINITY;
      worst = std::max(worst, d);
    }
  }
  Tensor diffs = empty({comm.size()}, DType::f64);
  comm.all_gather(from_vector(std::vector<double>{worst}), diffs, std::vector<int64_t>(comm.size(), 1));
  auto d = diffs.to_vector<double>();
  int worst_rank = 1;
  for (int r = 1; r < comm.size(); ++r)
    if (d[r] > d[worst_rank]) worst_rank = r;
  fail("replica checker: {} is declared replicated over group '{}' but ranks 0 and {} hold different values "
       "(largest difference {:.6g}, on rank {} of the group; the tensor is {})",
       what, comm.name(), differing, d[worst_rank], worst_rank, t.meta_str());
}

}  // namespace gs::dist
