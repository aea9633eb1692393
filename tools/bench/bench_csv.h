// The CSV file a benchmark writes with --csv: the header line, then what `rows(f)` prints. Fails
// naming the file when it cannot be opened or written (a full disk included); the table on stdout
// has been printed by then, so no figure is lost.
#pragma once
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fmt/core.h>
#include <string>

#include "engine/error.h"

namespace gs::tools {

template <typename F>
void write_bench_csv(const std::string& path, const char* bench, const char* header, F&& rows) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) fail("{}: cannot open '{}' for writing: {}", bench, path, std::strerror(errno));
  fmt::print(f, "{}\n", header);
  rows(f);
  const bool written = std::ferror(f) == 0;
  if (std::fclose(f) != 0 || !written) fail("{}: writing '{}' failed: {}", bench, path, std::strerror(errno));
  fmt::print("\nwrote {}\n", path);
}

}  // namespace gs::tools
