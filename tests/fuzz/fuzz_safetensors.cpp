// libFuzzer target: the safetensors reader and the checkpoint layout on it (models/safetensors.h,
// models/checkpoint.h), on the bytes as a file. Any input must load or throw gs::Error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>

#include "engine/error.h"
#include "models/checkpoint.h"
#include "models/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("gs-fuzz-safetensors-" + std::to_string(::getpid()));
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  try {
    (void)gs::models::load_safetensors(path);
  } catch (const gs::Error&) {
  }
  try {
    (void)gs::models::load_checkpoint(path);
  } catch (const gs::Error&) {
  }
  return 0;
}
