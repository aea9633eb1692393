// Where a tensor's bytes live. CPU today; CUDA slots in through the allocator registry.
#pragma once
#include <cstdint>
#include <string>

#include "engine/error.h"

namespace gs {

enum class DeviceType : uint8_t { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::cuda, i}; }
  bool is_cpu() const { return type == DeviceType::cpu; }
  bool operator==(const Device&) const = default;
  std::string str() const { return type == DeviceType::cpu ? "cpu" : "cuda:" + std::to_string(index); }
};

}  // namespace gs

template <>
struct fmt::formatter<gs::Device> : fmt::formatter<std::string> {
  auto format(const gs::Device& d, format_context& ctx) const {
    return fmt::formatter<std::string>::format(d.str(), ctx);
  }
};
