#include "distributed/process_grid.h"

#include "distributed/distribution.h"

#include <fmt/format.h>

#include <cstdio>

#include "distributed/communicator.h"
#include "engine/error.h"
#include "engine/factory.h"

namespace gs::dist {

Block split_block(int64_t n, int64_t parts, int64_t index) {
  GS_CHECK(n >= 0 && parts >= 1 && index >= 0 && index < parts,
           "split_block: expected n >= 0, parts >= 1 and 0 <= index < parts, got n {}, parts {}, index {}", n, parts,
           index);
  const int64_t base = n / parts, extra = n % parts;
  const int64_t start = index * base + std::min(index, extra);
  return {start, base + (index < extra ? 1 : 0)};
}

ProcessGrid::ProcessGrid(int64_t data, int64_t h, int64_t w, int64_t world_rank, int64_t ensemble)
    : data_(data), h_(h), w_(w), rank_(world_rank), ensemble_(ensemble) {
  GS_CHECK(data >= 1 && h >= 1 && w >= 1 && ensemble >= 1,
           "ProcessGrid: expected ensemble, data, h and w >= 1, got {} x {} x {} x {}", ensemble, data, h, w);
  GS_CHECK(world_rank >= 0 && world_rank < world_size(), "ProcessGrid: rank {} is outside a grid of {} ranks ({})",
           world_rank, world_size(), spec().str());
}

std::string Distribution::str() const {
  if (!sharded()) return "replicated";
  if (h_dim >= 0 && w_dim >= 0) return fmt::format("sharded dim {} over h and dim {} over w", h_dim, w_dim);
  return h_dim >= 0 ? fmt::format("sharded dim {} over h", h_dim) : fmt::format("sharded dim {} over w", w_dim);
}

std::string ProcessGrid::str() const {
  return fmt::format("{}data {} x h {} x w {}, rank {}", ensemble_ > 1 ? fmt::format("ensemble {} x ", ensemble_) : "",
                     data_, h_, w_, rank_);
}

const char* group_name(Group g) {
  switch (g) {
    case Group::world: return "world";
    case Group::data: return "data";
    case Group::h: return "h";
    case Group::w: return "w";
    case Group::spatial: return "spatial";
    case Group::data_w: return "data_w";
    case Group::data_h: return "data_h";
    case Group::ensemble: return "ensemble";
    case Group::replicas: return "replicas";
  }
  return "?";
}

std::string GridSpec::str() const {
  return ensemble > 1 ? fmt::format("{}x{}x{}x{}", ensemble, data, h, w) : fmt::format("{}x{}x{}", data, h, w);
}

GridSpec parse_grid(const std::string& text) {
  std::vector<long long> parts;
  size_t at = 0;
  bool ok = !text.empty();
  while (ok && at <= text.size()) {
    const size_t x = text.find('x', at);
    const std::string part = text.substr(at, x == std::string::npos ? std::string::npos : x - at);
    ok = !part.empty() && part.size() <= 9 && part.find_first_not_of("0123456789") == std::string::npos;
    if (ok) parts.push_back(std::stoll(part));
    if (x == std::string::npos) break;
    at = x + 1;
  }
  ok = ok && (parts.size() == 3 || parts.size() == 4);
  for (long long p : parts) ok = ok && p >= 1;
  GS_CHECK(ok,
           "--grid: expected DATAxHxW or ENSEMBLExDATAxHxW with positive integers (e.g. 1x2x2, or 2x1x2x2 for two "
           "ensemble ranks), got '{}'",
           text);
  GridSpec g;
  const size_t o = parts.size() - 3;
  if (o == 1) g.ensemble = parts[0];
  g.data = parts[o], g.h = parts[o + 1], g.w = parts[o + 2];
  return g;
}

std::vector<GridSpec> all_grids(int64_t n, bool with_ensemble) {
  std::vector<GridSpec> out;
  for (int64_t e = 1; e <= (with_ensemble ? n : 1); ++e) {
    if (n % e != 0) continue;
    const int64_t m = n / e;
    for (int64_t d = 1; d <= m; ++d)
      for (int64_t h = 1; d * h <= m; ++h)
        if (m % (d * h) == 0) out.push_back({d, h, m / (d * h), e});
  }
  return out;
}

std::array<int64_t, 4> ProcessGrid::coords(int64_t r) const {
  const int64_t rep = r / (h_ * w_);
  return {rep / data_, rep % data_, (r / w_) % h_, r % w_};
}

ProcessGrid ProcessGrid::create(const CommPtr& world, const GridSpec& spec) {
  GS_CHECK(world != nullptr, "ProcessGrid::create: no world communicator");
  GS_CHECK(spec.ensemble >= 1 && spec.data >= 1 && spec.h >= 1 && spec.w >= 1,
           "ProcessGrid: expected a grid of sizes >= 1, got {}", spec.str());
  GS_CHECK(spec.size() == world->size(),
           "ProcessGrid: grid {} needs {} ranks, but the job has {} (world size); pick a grid whose product is the "
           "number of processes",
           spec.str(), spec.size(), world->size());
  ProcessGrid g(spec.data, spec.h, spec.w, world->rank(), spec.ensemble);
  auto [e, d, i, j] = g.coords(g.rank_);
  const int64_t D = spec.data, H = spec.h, W = spec.w;
  const int64_t rep = e * D + d;  // the replica: one (e, d)
  auto comms = std::make_shared<std::array<CommPtr, kGroupCount>>();
  auto& c = *comms;
  c[int(Group::world)] = world;
  // (color, key) per group: ranks with one color form a group, ordered by key.
  auto split = [&](Group grp, int64_t color, int64_t key) {
    c[int(grp)] = world->split(static_cast<int>(color), static_cast<int>(key), group_name(grp));
  };
  split(Group::data, (e * H + i) * W + j, d);
  split(Group::h, rep * W + j, i);
  split(Group::w, rep * H + i, j);
  split(Group::spatial, rep, i * W + j);
  split(Group::data_w, i, rep * W + j);
  split(Group::data_h, j, rep * H + i);
  split(Group::ensemble, (d * H + i) * W + j, e);
  split(Group::replicas, i * W + j, rep);
  g.comms_ = comms;
  return g;
}

const CommPtr& ProcessGrid::comm(Group grp) const {
  if (!comms_) {
    GS_CHECK(is_single_process(),
             "ProcessGrid {}: this grid describes a layout only and has no communicators (make it with "
             "ProcessGrid::create)",
             str());
    static const std::array<CommPtr, kGroupCount> single = [] {
      std::array<CommPtr, kGroupCount> a;
      for (int k = 0; k < kGroupCount; ++k) a[k] = single_process_communicator(group_name(Group(k)));
      return a;
    }();
    return single[int(grp)];
  }
  return (*comms_)[int(grp)];
}

int ProcessGrid::group_size(Group grp) const {
  switch (grp) {
    case Group::world: return static_cast<int>(world_size());
    case Group::data: return static_cast<int>(data_);
    case Group::h: return static_cast<int>(h_);
    case Group::w: return static_cast<int>(w_);
    case Group::spatial: return static_cast<int>(h_ * w_);
    case Group::data_w: return static_cast<int>(ensemble_ * data_ * w_);
    case Group::data_h: return static_cast<int>(ensemble_ * data_ * h_);
    case Group::ensemble: return static_cast<int>(ensemble_);
    case Group::replicas: return static_cast<int>(ensemble_ * data_);
  }
  return 1;
}

int ProcessGrid::group_rank(Group grp) const {
  auto [e, d, i, j] = coords(rank_);
  const int64_t rep = e * data_ + d;
  switch (grp) {
    case Group::world: return static_cast<int>(rank_);
    case Group::data: return static_cast<int>(d);
    case Group::h: return static_cast<int>(i);
    case Group::w: return static_cast<int>(j);
    case Group::spatial: return static_cast<int>(i * w_ + j);
    case Group::data_w: return static_cast<int>(rep * w_ + j);
    case Group::data_h: return static_cast<int>(rep * h_ + i);
    case Group::ensemble: return static_cast<int>(e);
    case Group::replicas: return static_cast<int>(rep);
  }
  return 0;
}

bool ProcessGrid::in_my_group(int64_t other, Group grp) const {
  auto a = coords(rank_), b = coords(other);
  const bool same_e = a[0] == b[0], same_d = a[1] == b[1], same_i = a[2] == b[2], same_j = a[3] == b[3];
  switch (grp) {
    case Group::world: return true;
    case Group::data: return same_e && same_i && same_j;
    case Group::h: return same_e && same_d && same_j;
    case Group::w: return same_e && same_d && same_i;
    case Group::spatial: return same_e && same_d;
    case Group::data_w: return same_i;
    case Group::data_h: return same_j;
    case Group::ensemble: return same_d && same_i && same_j;
    case Group::replicas: return same_i && same_j;
  }
  return false;
}

bool any_rank(const ProcessGrid& grid, bool mine) {
  if (grid.is_single_process()) return mine;
  Tensor flag = from_vector(std::vector<int64_t>{mine ? 1 : 0});
  grid.comm(Group::world)->all_reduce(flag, ReduceOp::max);
  return flag.item<int64_t>() != 0;
}

}  // namespace gs::dist
