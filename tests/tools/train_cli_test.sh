#!/usr/bin/env bash
# End-to-end checks of `gradsphere train` and `gradsphere rollout` on a tiny configuration:
#   1. the loss falls over a short run;
#   2. a run stopped half way and resumed ends with a checkpoint byte-identical to an uninterrupted one;
#   3. a rollout from the checkpoint writes NetCDF and PNG maps;
#   4. a diverging run (huge learning rate) stops with a clear message and keeps its last good checkpoint;
#   5. configuration errors name the key;
#   6. --device cuda trains (and rolls out) on a GPU, or without one is refused with the driver's reason;
#   7. training.activation_checkpointing (blocks; rollout steps after 1) trains to the same losses;
#   8. --grid auto (and distributed.grid: auto) prints the cost model's choice and runs it.
# Usage: train_cli_test.sh GRADSPHERE_BINARY
set -euo pipefail
gs="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1  # the test suite runs several programs at once on 2 cores

fail() { echo "FAIL: $*"; exit 1; }

cp "$(dirname "$0")/tiny.yaml" "$work/tiny.yaml"

# 1. Uninterrupted run; the loss must fall.
"$gs" train "$work/tiny.yaml" --out "$work/a" > "$work/a.log" 2>&1 || { cat "$work/a.log"; fail "training run failed"; }
first=$(awk -F, 'NR==2 {print $2}' "$work/a/metrics.csv")
last=$(awk -F, 'END {print $2}' "$work/a/metrics.csv")
awk -v f="$first" -v l="$last" 'BEGIN { exit !(l < 0.5 * f) }' || fail "loss did not fall by half: first $first, last $last"
for f in checkpoint.safetensors metrics.csv validation.csv loss_curve.png skill_by_lead.png config.yaml; do
  [[ -s "$work/a/$f" ]] || fail "missing $f"
done
ls "$work/a/maps/"*.png > /dev/null || fail "no maps written"
echo "ok: loss fell from $first to $last"

# 6. On a GPU.
if "$gs" train "$work/tiny.yaml" --out "$work/gpu" --device cuda > "$work/gpu.log" 2>&1; then
  last_gpu=$(awk -F, 'END {print $2}' "$work/gpu/metrics.csv")
  awk -v f="$first" -v l="$last_gpu" 'BEGIN { exit !(l < 0.5 * f) }' || fail "loss on cuda did not fall by half: $last_gpu"
  echo "ok: --device cuda trained, final loss $last_gpu (cpu $last)"
else
  grep -q "cuda:0 is not available" "$work/gpu.log" || { cat "$work/gpu.log"; fail "--device cuda failed"; }
  [[ ! -e "$work/gpu" ]] || fail "a refused --device cuda run created its run directory"
  echo "ok: --device cuda without a GPU is refused: $(grep -o 'not available: .*' "$work/gpu.log" | head -n 1)"
fi

# 7. Activation checkpointing replays the forward in backward: the same losses, step by step, as run a
#    (metrics.csv without its last column, the step time), over the first 10 steps.
for mode in "blocks" "{rollout_steps_after: 1}"; do
  sed "s/^  log_every: 1$/  log_every: 1\n  activation_checkpointing: $mode/" "$work/tiny.yaml" > "$work/ck.yaml"
  grep -q "activation_checkpointing" "$work/ck.yaml" || fail "could not set activation_checkpointing in the test config"
  rm -rf "$work/ck"
  "$gs" train "$work/ck.yaml" --out "$work/ck" --stop-after 10 > "$work/ck.log" 2>&1 || { cat "$work/ck.log"; fail "training with activation_checkpointing: $mode failed"; }
  diff <(head -n 11 "$work/a/metrics.csv" | rev | cut -d, -f2- | rev) <(head -n 11 "$work/ck/metrics.csv" | rev | cut -d, -f2- | rev) \
    || fail "activation_checkpointing: $mode changed the losses"
done
echo "ok: activation checkpointing (blocks; rollout steps after 1) gives the same losses"

# 2. Interrupted after 17 steps, resumed: the final checkpoint must be byte-identical.
"$gs" train "$work/tiny.yaml" --out "$work/b" --stop-after 17 > "$work/b1.log" 2>&1 || { cat "$work/b1.log"; fail "first half failed"; }
grep -q "stopped at step 17" "$work/b1.log" || fail "expected 'stopped at step 17' in: $(cat "$work/b1.log")"
"$gs" train "$work/tiny.yaml" --out "$work/b" --resume > "$work/b2.log" 2>&1 || { cat "$work/b2.log"; fail "resume failed"; }
cmp "$work/a/checkpoint.safetensors" "$work/b/checkpoint.safetensors" || fail "resumed checkpoint differs from the uninterrupted one"
echo "ok: interrupted + resumed run is bitwise identical"
# Starting again over an existing run without --resume is refused.
if "$gs" train "$work/tiny.yaml" --out "$work/b" > "$work/b3.log" 2>&1; then fail "training over an existing checkpoint was accepted"; fi
grep -q "already holds a checkpoint" "$work/b3.log" || fail "unexpected message: $(cat "$work/b3.log")"
# --overwrite starts afresh and ends where the first run ended.
"$gs" train "$work/tiny.yaml" --out "$work/b" --overwrite > "$work/b4.log" 2>&1 || { cat "$work/b4.log"; fail "--overwrite failed"; }
cmp "$work/a/checkpoint.safetensors" "$work/b/checkpoint.safetensors" || fail "an --overwrite run differs from the first run"

# 3. Rollout from the checkpoint.
"$gs" rollout "$work/a/checkpoint.safetensors" --steps 3 --samples 1 --out "$work/roll" > "$work/roll.log" 2>&1 \
  || { cat "$work/roll.log"; fail "rollout failed"; }
[[ -s "$work/roll/rollout.nc" && -s "$work/roll/truth.nc" ]] || fail "rollout NetCDF files missing"
ls "$work/roll/maps/"*.png > /dev/null || fail "rollout maps missing"
grep -q "RMSE" "$work/roll.log" || fail "rollout printed no scores: $(cat "$work/roll.log")"
echo "ok: rollout wrote NetCDF and maps"
# The same rollout on a GPU, or without one refused before anything is written.
if "$gs" rollout "$work/a/checkpoint.safetensors" --steps 3 --out "$work/roll-gpu" --device cuda > "$work/roll-gpu.log" 2>&1; then
  [[ -s "$work/roll-gpu/rollout.nc" ]] && grep -q "RMSE" "$work/roll-gpu.log" || fail "rollout --device cuda wrote no forecast"
  echo "ok: rollout --device cuda: $(grep -A2 RMSE "$work/roll-gpu.log" | tail -n 1) (cpu: $(grep -A2 RMSE "$work/roll.log" | tail -n 1))"
else
  grep -q "cuda:0 is not available" "$work/roll-gpu.log" || { cat "$work/roll-gpu.log"; fail "rollout --device cuda failed"; }
  [[ ! -e "$work/roll-gpu" ]] || fail "a refused rollout --device cuda created its output directory"
  echo "ok: rollout --device cuda without a GPU is refused"
fi

# 3b. Training from NetCDF: the rollout's truth file (CF coordinates, 4 states) as data, and the
#     stochastic model as an ensemble (2 members, MSE + CRPS) with its ensemble scores.
cat > "$work/nc.yaml" <<YAML
seed: 1
data:
  source: netcdf
  netcdf:
    train_files: [$work/roll/truth.nc]
    validation_files: [$work/roll/truth.nc]
    variables: [vorticity, geopotential]
model:
  type: noise_sfno
  embed_dim: 8
  noise_embed_dim: 4
  num_layers: 2
  mlp_storage: bf16
training:
  steps: 6
  batch_size: 2
  rollout_steps: 2
  ensemble_members: 2
loss:
  type: mix
  mix: {mse: 0.5, crps: 1}
validation:
  samples: 2
  lead_steps: 2
output:
  maps: false
YAML
"$gs" train "$work/nc.yaml" --out "$work/nc" > "$work/nc.log" 2>&1 || { cat "$work/nc.log"; fail "training from NetCDF failed"; }
grep -q "data: netcdf legendre-gauss 16x32, variables \[vorticity, geopotential\]" "$work/nc.log" \
  || fail "unexpected data line: $(grep data: "$work/nc.log")"
grep -q "NoiseConditionedSFNO" "$work/nc.log" || fail "expected the noise-conditioned model: $(cat "$work/nc.log")"
grep -q "loss" "$work/nc.log" || fail "no loss lines with bf16 MLP storage: $(cat "$work/nc.log")"
grep -q "loss: mse 0.5 + crps 1 (alpha 1), 2 ensemble members per initial condition" "$work/nc.log" \
  || fail "no ensemble loss line: $(cat "$work/nc.log")"
grep -q "spread/skill" "$work/nc.log" && grep -q "rank histogram (2 members" "$work/nc.log" \
  || fail "no ensemble scores: $(cat "$work/nc.log")"
head -n 1 "$work/nc/validation.csv" | grep -q ",spread,spread_skill,crps$" || fail "validation.csv header: $(head -n 1 "$work/nc/validation.csv")"
for png in spread_skill rank_histogram; do [[ -s "$work/nc/$png.png" ]] || fail "no $png.png"; done
echo "ok: trained a NoiseConditionedSFNO ensemble from NetCDF files (bf16 MLP storage, CRPS, ensemble scores)"
"$gs" rollout "$work/nc/checkpoint.safetensors" --steps 2 --members 3 --baseline "$work/nc/checkpoint.safetensors" \
  --out "$work/nc-roll" > "$work/nc-roll.log" 2>&1 || { cat "$work/nc-roll.log"; fail "ensemble rollout failed"; }
grep -q "3 members each (dim 'member')" "$work/nc-roll.log" && grep -q "rank histogram (3 members" "$work/nc-roll.log" \
  && grep -q "the baseline .* (area-weighted RMSE)" "$work/nc-roll.log" || fail "ensemble rollout output: $(cat "$work/nc-roll.log")"
for png in spread_skill rank_histogram; do [[ -s "$work/nc-roll/$png.png" ]] || fail "rollout wrote no $png.png"; done
if "$gs" rollout "$work/nc/checkpoint.safetensors" --baseline "$work/a/checkpoint.safetensors" --out "$work/nc-bad" \
     > "$work/nc-bad.log" 2>&1; then fail "a baseline trained on other data was accepted"; fi
grep -q "was trained on other data than the checkpoint" "$work/nc-bad.log" || fail "baseline message: $(cat "$work/nc-bad.log")"
[[ ! -e "$work/nc-bad" ]] || fail "a refused baseline left an output directory"
if "$gs" rollout "$work/a/checkpoint.safetensors" --members 2 --out "$work/det-ens" > "$work/det-ens.log" 2>&1; then
  fail "rollout --members 2 of a deterministic model was accepted"
fi
grep -q "is deterministic, so every member would be the same" "$work/det-ens.log" || fail "det-ens: $(cat "$work/det-ens.log")"
[[ ! -e "$work/det-ens" ]] || fail "a refused rollout --members left an output directory"
echo "ok: rollout --members 3 writes a member dim, the ensemble scores and plots, a baseline's RMSE; a deterministic model's members and another data set's baseline are refused"

# 4. Divergence: a huge learning rate makes the loss of the second step infinite; the run stops with
#    a message and writes no checkpoint of the broken state (the weights were never changed).
sed -e 's/lr: 3.0e-3/lr: 1.0e+30/' -e 's/warmup_steps: 4/warmup_steps: 0/' "$work/tiny.yaml" > "$work/nan.yaml"
if "$gs" train "$work/nan.yaml" --out "$work/nan" > "$work/nan.log" 2>&1; then fail "a diverging run succeeded"; fi
grep -q "training stopped: step" "$work/nan.log" || fail "no divergence message: $(cat "$work/nan.log")"
grep -q "No checkpoint was written yet" "$work/nan.log" || fail "no checkpoint note: $(cat "$work/nan.log")"
[[ ! -e "$work/nan/checkpoint.safetensors" ]] || fail "a checkpoint was written after the loss diverged"
echo "ok: divergence stops the run: $(grep -m1 'training stopped' "$work/nan.log")"

# 5. Configuration errors name the key.
sed -e 's/embed_dim: 8/embed_dimm: 8/' "$work/tiny.yaml" > "$work/typo.yaml"
if "$gs" train "$work/typo.yaml" --out "$work/typo" > "$work/typo.log" 2>&1; then fail "a config typo was accepted"; fi
grep -q "embed_dimm" "$work/typo.log" && grep -q "embed_dim" "$work/typo.log" || fail "typo message: $(cat "$work/typo.log")"
sed -e 's/batch_size: 2/batch_size: two/' "$work/tiny.yaml" > "$work/type.yaml"
if "$gs" train "$work/type.yaml" --out "$work/type" > "$work/type.log" 2>&1; then fail "a wrong type was accepted"; fi
grep -q "training.batch_size" "$work/type.log" || fail "type message: $(cat "$work/type.log")"
sed -e 's/embed_dim: 8/embed_dim: 8\n  mlp_storage: f16/' "$work/tiny.yaml" > "$work/storage.yaml"
if "$gs" train "$work/storage.yaml" --out "$work/storage" > "$work/storage.log" 2>&1; then fail "mlp_storage f16 was accepted"; fi
grep -q "mlp_storage" "$work/storage.log" && grep -q "bf16" "$work/storage.log" \
  || fail "mlp_storage message: $(cat "$work/storage.log")"
echo "ok: configuration errors name the key"

# 8. --grid auto on one process: the cost model's table, 1x1x1 chosen; `distributed.grid: auto` in the
#    configuration does the same; a malformed grid names auto; rollout refuses --grid auto.
"$gs" train "$work/tiny.yaml" --out "$work/auto" --grid auto --stop-after 1 > "$work/auto.log" 2>&1 \
  || { cat "$work/auto.log"; fail "train --grid auto failed"; }
grep -q "^  1x1x1 .*<- chosen" "$work/auto.log" || fail "no chosen 1x1x1 in: $(cat "$work/auto.log")"
printf 'distributed:\n  grid: auto\n  cost_model: {flops_per_second: 1.0e+10}\n' | cat "$work/tiny.yaml" - > "$work/auto.yaml"
"$gs" train "$work/auto.yaml" --out "$work/auto2" --stop-after 1 > "$work/auto2.log" 2>&1 \
  || { cat "$work/auto2.log"; fail "distributed.grid: auto failed"; }
grep -q "^--grid auto: 10 GFLOP/s" "$work/auto2.log" || fail "the configured rate is not used: $(head -n 2 "$work/auto2.log")"
printf 'distributed:\n  grid: fastest\n' | cat "$work/tiny.yaml" - > "$work/auto-bad.yaml"
if "$gs" train "$work/auto-bad.yaml" --out "$work/auto-bad" > "$work/auto-bad.log" 2>&1; then fail "grid: fastest was accepted"; fi
grep -q "got 'fastest' (or auto" "$work/auto-bad.log" || fail "grid message: $(cat "$work/auto-bad.log")"
if "$gs" rollout "$work/auto/checkpoint.safetensors" --grid auto --out "$work/auto-roll" > "$work/auto-roll.log" 2>&1; then
  fail "rollout --grid auto was accepted"
fi
grep -q "rollout --grid auto: the cost model plans training steps" "$work/auto-roll.log" \
  || fail "rollout message: $(cat "$work/auto-roll.log")"
echo "ok: --grid auto (flag and configuration) on one process; its errors"
echo "train-cli: all checks passed"
