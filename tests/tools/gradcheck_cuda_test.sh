#!/usr/bin/env bash
# `gradsphere gradcheck --device cuda`: on a machine with a usable GPU every registry op with CUDA
# kernels must pass gradcheck there and agree with the CPU; without one the command must refuse
# with the driver's reason (exit 1), and the test reports itself skipped (exit 77) saying why.
set -uo pipefail
exe="$1"
out="$("$exe" gradcheck --device cuda 2>&1)"
rc=$?
printf '%s\n' "$out" | tail -n 40
if (( rc == 1 )) && grep -q "cuda:0 is not available" <<< "$out"; then
  echo "SKIP: no usable CUDA device ($(grep -o 'not available: .*' <<< "$out" | head -n 1))"
  exit 77
fi
exit $rc
