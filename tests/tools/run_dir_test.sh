#!/usr/bin/env bash
# The run directory after crashes and hostile conditions (`gradsphere train`, tools/README.md
# "What a run directory guarantees"), replayed on the tiny configuration:
#   1. a crash after a checkpoint, then --resume: metrics.csv and validation.csv hold exactly the
#      rows of an uninterrupted run (no repeats), and the checkpoint is bitwise the same;
#   2. weights that overflow while the loss is still finite are never checkpointed;
#   3. --resume accepts a changed learning rate (reported, used, config.yaml updated) and names a
#      change it cannot follow;
#   4. a second run on the same directory is refused, naming the first run's process;
#   5. the directory removed, or removed and recreated, mid-run ends the run with an error naming it;
#   6. a config.yaml that is a directory, --out "", a path under a regular file and a config that is
#      not UTF-8 are errors (exit 1) naming the path;
#   7. SIGHUP stops with a checkpoint (exit 129) that resumes bitwise; temporaries of a killed write
#      are removed by the next run.
# Usage: run_dir_test.sh GRADSPHERE
set -euo pipefail
gs="$(realpath "$1")"
work="$(mktemp -d)"
trap 'kill $(jobs -p) 2> /dev/null || true; rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1

fail() { echo "FAIL: $*"; exit 1; }
run() {  # run LOG COMMAND...: must succeed
  local log="$1"; shift
  timeout 300 "$@" > "$log" 2>&1 || { cat "$log"; fail "failed: $*"; }
}
refused() {  # refused LOG EXPECTED_TEXT COMMAND...: must exit 1 with the text in its output
  local log="$1" text="$2"; shift 2
  local rc=0
  timeout 120 "$@" > "$log" 2>&1 || rc=$?
  [[ $rc == 1 ]] || { cat "$log"; fail "expected exit status 1, got $rc: $*"; }
  grep -qF -- "$text" "$log" || fail "expected '$text' in: $(cat "$log")"
}
wait_for() {  # wait_for FILE: until it exists (at most 60 s)
  for _ in $(seq 1 600); do [[ -e "$1" ]] && return 0; sleep 0.1; done
  fail "$1 never appeared"
}
rows() { cut -d, -f1-$(($(head -1 "$1" | tr ',' '\n' | wc -l) - 1)) "$1"; }  # every column but the last (seconds)

cp "$(dirname "$0")/tiny.yaml" "$work/tiny.yaml"  # 40 steps, checkpoints every 10, validation every 20
run "$work/full.log" "$gs" train "$work/tiny.yaml" --out "$work/full"

# 1. The state a crash leaves: rows written up to step 30, the last checkpoint at step 20.
run "$work/c1.log" "$gs" train "$work/tiny.yaml" --out "$work/crash" --stop-after 20
cp "$work/crash/checkpoint.safetensors" "$work/ckpt20"
run "$work/c2.log" "$gs" train "$work/tiny.yaml" --out "$work/crash" --resume --stop-after 10
(( $(wc -l < "$work/crash/metrics.csv") == 31 )) || fail "expected 30 metric rows before the crash"
cp "$work/ckpt20" "$work/crash/checkpoint.safetensors"
printf '31,0.5,0.001' >> "$work/crash/metrics.csv"  # and a row torn by the crash
run "$work/c3.log" "$gs" train "$work/tiny.yaml" --out "$work/crash" --resume
cmp <(rows "$work/crash/metrics.csv") <(rows "$work/full/metrics.csv") || fail "metrics.csv after crash + resume differs"
cmp "$work/crash/validation.csv" "$work/full/validation.csv" || fail "validation.csv after crash + resume differs"
cmp "$work/crash/checkpoint.safetensors" "$work/full/checkpoint.safetensors" || fail "the checkpoint differs"
echo "ok: crash + resume leaves metrics.csv ($(($(wc -l < "$work/crash/metrics.csv") - 1)) rows) and validation.csv as an uninterrupted run"

# 2. Adam with lr 1e39 in f32 makes every weight infinite in one step, while that step's loss is finite.
sed -e 's/lr: 3.0e-3/lr: 1.0e+39/' -e 's/warmup_steps: 4/warmup_steps: 0/' -e 's/checkpoint_every: 10/checkpoint_every: 1/' \
  "$work/tiny.yaml" > "$work/inf.yaml"
refused "$work/inf.log" "inf after the step (the loss was still finite); no checkpoint of this state is written" \
  "$gs" train "$work/inf.yaml" --out "$work/inf"
[[ ! -e "$work/inf/checkpoint.safetensors" ]] || fail "a checkpoint with infinite weights was written"
echo "ok: overflowing weights stop the run without a checkpoint"

# 3. Resume with a lower learning rate (constant schedule, so the column shows it), and with a changed model.
sed -e 's/type: warmup_cosine/type: constant/' -e '/warmup_steps/d' "$work/tiny.yaml" > "$work/const.yaml"
run "$work/l1.log" "$gs" train "$work/const.yaml" --out "$work/lr" --stop-after 10
sed -e 's/lr: 3.0e-3/lr: 1.0e-3/' "$work/const.yaml" > "$work/lower.yaml"
run "$work/l2.log" "$gs" train "$work/lower.yaml" --out "$work/lr" --resume
grep -qF "changed on resume: optimizer.lr: 3.0e-3 -> 1.0e-3" "$work/l2.log" || fail "no report of the change: $(cat "$work/l2.log")"
[[ "$(awk -F, '$1 == 10 {print $3}' "$work/lr/metrics.csv")" == "0.003" ]] || fail "step 10 should keep lr 0.003"
[[ "$(awk -F, '$1 == 11 {print $3}' "$work/lr/metrics.csv")" == "0.001" ]] || fail "step 11 should use lr 0.001"
cmp "$work/lr/config.yaml" "$work/lower.yaml" || fail "config.yaml is not the configuration the run now uses"
sed -e 's/embed_dim: 8/embed_dim: 16/' "$work/lower.yaml" > "$work/wider.yaml"
run "$work/l3.log" "$gs" train "$work/const.yaml" --out "$work/lr2" --stop-after 5
refused "$work/l4.log" "model.embed_dim: 8 -> 16" "$gs" train "$work/wider.yaml" --out "$work/lr2" --resume
echo "ok: resume follows a new learning rate and refuses a new model width, by name"

# 4.-5. A long run in the background, and what happens around it.
sed -e 's/steps: 40/steps: 100000/' -e 's/checkpoint_every: 10/checkpoint_every: 50/' -e 's/^  every: 20/  every: 0/' \
  "$work/tiny.yaml" > "$work/long.yaml"
"$gs" train "$work/long.yaml" --out "$work/busy" > "$work/busy.log" 2>&1 &
busy=$!
wait_for "$work/busy/metrics.csv"
refused "$work/second.log" "is in use by another run (pid $busy on" "$gs" train "$work/long.yaml" --out "$work/busy"
kill -TERM $busy; wait $busy || true
echo "ok: a second run on a busy directory is refused naming pid $busy"
for how in removed replaced; do
  "$gs" train "$work/long.yaml" --out "$work/$how" > "$work/$how.log" 2>&1 &
  pid=$!
  wait_for "$work/$how/metrics.csv"
  kill -STOP $pid  # the run is paused while its directory goes (and comes back)
  rm -rf "$work/$how"
  [[ $how == replaced ]] && mkdir "$work/$how"
  kill -CONT $pid
  rc=0; timeout 60 tail --pid=$pid -f /dev/null || true; wait $pid || rc=$?
  [[ $rc == 1 ]] || { cat "$work/$how.log"; fail "a run whose directory was $how exited with $rc"; }
  if [[ $how == removed ]]; then text="is gone"; else text="was removed and replaced by another one"; fi
  grep -qF "the run directory '$work/$how' $text" "$work/$how.log" || { cat "$work/$how.log"; fail "no '$text' message"; }
done
echo "ok: a run directory removed or replaced mid-run ends the run with an error naming it"

# 6. Paths and files that cannot be what the run needs.
mkdir -p "$work/cfgdir/config.yaml"
refused "$work/e1.log" "cannot write '$work/cfgdir/config.yaml': a directory is in the way" \
  "$gs" train "$work/tiny.yaml" --out "$work/cfgdir"
refused "$work/e2.log" "train --out: expected a run directory, got an empty string" "$gs" train "$work/tiny.yaml" --out ""
refused "$work/e3.log" "cannot create the run directory '$work/tiny.yaml/run': Not a directory" \
  "$gs" train "$work/tiny.yaml" --out "$work/tiny.yaml/run"
printf 'seed: 3\n# caf\xe9\n' > "$work/latin1.yaml"
refused "$work/e4.log" "line 2, column 6: byte 0xe9 is not valid UTF-8" "$gs" train "$work/latin1.yaml" --out "$work/l1"
[[ ! -e "$work/l1" ]] || fail "a config that is not UTF-8 created a run directory"
echo "ok: unusable paths and a config that is not UTF-8 are errors naming them"

# 7. SIGHUP (the terminal went away) stops with a checkpoint that resumes bitwise.
sed -e 's/steps: 100000/steps: 600/' "$work/long.yaml" > "$work/hup.yaml"
run "$work/hfull.log" "$gs" train "$work/hup.yaml" --out "$work/hfull"
"$gs" train "$work/hup.yaml" --out "$work/hup" > "$work/hup.log" 2>&1 &
pid=$!
wait_for "$work/hup/metrics.csv"
kill -HUP $pid
rc=0; wait $pid || rc=$?
[[ $rc == 129 ]] || { cat "$work/hup.log"; fail "SIGHUP: expected exit status 129, got $rc"; }
touch "$work/hup/.checkpoint.safetensors.tmp-123-0-deadbeef"  # as a SIGKILL during a write leaves it
run "$work/hup2.log" "$gs" train "$work/hup.yaml" --out "$work/hup" --resume
grep -qF "removed 1 temporary file(s) left in $work/hup by an interrupted run" "$work/hup2.log" \
  || fail "the stale temporary was not reported: $(cat "$work/hup2.log")"
[[ ! -e "$work/hup/.checkpoint.safetensors.tmp-123-0-deadbeef" ]] || fail "the stale temporary is still there"
cmp "$work/hup/checkpoint.safetensors" "$work/hfull/checkpoint.safetensors" || fail "SIGHUP + resume differs"
echo "ok: SIGHUP stops with a checkpoint ($(grep -o 'stopped at step [0-9]*' "$work/hup.log")), resumed bitwise; stale temporaries removed"
echo "run-dir: all checks passed"
