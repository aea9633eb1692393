#!/usr/bin/env bash
# The CUDA checks of the CUDA backend issue as one prepared run for the device tool's GPU machine,
# which has nvcc, cuBLAS and cuFFT but none of gradsphere's other dependencies and no network.
#
#   bash tools/gpu_check.sh pack   here, after `bash tools/setup.sh` built the CUDA build (build/):
#                                  copies the test and tool executables, libgradsphere.so and every
#                                  shared library they load except glibc's and CUDA's, stripped,
#                                  into .gpu/pack.tar.xz (git-ignored; about 30 MB, under the device
#                                  tool's 64 MiB), and checks that the copies start from the pack alone.
#   bash tools/gpu_check.sh run    there (device tool: carry [".gpu"], this command), writing
#                                  everything under $OUT: nvidia-smi, the engine and ops suites (the
#                                  registry walk on CUDA: each op in f64 and f32 against the CPU,
#                                  gradcheck and gradgradcheck in f64), `gradsphere gradcheck
#                                  --device cuda`, `gradsphere bench engine --device cuda` and a tiny
#                                  `gradsphere train --device cuda` beside the same run on the CPU.
# Each step's exit status is in $OUT/summary.txt, the logs in $OUT/logs.tar.gz; the run exits
# non-zero if any step failed. Run it with the device tool's timeout_s = 580 (the steps' limits
# add up to 8.5 minutes).
set -uo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
pack_dir=.gpu
stage=/tmp/gs-gpu  # where the pack is assembled here and unpacked there
bins=(build/tools/gradsphere build/tests/engine/test_engine build/tests/ops/test_ops)

pack() {
  grep -q "GS_HAVE_CUDA 1" build/gradsphere_config.h 2>/dev/null ||
    { echo "gpu_check pack: build/ is not a CUDA build (run bash tools/setup.sh with nvcc present)" >&2; exit 1; }
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" "$pack_dir"
  cp build/libgradsphere.so "$stage/lib/"
  for b in "${bins[@]}"; do cp "$b" "$stage/bin/"; done
  # Every resolved library but glibc's own and CUDA's (the GPU machine's toolkit provides those).
  ldd "${bins[@]}" build/libgradsphere.so | awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|ld-linux-x86-64)\.so|libcuda|libcudart|libcublas|libcufft|libgradsphere' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  strip --strip-unneeded "$stage"/bin/* "$stage"/lib/* 2>/dev/null || true
  # The copies must start from the pack alone (as they will there): a missing library shows here.
  LD_LIBRARY_PATH="$stage/lib:${CUDA_LIB:-/usr/local/cuda/lib64}" "$stage/bin/gradsphere" --help >/dev/null ||
    { echo "gpu_check pack: the packed gradsphere does not start" >&2; exit 1; }
  tar -C "$stage" -cJf "$pack_dir/pack.tar.xz" bin lib
  # The tests read data files under the source root compiled into them (GS_SOURCE_ROOT).
  echo "$repo_root" > "$pack_dir/source_root"
  du -sh "$pack_dir/pack.tar.xz"
}

run() {
  local results="${OUT:?gpu_check run: set OUT to the folder for the results}"
  # The device tool returns at most 8 files: the logs travel as one archive beside the summary.
  local out=/tmp/gs-gpu-logs
  rm -rf "$out" && mkdir -p "$out"
  local cuda_lib
  for cuda_lib in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [[ -e "$cuda_lib/libcublas.so.13" ]] && break
  done
  rm -rf "$stage" && mkdir -p "$stage" && tar -C "$stage" -xJf "$pack_dir/pack.tar.xz" ||
    { echo "gpu_check run: cannot unpack $pack_dir/pack.tar.xz (run pack here and carry .gpu)" >&2; return 1; }
  export LD_LIBRARY_PATH="$stage/lib:$cuda_lib:${LD_LIBRARY_PATH:-}"
  local source_root
  source_root="$(cat "$pack_dir/source_root")"
  if [[ "$source_root" != "$PWD" && ! -e "$source_root" ]]; then
    mkdir -p "$(dirname "$source_root")" && ln -s "$PWD" "$source_root"
  fi
  local status=0
  step() {  # step NAME COMMAND...: output to NAME.log, exit status to the summary
    local name="$1"; shift
    local t0=$SECONDS
    "$@" > "$out/$name.log" 2>&1
    local rc=$?
    printf '%-18s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" "$*" | tee -a "$out/summary.txt"
    (( rc == 0 )) || status=1
  }
  step nvidia-smi nvidia-smi
  # Limits that keep the whole run under 9 minutes: one device-tool command may run 10, and a
  # session has 15 minutes of device time in all, the machine's start included.
  step test_engine timeout 60 "$stage/bin/test_engine"
  step test_ops timeout 150 "$stage/bin/test_ops"
  step gradcheck timeout 100 "$stage/bin/gradsphere" gradcheck --device cuda
  step bench_engine timeout 80 "$stage/bin/gradsphere" bench engine --device cuda
  # The tiny training run of tests/tools/train_cli_test.sh on the GPU and on the CPU: the skill
  # tables (train_*.log) should agree to f32 rounding of the trajectory.
  step train_cuda timeout 60 "$stage/bin/gradsphere" train tests/tools/tiny.yaml --out /tmp/gs-train-cuda --overwrite --device cuda
  step train_cpu timeout 60 "$stage/bin/gradsphere" train tests/tools/tiny.yaml --out /tmp/gs-train-cpu --overwrite
  cp /tmp/gs-train-cuda/metrics.csv "$out/train_cuda_metrics.csv" 2>/dev/null
  cp /tmp/gs-train-cpu/metrics.csv "$out/train_cpu_metrics.csv" 2>/dev/null
  cp "$out/summary.txt" "$results/summary.txt"
  tar -C "$out" -czf "$results/logs.tar.gz" .
  return $status
}

case "${1:-}" in
  pack) pack ;;
  run) run ;;
  *) echo "usage: bash tools/gpu_check.sh pack|run" >&2; exit 2 ;;
esac
