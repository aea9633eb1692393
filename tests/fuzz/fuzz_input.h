// Reading a fuzzer's bytes as a sequence of choices (the structure-aware targets), the way
// libFuzzer's FuzzedDataProvider does, without depending on clang's header (the replay tests build
// with g++). When the bytes run out every read returns 0.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace gs_fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint64_t bits(int nbytes) {
    uint64_t v = 0;
    for (int i = 0; i < nbytes && pos_ < size_; ++i) v = (v << 8) | data_[pos_++];
    return v;
  }
  // An integer in [lo, hi].
  int64_t range(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    return lo + static_cast<int64_t>(bits(span > 0xFFFF ? 4 : span > 0xFF ? 2 : 1) % span);
  }
  bool flip() { return bits(1) & 1; }
  // Any double bit pattern (NaN and infinities included) or, half of the time, a small integer.
  double number() {
    if (flip()) return static_cast<double>(range(-1000, 1000));
    uint64_t b = bits(8);
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
  }
  std::string text(size_t max_len) {
    const auto n = static_cast<size_t>(range(0, static_cast<int64_t>(max_len)));
    std::string s;
    for (size_t i = 0; i < n && pos_ < size_; ++i) s.push_back(static_cast<char>(data_[pos_++]));
    return s;
  }
  bool empty() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace gs_fuzz
