// gradsphere::Error and the check macro every layer uses to report bad input.
#pragma once
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdexcept>
#include <string>

namespace gs {

// A user error: bad shapes, dtypes, devices, misuse of autograd. The CLI prints what() and exits 1.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// An error that every rank of a multi-process job reaches together, at the same point (decided by
// a collective, e.g. a non-finite loss that every rank skips): the ranks need not abort one
// another, so they end cleanly and only world rank 0 reports it, as one process would.
class AgreedError : public Error {
 public:
  using Error::Error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace gs

// GS_CHECK(cond, "expected {} but got {}", a, b): throws gs::Error with the formatted message.
#define GS_CHECK(cond, ...)                  \
  do {                                       \
    if (!(cond)) ::gs::fail(__VA_ARGS__);    \
  } while (0)
