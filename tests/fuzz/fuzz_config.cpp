// libFuzzer target: the strict YAML reader (tools/config.h) and the training schema on top of it.
// Any input must end in a parsed configuration or a gs::Error; anything else (a crash, a hang, a
// sanitizer report, another exception) is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/error.h"
#include "tools/config.h"
#include "tools/train_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const gs::tools::TrainConfig cfg = gs::tools::train_config_from_string(text, "fuzz.yaml");
    (void)cfg;
  } catch (const gs::Error&) {
  }
  return 0;
}
