#!/usr/bin/env bash
# The CUDA checks of the CUDA backend issue as one prepared run for the device tool's GPU machine,
# which has nvcc, cuBLAS and cuFFT but none of gradsphere's other dependencies and no network.
#
#   bash tools/gpu_check.sh pack   here, after `bash tools/setup.sh` built the CUDA build (build/, or
#                                  BUILD_DIR as for setup.sh; the GPU host's CPU must run its -march):
#                                  copies the test and tool executables, libgradsphere.so and every
#                                  shared library they load except glibc's and CUDA's, stripped,
#                                  into .gpu/pack.tar.xz (git-ignored; about 30 MB, under the device
#                                  tool's 64 MiB), and checks that the copies start from the pack alone.
#                                  When torch-harmonics is installed here (the reference venv of
#                                  tools/compare_sht.py), its Python sources go into .gpu/python.
#   bash tools/gpu_check.sh run    there (device tool: carry [".gpu"], this command), writing
#                                  everything under $OUT, checks first, then measurements:
#                                  nvidia-smi, the engine and ops suites (the registry walk on CUDA:
#                                  each op in f64 and f32 against the CPU, gradcheck and
#                                  gradgradcheck in f64; the sphere kernels against the CPU),
#                                  `gradsphere gradcheck --device cuda` in both device forms
#                                  (ops/sphere/legendre/path.h), a tiny `gradsphere train --device
#                                  cuda` beside the same run on the CPU and a rollout from it, the
#                                  distributed suite's GPU cases (MPI staging, NCCL, the reducer) at
#                                  1 and 2 ranks and a 2-rank data-parallel train on the GPU, then
#                                  `gradsphere bench engine|sht|train --device cuda` (sht and train
#                                  in both forms) and tools/compare_cuda.py (torch-harmonics on the
#                                  same GPU, with the machine's torch).
# Each step's exit status is in $OUT/summary.txt, the logs and CSVs in $OUT/logs.tar.gz; the run
# exits non-zero if any step failed. Run it with the device tool's timeout_s = 580: every step has
# its own limit, cut to what is left of a 540 s budget (GS_GPU_BUDGET), and a step with under 10 s
# left is skipped and says so in the summary (checks run first, so only measurements are left out).
set -uo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
pack_dir=.gpu
stage=/tmp/gs-gpu  # where the pack is assembled here and unpacked there
build_dir="${BUILD_DIR:-build}"  # the CUDA build to pack (as tools/setup.sh's BUILD_DIR)
bins=("$build_dir/tools/gradsphere" "$build_dir/tests/engine/test_engine" "$build_dir/tests/ops/test_ops"
      "$build_dir/tests/distributed/test_distributed")
# MPICH's launcher, for the multi-rank GPU checks (the GPU machine has no MPICH of its own).
launcher=(/usr/bin/mpiexec.hydra /usr/bin/hydra_pmi_proxy)

# The torch_harmonics package folder of the first of GS_REF_PYTHON, /opt/gs-ref, /work/venv that has it.
python_with_torch_harmonics() {
  local py
  for py in "${GS_REF_PYTHON:-}" /opt/gs-ref/bin/python /work/venv/bin/python; do
    [[ -n "$py" && -x "$py" ]] || continue
    "$py" -c 'import os, importlib.util as u; print(os.path.dirname(u.find_spec("torch_harmonics").origin))' 2>/dev/null &&
      return 0
  done
}

pack() {
  grep -q "GS_HAVE_CUDA 1" "$build_dir/gradsphere_config.h" 2>/dev/null ||
    { echo "gpu_check pack: $build_dir/ is not a CUDA build (run bash tools/setup.sh with nvcc present)" >&2; exit 1; }
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" "$pack_dir"
  cp "$build_dir/libgradsphere.so" "$stage/lib/"
  for b in "${bins[@]}" "${launcher[@]}"; do cp "$b" "$stage/bin/"; done
  # Every resolved library but glibc's own and CUDA's (the GPU machine's toolkit provides those;
  # NCCL is loaded at run time, from the machine's own copy).
  ldd "${bins[@]}" "${launcher[@]}" "$build_dir/libgradsphere.so" | awk '/=> \// {print $3}' | sort -u |
    grep -Ev '/(libc|libm|libdl|librt|libpthread|libresolv|ld-linux-x86-64)\.so|libcuda|libcudart|libcublas|libcufft|libgradsphere' |
    while read -r lib; do cp -L "$lib" "$stage/lib/"; done
  strip --strip-unneeded "$stage"/bin/* "$stage"/lib/* 2>/dev/null || true
  # The copies must start from the pack alone (as they will there): a missing library shows here.
  LD_LIBRARY_PATH="$stage/lib:${CUDA_LIB:-/usr/local/cuda/lib64}" "$stage/bin/gradsphere" --help >/dev/null ||
    { echo "gpu_check pack: the packed gradsphere does not start" >&2; exit 1; }
  tar -C "$stage" -cJf "$pack_dir/pack.tar.xz" bin lib
  # torch-harmonics' Python sources for tools/compare_cuda.py (the GPU machine has torch, not it).
  rm -rf "$pack_dir/python"
  local th
  th="$(python_with_torch_harmonics)"
  if [[ -n "$th" ]]; then
    mkdir -p "$pack_dir/python"
    (cd "$(dirname "$th")" && find torch_harmonics -name '*.py' | tar -cf - -T -) | tar -C "$pack_dir/python" -xf -
    echo "torch-harmonics sources from $th"
  else
    echo "torch-harmonics not found (set GS_REF_PYTHON to a python that imports it): compare_cuda.py will be skipped there"
  fi
  # The tests read data files under the source root compiled into them (GS_SOURCE_ROOT): the build's
  # own, which differs from this checkout when BUILD_DIR is another clone's build.
  local built_from
  built_from="$(grep -o '"source": *"[^"]*"' "$build_dir/meson-info/meson-info.json" | sed 's/.*"\([^"]*\)"$/\1/')"
  echo "${built_from:-$repo_root}" > "$pack_dir/source_root"
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
  export LD_LIBRARY_PATH="$stage/lib:$cuda_lib:${LD_LIBRARY_PATH:-}" PATH="$stage/bin:$PATH"
  # The pack is built with -march=native here (meson option native): on a host CPU without this
  # machine's instruction sets every step would die of SIGILL. Say so once, before any step.
  "$stage/bin/gradsphere" --help > /dev/null 2>&1
  local started=$?
  if (( started == 132 )); then
    echo "gpu_check run: the packed gradsphere died of an illegal instruction: this host's CPU lacks an" \
      "instruction set of the machine that built the pack (-march=native). On that machine:" \
      "BUILD_DIR=build-portable MESON_ARGS=-Dnative=false bash tools/setup.sh, then" \
      "BUILD_DIR=build-portable bash tools/gpu_check.sh pack, and rerun." | tee "$results/summary.txt" >&2
    return 1
  elif (( started != 0 )); then
    echo "gpu_check run: the packed gradsphere does not start here (exit $started)" | tee "$results/summary.txt" >&2
    return 1
  fi
  # NCCL (loaded at run time): the toolkit's, else the one of the machine's torch (nvidia-nccl-cu13).
  if [[ -z "${GS_NCCL_LIBRARY:-}" ]]; then
    local nccl
    for nccl in "$cuda_lib/libnccl.so.2" \
        "$(python3 -c 'import nvidia.nccl as n, os; print(os.path.join(list(n.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)"; do
      [[ -n "$nccl" && -e "$nccl" ]] && { export GS_NCCL_LIBRARY="$nccl"; break; }
    done
  fi
  echo "NCCL library: ${GS_NCCL_LIBRARY:-none found}" | tee -a "$out/summary.txt"
  local source_root
  source_root="$(cat "$pack_dir/source_root")"
  if [[ "$source_root" != "$PWD" && ! -e "$source_root" ]]; then
    mkdir -p "$(dirname "$source_root")" && ln -s "$PWD" "$source_root"
  fi
  local status=0
  local deadline=$((SECONDS + ${GS_GPU_BUDGET:-540}))
  step() {  # step NAME LIMIT_S COMMAND...: output to NAME.log, exit status to the summary
    local name="$1" limit="$2"; shift 2
    local left=$((deadline - SECONDS))
    (( limit > left )) && limit=$left
    if (( limit < 10 )); then
      # A measurement left out is said, not failed: the checks come first and have run.
      printf '%-18s skipped: the budget is spent\n' "$name" | tee -a "$out/summary.txt"
      return
    fi
    local t0=$SECONDS
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    printf '%-18s rc=%-3s %4ss  %s\n' "$name" "$rc" "$((SECONDS - t0))" "$*" | tee -a "$out/summary.txt"
    (( rc == 0 )) || status=1
  }
  local gs="$stage/bin/gradsphere"
  step nvidia-smi 10 nvidia-smi
  # Checks first (the CUDA backend issue), then the measurements (the sphere kernels issue).
  step test_engine 60 "$stage/bin/test_engine"
  step test_ops 150 "$stage/bin/test_ops"
  step gradcheck 100 "$gs" gradcheck --device cuda
  # The same walk with the sphere ops' hand-written kernels (ops/sphere/legendre/path.h): their
  # values against the CPU, and their recorded backward, on the GPU.
  step gradcheck_kernels 100 env GS_DEVICE_SPHERE=kernels "$gs" gradcheck --device cuda
  # The tiny training run of tests/tools/train_cli_test.sh on the GPU and on the CPU: the skill
  # tables (train_*.log) should agree to f32 rounding of the trajectory.
  step train_cuda 60 "$gs" train tests/tools/tiny.yaml --out /tmp/gs-train-cuda --overwrite --device cuda
  step train_cpu 60 "$gs" train tests/tools/tiny.yaml --out /tmp/gs-train-cpu --overwrite
  step rollout_cuda 30 "$gs" rollout /tmp/gs-train-cuda/checkpoint.safetensors --steps 3 --out /tmp/gs-roll-cuda --device cuda
  cp /tmp/gs-train-cuda/metrics.csv "$out/train_cuda_metrics.csv" 2>/dev/null
  # The distributed layer on GPU tensors: the communicators (MPI staging, NCCL at one rank per
  # group) and the reducer, at one rank and at two sharing the GPU; then data-parallel training on
  # two ranks (which share the GPU, so MPI stages through the host).
  step dist_gpu 90 env GS_COMM_TIMEOUT=60 "$stage/bin/test_distributed" -tc='*GPU*,*NCCL*'
  step dist_gpu_mpi2 120 env GS_COMM_TIMEOUT=60 mpiexec.hydra -n 2 "$stage/bin/test_distributed" -tc='*GPU*,*NCCL*'
  step train_cuda_mpi2 120 env GS_COMM_TIMEOUT=60 mpiexec.hydra -n 2 "$gs" train tests/tools/tiny.yaml \
    --out /tmp/gs-train-cuda2 --overwrite --grid 2x1x1 --device cuda
  cp /tmp/gs-train-cuda2/metrics.csv "$out/train_cuda_mpi2_metrics.csv" 2>/dev/null
  cp /tmp/gs-train-cpu/metrics.csv "$out/train_cpu_metrics.csv" 2>/dev/null
  step bench_engine 60 "$gs" bench engine --device cuda
  step bench_sht 90 "$gs" bench sht --device cuda --csv "$out/bench_sht_cuda.csv"
  # The hand-written kernels beside the default GEMM form: the measurement that picks the default
  # (ops/sphere/legendre/path.h).
  step bench_sht_kernels 90 env GS_DEVICE_SPHERE=kernels "$gs" bench sht --device cuda --csv "$out/bench_sht_cuda_kernels.csv"
  step bench_train 90 "$gs" bench train --device cuda --csv "$out/bench_train_cuda.csv"
  step bench_train_kernels 90 env GS_DEVICE_SPHERE=kernels "$gs" bench train --device cuda --csv "$out/bench_train_cuda_kernels.csv"
  if [[ -d "$pack_dir/python/torch_harmonics" ]]; then
    export PYTHONPATH="$PWD/$pack_dir/python${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
    step compare_sht 60 python3 tools/compare_cuda.py sht --gs-csv "$out/bench_sht_cuda.csv"
    step compare_train 60 python3 tools/compare_cuda.py train --gs-csv "$out/bench_train_cuda.csv"
  else
    echo "compare_*           skipped: no torch-harmonics in $pack_dir/python (see pack)" | tee -a "$out/summary.txt"
  fi
  cp "$out/summary.txt" "$results/summary.txt"
  tar -C "$out" -czf "$results/logs.tar.gz" .
  return $status
}

case "${1:-}" in
  pack) pack ;;
  run) run ;;
  *) echo "usage: bash tools/gpu_check.sh pack|run" >&2; exit 2 ;;
esac
