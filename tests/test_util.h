// Helpers shared by every test suite.
#pragma once
#include <exception>
#include <filesystem>
#include <iterator>
#include <random>
#include <string>

#include <fmt/format.h>

#include "engine/error.h"

namespace gs_test {

// The message of the gs::Error that f() throws, "non-gs exception: ..." for any other exception,
// or "(no error)" when it returns normally.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const gs::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("non-gs exception: ") + e.what();
  }
  return "(no error)";
}

// A fresh directory under the system temp dir ("gs-test-<tag>-<random>"), removed with everything
// in it when the object goes out of scope.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag = "tmp") {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() / fmt::format("gs-test-{}-{:08x}{:08x}", tag, rd(), rd());
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::filesystem::path operator/(const std::string& name) const { return path / name; }
  size_t entries() const {
    return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(path), {}));
  }
};

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace gs_test
