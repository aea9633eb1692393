// The fuzz targets as ordinary tests: runs LLVMFuzzerTestOneInput once on every file of the given
// directories (the seed corpus and the regression cases, each a past finding), so the cases run in
// every build, sanitizers or not, without libFuzzer.
// Usage: fuzz_replay_X DIR...
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

int main(int argc, char** argv) {
  int cases = 0;
  for (int a = 1; a < argc; ++a) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(argv[a], ec)) {
      if (!entry.is_regular_file()) continue;
      std::ifstream in(entry.path(), std::ios::binary);
      const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      ++cases;
    }
    if (ec) {
      std::fprintf(stderr, "fuzz replay: cannot read %s: %s\n", argv[a], ec.message().c_str());
      return 1;
    }
  }
  std::printf("fuzz replay: %d case(s) ran without a crash or an unexpected exception\n", cases);
  return cases > 0 ? 0 : 1;
}
