#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan + libFuzzer) against the library of a
# finished gcc build, and fuzzes each for a bounded time, starting from its seed corpus and
# regression cases. The parsers under test (and what they alone need) are compiled into each
# fuzzer, instrumented; the rest of the library is linked from BUILD_DIR uninstrumented. A crash,
# a leak, a sanitizer report or an exception other than gs::Error fails the run and leaves the
# input in $ARTIFACTS (default fuzz-artifacts/): add it to tests/fuzz/regressions/<target>/ with
# the fix, so the replay tests (meson suite tools) keep it.
# Usage: run_fuzzers.sh [BUILD_DIR] [SECONDS_PER_TARGET]   (defaults: build, 60)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(realpath "${1:-build}")"
seconds="${2:-60}"
artifacts="$(realpath -m "${ARTIFACTS:-fuzz-artifacts}")"
log() { printf '[fuzz] %s\n' "$*"; }

# clang and its libFuzzer runtime (Debian: clang, libclang-rt-14-dev).
probe="$(mktemp -d)"
can_fuzz() {
  command -v clang++ > /dev/null &&
    echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' |
    clang++ -x c++ -fsanitize=fuzzer -o "$probe/probe" - 2> /dev/null
}
if ! can_fuzz; then
  if [[ $(id -u) == 0 ]]; then
    log "installing clang and libclang-rt-14-dev"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends clang libclang-rt-14-dev > /dev/null
  else
    echo "run_fuzzers.sh: clang with libFuzzer is missing; as root: apt-get install clang libclang-rt-14-dev" >&2
    exit 1
  fi
fi
rm -rf "$probe"
[[ -e "$build/libgradsphere.so" ]] || { echo "run_fuzzers.sh: no $build/libgradsphere.so; build first (tools/setup.sh)" >&2; exit 1; }

flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
       -I"$repo" -I"$build" $(pkg-config --cflags fmt yaml-cpp) -Wno-unused-command-line-argument)
libs=(-L"$build" -Wl,-rpath,"$build" -lgradsphere $(pkg-config --libs fmt yaml-cpp) -lnetcdf)
declare -A sources=(
  [config]="tests/fuzz/fuzz_config.cpp tools/config.cpp tools/train_config.cpp"
  [safetensors]="tests/fuzz/fuzz_safetensors.cpp models/safetensors.cpp models/checkpoint.cpp"
  [netcdf]="tests/fuzz/fuzz_netcdf.cpp models/data/netcdf_io.cpp"
)
out="$build/fuzz"
mkdir -p "$out" "$artifacts"
failed=()
for target in ${FUZZ_TARGETS:-config safetensors netcdf}; do
  start=$SECONDS
  srcs=()
  for s in ${sources[$target]}; do srcs+=("$repo/$s"); done
  clang++ "${flags[@]}" "${srcs[@]}" "${libs[@]}" -o "$out/fuzz_$target"
  work="$(mktemp -d)"  # the corpus the fuzzer grows; the seeds stay as they are
  # LeakSanitizer stays on: the netCDF library's own allocations are freed at nc_close.
  if ASAN_OPTIONS="detect_leaks=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
     "$out/fuzz_$target" "$work" "$repo/tests/fuzz/corpus/$target" "$repo/tests/fuzz/regressions/$target" \
       -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 -malloc_limit_mb=1024 -max_len=8192 \
       -artifact_prefix="$artifacts/$target-" -print_final_stats=1 > "$out/fuzz_$target.log" 2>&1; then
    log "$target: no finding in ${seconds}s ($(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out/fuzz_$target.log" | grep -o '[0-9]*$') inputs, $(ls "$work" | wc -l) new corpus entries), $(( SECONDS - start ))s with the build"
  else
    failed+=("$target")
    tail -n 60 "$out/fuzz_$target.log"
    log "$target: FINDING (input in $artifacts/$target-*)"
  fi
  rm -rf "$work"
done
(( ${#failed[@]} == 0 )) || { log "findings: ${failed[*]}"; exit 1; }
log "all targets fuzzed ${seconds}s each without a finding"
