#!/usr/bin/env bash
# A failure on one rank ends every rank, within seconds, with that rank's message: never a hang.
# Each case runs under `timeout` (a hang fails the test) and checks the exit code and the message.
#   faults.sh MPIEXEC PROBE
set -uo pipefail
mpiexec="$1"; probe="$2"
failures=0
run_case() {  # NAME EXPECTED_TEXT MAX_SECONDS ENV... -- ARGS...
  local name="$1" want="$2" max="$3"; shift 3
  local envs=()
  while [[ "$1" != -- ]]; do envs+=("$1"); shift; done
  shift
  local out start rc elapsed
  out="$(mktemp)"
  start=$(date +%s)
  env "${envs[@]}" timeout 60 "$mpiexec" -n 3 "$probe" "$@" >"$out" 2>&1
  rc=$?
  elapsed=$(( $(date +%s) - start ))
  if [[ $rc -eq 124 ]]; then
    echo "FAIL $name: hung (killed by timeout after 60 s)"; failures=$((failures + 1))
  elif [[ $rc -eq 0 ]]; then
    echo "FAIL $name: exited 0"; failures=$((failures + 1))
  elif ! grep -q -- "$want" "$out"; then
    echo "FAIL $name: exit $rc but the output lacks '$want':"; sed 's/^/    /' "$out"; failures=$((failures + 1))
  elif (( elapsed > max )); then
    echo "FAIL $name: took ${elapsed}s (more than ${max}s)"; failures=$((failures + 1))
  else
    echo "ok   $name: exit $rc in ${elapsed}s: $(grep -m1 -- "$want" "$out")"
  fi
  rm -f "$out"
}
run_case "error on rank 2 ends every rank" "\[rank 2\] error: probe: rank 2 hit a bad input file" 20 GS_COMM_TIMEOUT=600 -- throw 2
run_case "a rank that never joins: collective timeout" "collective timeout: rank" 30 GS_COMM_TIMEOUT=3 -- skip 1
run_case "mismatched collectives named by the replica checker" "ranks reached different collectives" 20 GS_CHECK_REPLICAS=1 -- mismatch 1
run_case "a tape-reducer gradient that went around the reduction on rank 1" "\[rank 1\] error: .*did not pass through its bucket's reduction node" 20 GS_COMM_TIMEOUT=600 -- reducer 1
# The control: a healthy run exits 0.
if ! out="$(timeout 60 "$mpiexec" -n 3 "$probe" ok 2>&1)" || ! grep -q "all ranks done, sum 3" <<< "$out"; then
  echo "FAIL healthy run: $out"; failures=$((failures + 1))
else
  echo "ok   healthy run exits 0"
fi
exit $(( failures > 0 ))
