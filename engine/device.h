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

// "cpu", "cuda" (device 0) or "cuda:N"; anything else is an error that lists the accepted forms.
inline Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() < 9 &&
      s.find_first_not_of("0123456789", 5) == std::string::npos)
    return Device::cuda(std::stoi(s.substr(5)));
  fail("unknown device '{}': expected cpu, cuda or cuda:N", s);
}

}  // namespace gs

template <>
struct fmt::formatter<gs::Device> : fmt::formatter<std::string> {
  auto format(const gs::Device& d, format_context& ctx) const {
    return fmt::formatter<std::string>::format(d.str(), ctx);
  }
};
