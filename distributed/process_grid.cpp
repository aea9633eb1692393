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

ProcessGrid::ProcessGrid(int64_t data, int64_t h, int64_t w, int64_t world_rank)
    : data_(data), h_(h), w_(w), rank_(world_rank) {
  GS_CHECK(data >= 1 && h >= 1 && w >= 1, "ProcessGrid: expected data, h and w >= 1, got {} x {} x {}", data, h, w);
  GS_CHECK(world_rank >= 0 && world_rank < data * h * w,
           "ProcessGrid: rank {} is outside a grid of {} x {} x {} = {} ranks", world_rank, data, h, w, data * h * w);
}

std::string Distribution::str() const {
  if (!sharded()) return "replicated";
  if (h_dim >= 0 && w_dim >= 0) return fmt::format("sharded dim {} over h and dim {} over w", h_dim, w_dim);
  return h_dim >= 0 ? fmt::format("sharded dim {} over h", h_dim) : fmt::format("sharded dim {} over w", w_dim);
}

std::string ProcessGrid::str() const {
  return fmt::format("data {} x h {} x w {}, rank {}", data_, h_, w_, rank_);
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
  }
  return "?";
}

std::string GridSpec::str() const { return fmt::format("{}x{}x{}", data, h, w); }

GridSpec parse_grid(const std::string& text) {
  GridSpec g;
  long long d = 0, h = 0, w = 0;
  char x1 = 0, x2 = 0;
  int consumed = 0;
  const bool ok = std::sscanf(text.c_str(), "%lld%c%lld%c%lld%n", &d, &x1, &h, &x2, &w, &consumed) == 5 &&
                  x1 == 'x' && x2 == 'x' && consumed == static_cast<int>(text.size()) && d >= 1 && h >= 1 && w >= 1;
  GS_CHECK(ok, "--grid: expected DATAxHxW with three positive integers (e.g. 1x2x2), got '{}'", text);
  g.data = d, g.h = h, g.w = w;
  return g;
}

std::vector<GridSpec> all_grids(int64_t n) {
  std::vector<GridSpec> out;
  for (int64_t d = 1; d <= n; ++d)
    for (int64_t h = 1; d * h <= n; ++h)
      if (n % (d * h) == 0) out.push_back({d, h, n / (d * h)});
  return out;
}

std::array<int64_t, 3> ProcessGrid::coords(int64_t r) const { return {r / (h_ * w_), (r / w_) % h_, r % w_}; }

ProcessGrid ProcessGrid::create(const CommPtr& world, const GridSpec& spec) {
  GS_CHECK(world != nullptr, "ProcessGrid::create: no world communicator");
  GS_CHECK(spec.data >= 1 && spec.h >= 1 && spec.w >= 1, "ProcessGrid: expected a grid of sizes >= 1, got {}",
           spec.str());
  GS_CHECK(spec.size() == world->size(),
           "ProcessGrid: grid {} needs data * h * w = {} ranks, but the job has {} (world size); pick a grid whose "
           "product is the number of processes",
           spec.str(), spec.size(), world->size());
  ProcessGrid g(spec.data, spec.h, spec.w, world->rank());
  auto [d, i, j] = g.coords(g.rank_);
  const int64_t H = spec.h, W = spec.w;
  auto comms = std::make_shared<std::array<CommPtr, kGroupCount>>();
  auto& c = *comms;
  c[int(Group::world)] = world;
  // (color, key) per group: ranks with one color form a group, ordered by key.
  auto split = [&](Group grp, int64_t color, int64_t key) {
    c[int(grp)] = world->split(static_cast<int>(color), static_cast<int>(key), group_name(grp));
  };
  split(Group::data, i * W + j, d);
  split(Group::h, d * W + j, i);
  split(Group::w, d * H + i, j);
  split(Group::spatial, d, i * W + j);
  split(Group::data_w, i, d * W + j);
  split(Group::data_h, j, d * H + i);
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
    case Group::data_w: return static_cast<int>(data_ * w_);
    case Group::data_h: return static_cast<int>(data_ * h_);
  }
  return 1;
}

int ProcessGrid::group_rank(Group grp) const {
  auto [d, i, j] = coords(rank_);
  switch (grp) {
    case Group::world: return static_cast<int>(rank_);
    case Group::data: return static_cast<int>(d);
    case Group::h: return static_cast<int>(i);
    case Group::w: return static_cast<int>(j);
    case Group::spatial: return static_cast<int>(i * w_ + j);
    case Group::data_w: return static_cast<int>(d * w_ + j);
    case Group::data_h: return static_cast<int>(d * h_ + i);
  }
  return 0;
}

bool ProcessGrid::in_my_group(int64_t other, Group grp) const {
  auto a = coords(rank_), b = coords(other);
  const bool same_d = a[0] == b[0], same_i = a[1] == b[1], same_j = a[2] == b[2];
  switch (grp) {
    case Group::world: return true;
    case Group::data: return same_i && same_j;
    case Group::h: return same_d && same_j;
    case Group::w: return same_d && same_i;
    case Group::spatial: return same_d;
    case Group::data_w: return same_i;
    case Group::data_h: return same_j;
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
