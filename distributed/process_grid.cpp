#include "distributed/process_grid.h"

#include <fmt/format.h>

#include "engine/error.h"

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

std::string ProcessGrid::str() const {
  return fmt::format("data {} x h {} x w {}, rank {}", data_, h_, w_, rank_);
}

}  // namespace gs::dist
