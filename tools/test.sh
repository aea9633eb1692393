#!/usr/bin/env bash
# The test command: sets up and builds (tools/setup.sh), runs every Meson test, and ends with one
# line `tests: N passed, N failed` (plus `, N skipped` when some were skipped), where N counts
# `meson test` entries. Exits non-zero when any test failed or the build did not succeed.
#
#   BUILD_DIR, MESON_ARGS  as for tools/setup.sh
#   GS_TIMEOUT_MULTIPLIER  multiplies each test's timeout (default 3)
#   any arguments are passed on to `meson test` (e.g. --suite engine, or a test name)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
build_dir="${BUILD_DIR:-build}"

if ! bash tools/setup.sh; then
  echo "[test] set-up or build failed; counted as one failure"
  echo "tests: 0 passed, 1 failed"
  exit 1
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
echo "[test] meson test -C $build_dir --print-errorlogs${*:+ $*}"
set +e
meson test -C "$build_dir" --print-errorlogs --timeout-multiplier "${GS_TIMEOUT_MULTIPLIER:-3}" "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e

# Meson's summary block: "Ok:  7", "Expected Fail:  0", "Fail:  0", "Unexpected Pass:  0",
# "Skipped:  0", "Timeout:  0". Errors are counted under Fail. Take the last block printed.
count() { { grep -E "^$1:[[:space:]]+[0-9]+" "$log" || true; } | tail -n 1 | grep -oE '[0-9]+' || true; }
ok="$(count 'Ok')"; xfail="$(count 'Expected Fail')"; fail="$(count 'Fail')"
xpass="$(count 'Unexpected Pass')"; skipped="$(count 'Skipped')"; timeout="$(count 'Timeout')"

if [[ -z "$ok" ]]; then
  if (( rc == 0 )); then
    passed=0; failed=0; skipped=0           # no test matched the selection
  else
    echo "[test] meson test exited with $rc before its summary (build failure?); counted as one failure"
    passed=0; failed=1; skipped=0
  fi
else
  passed=$(( ok + ${xfail:-0} ))
  failed=$(( ${fail:-0} + ${xpass:-0} + ${timeout:-0} ))
  skipped=${skipped:-0}
  if (( rc != 0 && failed == 0 )); then
    echo "[test] meson test exited with $rc although no test failed; counted as one failure"
    failed=1
  fi
fi

summary="tests: $passed passed, $failed failed"
(( skipped > 0 )) && summary+=", $skipped skipped"
echo "$summary"
(( failed == 0 ))
