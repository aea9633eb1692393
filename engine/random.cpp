#include "engine/random.h"

#include "engine/philox.h"

namespace gs {

std::array<uint32_t, 4> philox4x32(RandomKey key, uint64_t index) {
  const philox::Words r = philox::draw(key.seed, key.stream, index);
  return {r.w[0], r.w[1], r.w[2], r.w[3]};
}

}  // namespace gs
