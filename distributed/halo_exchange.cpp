// halo_exchange and its adjoint. Both follow one plan per (grid, tile sizes, halo): for every
// halo point of every tile, the tile that owns its source point. Every rank builds the same plan
// from the split rule alone, so the two sides of each transfer agree on what goes where without
// asking each other, and a halo wider than a neighbour's tile (or a pole turn that reaches across
// the longitude split) needs no special case.
#include <cstring>
#include <tuple>

#include "distributed/collectives.h"
#include "engine/autograd/forward_ad.h"
#include "engine/autograd/grad_mode.h"
#include "engine/autograd/record.h"
#include "engine/error.h"
#include "engine/factory.h"
#include "engine/keyed_cache.h"
#include "ops/view.h"

namespace gs::dist {

HaloSource halo_source(int64_t row, int64_t col, int64_t nlat, int64_t nlon) {
  if (row < 0) row = -1 - row, col += nlon / 2;                 // over the north pole
  else if (row >= nlat) row = 2 * nlat - 1 - row, col += nlon / 2;  // over the south pole
  col = ((col % nlon) + nlon) % nlon;
  return {row, col};
}

namespace {

// The rank whose block of split_block(n, parts, .) holds index i.
int64_t block_owner(int64_t n, int64_t parts, int64_t i) {
  const int64_t base = n / parts, extra = n % parts;
  const int64_t big = extra * (base + 1);
  return i < big ? i / (base + 1) : extra + (i - big) / base;
}

struct HaloPlan {
  // [peer]: flat indices (row * cols + col) into my tile to send to the peer, in the peer's order.
  std::vector<std::vector<int64_t>> send;
  // [peer]: flat indices into my extended tile filled from the peer.
  std::vector<std::vector<int64_t>> recv;
  int64_t rows = 0, cols = 0, ext_rows = 0, ext_cols = 0;
};

using PlanKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>;

// Key: (H, W, my h*W+w, halo rows, halo cols, nlat, nlon, 0).
std::shared_ptr<const HaloPlan> build_plan(const PlanKey& key) {
  const auto [H, W, me, hr, hc, nlat, nlon, unused] = key;
  auto plan = std::make_shared<HaloPlan>();
  const int64_t peers = H * W;
  plan->send.resize(peers);
  plan->recv.resize(peers);
  const Block my_r = split_block(nlat, H, me / W), my_c = split_block(nlon, W, me % W);
  plan->rows = my_r.count, plan->cols = my_c.count;
  plan->ext_rows = my_r.count + 2 * hr, plan->ext_cols = my_c.count + 2 * hc;
  for (int64_t q = 0; q < peers; ++q) {
    const Block qr = split_block(nlat, H, q / W), qc = split_block(nlon, W, q % W);
    const int64_t er_n = qr.count + 2 * hr, ec_n = qc.count + 2 * hc;
    for (int64_t er = 0; er < er_n; ++er) {
      const bool row_inside = er >= hr && er < hr + qr.count;
      for (int64_t ec = 0; ec < ec_n; ++ec) {
        if (row_inside && ec >= hc && ec < hc + qc.count) continue;  // interior: q's own point
        HaloSource s = halo_source(qr.start + er - hr, qc.start + ec - hc, nlat, nlon);
        const int64_t owner = block_owner(nlat, H, s.row) * W + block_owner(nlon, W, s.col);
        if (q == me) plan->recv[owner].push_back(er * ec_n + ec);
        if (owner == me) plan->send[q].push_back((s.row - my_r.start) * my_c.count + (s.col - my_c.start));
      }
    }
  }
  return plan;
}

std::shared_ptr<const HaloPlan> plan_for(const ProcessGrid& grid, int64_t hr, int64_t hc, int64_t nlat, int64_t nlon) {
  // Never destroyed, as the other plan caches (engine/keyed_cache.h).
  static auto* cache = new KeyedCache<PlanKey, HaloPlan>(build_plan);
  const int64_t H = grid.h_size(), W = grid.w_size();
  return cache->get(PlanKey{H, W, grid.h_rank() * W + grid.w_rank(), hr, hc, nlat, nlon, 0});
}

void check_halo_args(const Tensor& x, const ProcessGrid& grid, int64_t hr, int64_t hc, int64_t nlat, int64_t nlon,
                     bool extended, const char* op) {
  GS_CHECK(x.defined() && x.dim() >= 2, "{}: expected a tensor (..., rows, cols), got {}", op,
           x.meta_str());
  GS_CHECK(nlat >= 1 && nlon >= 1, "{}: expected a grid of at least 1x1, got {}x{}", op, nlat, nlon);
  GS_CHECK(hr >= 0 && hc >= 0 && hr <= nlat && hc <= nlon,
           "{}: expected 0 <= halo rows <= nlat ({}) and 0 <= halo cols <= nlon ({}), got {} and {}", op, nlat, nlon,
           hr, hc);
  GS_CHECK(hr == 0 || nlon % 2 == 0,
           "{}: a halo across the poles turns rows by half a revolution, which needs an even nlon; got nlon {}", op,
           nlon);
  GS_CHECK(grid.h_size() <= nlat && grid.w_size() <= nlon,
           "{}: a {}x{} grid cannot be split over {} x {} ranks (h x w): every rank needs at least one row and column",
           op, nlat, nlon, grid.h_size(), grid.w_size());
  const Block r = grid.local_lat(nlat), c = grid.local_lon(nlon);
  const int64_t er = r.count + (extended ? 2 * hr : 0), ec = c.count + (extended ? 2 * hc : 0);
  GS_CHECK(x.size(-2) == er && x.size(-1) == ec,
           "{}: rank {} (h {}, w {}) expected its {}tile of {} x {} points of the {}x{} grid, got {}", op,
           grid.world_rank(), grid.h_rank(), grid.w_rank(), extended ? "extended " : "", er, ec, nlat, nlon,
           x.meta_str());
}

// Moves `count` elements of `es` bytes each, for `lead` leading slices, from src indices to dst indices.
void gather_points(const char* src, int64_t src_plane, const std::vector<int64_t>& idx, char* dst, int64_t lead,
                   size_t es) {
  const int64_t n = static_cast<int64_t>(idx.size());
  for (int64_t l = 0; l < lead; ++l)
    for (int64_t k = 0; k < n; ++k) std::memcpy(dst + (l * n + k) * es, src + (l * src_plane + idx[k]) * es, es);
}

template <typename T>
void add_points(T* dst, int64_t dst_plane, const std::vector<int64_t>& idx, const T* src, int64_t lead) {
  const int64_t n = static_cast<int64_t>(idx.size());
  for (int64_t l = 0; l < lead; ++l)
    for (int64_t k = 0; k < n; ++k) dst[l * dst_plane + idx[k]] += src[l * n + k];
}

void add_points_typed(const Tensor& dst, int64_t plane, const std::vector<int64_t>& idx, const Tensor& src,
                      int64_t lead) {
  switch (dst.dtype()) {
    case DType::f32: return add_points(dst.data<float>(), plane, idx, src.data<float>(), lead);
    case DType::f64: return add_points(dst.data<double>(), plane, idx, src.data<double>(), lead);
    case DType::c64: return add_points(dst.data<c64>(), plane, idx, src.data<c64>(), lead);
    case DType::c128: return add_points(dst.data<c128>(), plane, idx, src.data<c128>(), lead);
    default: fail("halo_exchange_adjoint: expected f32, f64, c64 or c128, got {}", dtype_name(dst.dtype()));
  }
}

// Sends every peer p the points gather[p] of `src` (lead planes of `plane` elements each) and
// receives from it scatter[p].size() points per plane; returns what arrived, by peer. A peer that
// is this rank itself (a periodic wrap or a pole turn within the tile) is a local copy.
std::vector<std::pair<int64_t, Tensor>> swap_points(const ProcessGrid& grid,
                                                    const std::vector<std::vector<int64_t>>& gather,
                                                    const std::vector<std::vector<int64_t>>& scatter, const Tensor& src,
                                                    int64_t plane, int64_t lead, int tag) {
  const size_t es = dtype_size(src.dtype());
  const int me = grid.group_rank(Group::spatial);
  std::vector<PeerTransfer> legs;
  std::vector<std::pair<int64_t, Tensor>> arrivals;
  for (int64_t p = 0; p < static_cast<int64_t>(gather.size()); ++p) {
    if (gather[p].empty() && scatter[p].empty()) continue;
    PeerTransfer leg{static_cast<int>(p), {}, {}};
    if (!gather[p].empty()) {
      leg.send = empty({lead * static_cast<int64_t>(gather[p].size())}, src.dtype());
      gather_points(static_cast<const char*>(src.raw_data()), plane, gather[p], static_cast<char*>(leg.send.raw_data()),
                    lead, es);
    }
    if (!scatter[p].empty()) {
      leg.recv = empty({lead * static_cast<int64_t>(scatter[p].size())}, src.dtype());
      arrivals.emplace_back(p, leg.recv);
    }
    if (p == me) {
      std::memcpy(leg.recv.raw_data(), leg.send.raw_data(), leg.send.numel() * es);
      continue;
    }
    if (leg.send.defined()) count_traffic(&CollectiveTraffic::halo, leg.send.numel() * static_cast<int64_t>(es));
    legs.push_back(std::move(leg));
  }
  grid.comm(Group::spatial)->exchange(legs, tag);
  return arrivals;
}

Tensor halo_forward_kernel(const Tensor& x, const ProcessGrid& grid, const HaloPlan& plan) {
  forward_ad::PrimalOnlyGuard ng;
  // The point lists are applied on the host: a device tensor goes there and back (halo columns are
  // a thin slice of the tile, and the exchange itself would be staged by a host communicator).
  if (!x.device().is_cpu())
    return to_device_copy(halo_forward_kernel(to_device_copy(x.detach(), Device::cpu()), grid, plan), x.device());
  Tensor src = contiguous_copy(x.detach());
  const size_t es = dtype_size(x.dtype());
  const int64_t lead = x.numel() / (plan.rows * plan.cols);
  Shape out_shape = x.sizes();
  out_shape[out_shape.size() - 2] = plan.ext_rows;
  out_shape[out_shape.size() - 1] = plan.ext_cols;
  Tensor out = zeros(out_shape, x.dtype());
  const int64_t in_plane = plan.rows * plan.cols, out_plane = plan.ext_rows * plan.ext_cols;
  const int64_t hr = (plan.ext_rows - plan.rows) / 2, hc = (plan.ext_cols - plan.cols) / 2;
  char* o = static_cast<char*>(out.raw_data());
  const char* s = static_cast<const char*>(src.raw_data());
  for (int64_t l = 0; l < lead; ++l)
    for (int64_t r = 0; r < plan.rows; ++r)
      std::memcpy(o + (l * out_plane + (r + hr) * plan.ext_cols + hc) * es, s + (l * in_plane + r * plan.cols) * es,
                  plan.cols * es);
  auto arrivals = swap_points(grid, plan.send, plan.recv, src, in_plane, lead, /*tag=*/11);
  for (auto& [p, buf] : arrivals) {
    const auto& idx = plan.recv[p];
    const int64_t n = static_cast<int64_t>(idx.size());
    const char* b = static_cast<const char*>(buf.raw_data());
    for (int64_t l = 0; l < lead; ++l)
      for (int64_t k = 0; k < n; ++k) std::memcpy(o + (l * out_plane + idx[k]) * es, b + (l * n + k) * es, es);
  }
  return out;
}

Tensor halo_adjoint_kernel(const Tensor& g, const ProcessGrid& grid, const HaloPlan& plan) {
  forward_ad::PrimalOnlyGuard ng;
  if (!g.device().is_cpu())  // on the host, as the forward
    return to_device_copy(halo_adjoint_kernel(to_device_copy(g.detach(), Device::cpu()), grid, plan), g.device());
  Tensor src = contiguous_copy(g.detach());
  const size_t es = dtype_size(g.dtype());
  const int64_t out_plane = plan.rows * plan.cols, in_plane = plan.ext_rows * plan.ext_cols;
  const int64_t lead = g.numel() / in_plane;
  const int64_t hr = (plan.ext_rows - plan.rows) / 2, hc = (plan.ext_cols - plan.cols) / 2;
  Shape out_shape = g.sizes();
  out_shape[out_shape.size() - 2] = plan.rows;
  out_shape[out_shape.size() - 1] = plan.cols;
  Tensor out = empty(out_shape, g.dtype());
  char* o = static_cast<char*>(out.raw_data());
  const char* s = static_cast<const char*>(src.raw_data());
  for (int64_t l = 0; l < lead; ++l)
    for (int64_t r = 0; r < plan.rows; ++r)
      std::memcpy(o + (l * out_plane + r * plan.cols) * es, s + (l * in_plane + (r + hr) * plan.ext_cols + hc) * es,
                  plan.cols * es);
  // The reverse of the forward's transfers: halo values go back to the owners of their points.
  auto arrivals = swap_points(grid, plan.recv, plan.send, src, in_plane, lead, /*tag=*/12);
  // Added in peer order, so the sum is the same on every run.
  for (auto& [p, buf] : arrivals) add_points_typed(out, out_plane, plan.send[p], buf, lead);
  return out;
}

}  // namespace

Tensor halo_exchange(const Tensor& x, const ProcessGrid& grid, int64_t hr, int64_t hc, int64_t nlat, int64_t nlon) {
  check_halo_args(x, grid, hr, hc, nlat, nlon, false, "halo_exchange");
  auto plan = plan_for(grid, hr, hc, nlat, nlon);
  Tensor out = halo_forward_kernel(x, grid, *plan);
  if (should_record({x}))
    record_op("halo_exchange", {x}, {&out}, {}, {},
              [grid, hr, hc, nlat, nlon](BackwardContext&, const std::vector<Tensor>& g) {
                return std::vector<Tensor>{halo_exchange_adjoint(g[0], grid, hr, hc, nlat, nlon)};
              });
  return out;
}

Tensor halo_exchange_adjoint(const Tensor& g, const ProcessGrid& grid, int64_t hr, int64_t hc, int64_t nlat,
                             int64_t nlon) {
  check_halo_args(g, grid, hr, hc, nlat, nlon, true, "halo_exchange_adjoint");
  GS_CHECK(is_differentiable(g.dtype()), "halo_exchange_adjoint: expected f32, f64, c64 or c128, got {}",
           g.meta_str());
  auto plan = plan_for(grid, hr, hc, nlat, nlon);
  Tensor out = halo_adjoint_kernel(g, grid, *plan);
  if (should_record({g}))
    record_op("halo_exchange_adjoint", {g}, {&out}, {}, {},
              [grid, hr, hc, nlat, nlon](BackwardContext&, const std::vector<Tensor>& gg) {
                return std::vector<Tensor>{halo_exchange(gg[0], grid, hr, hc, nlat, nlon)};
              });
  return out;
}

}  // namespace gs::dist
