// Helpers shared by every test suite.
#pragma once
#include <exception>
#include <string>

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

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace gs_test
