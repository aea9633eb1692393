#!/usr/bin/env bash
# Installs the Debian packages gradsphere needs (only the missing ones), configures the Meson build
# directory once, and builds it. Safe to run again: with nothing changed it takes about a second.
#
#   BUILD_DIR   build directory, relative to the repository root or absolute (default: build)
#   MESON_ARGS  extra `meson setup` options, word-split (e.g. "-Dmpi=disabled -Dnative=false").
#               They are remembered in $BUILD_DIR/.gs-setup-args; when they change, the build
#               directory is deleted and configured afresh with exactly them (Meson keeps options
#               across --reconfigure and --wipe, so dropping an argument would otherwise not undo it).
#   BUILD_TARGETS  ninja targets to build, word-split (default: all)
#   GS_SKIP_APT=1  skip the package check (for machines that are not Debian).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
build_dir="${BUILD_DIR:-build}"
read -r -a meson_args <<< "${MESON_ARGS:-}"

log() { printf '[setup] %s\n' "$*"; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

packages=(meson ninja-build g++ pkg-config mpich libmpich-dev libeigen3-dev doctest-dev libfftw3-dev
          libyaml-cpp-dev libcli11-dev nlohmann-json3-dev libfmt-dev libnetcdf-dev libpng-dev libstb-dev libgoogle-perftools-dev)

# Step 1: Debian packages.
if [[ "${GS_SKIP_APT:-0}" == 1 ]]; then
  log "packages: skipped (GS_SKIP_APT=1)"
elif ! command -v dpkg-query >/dev/null 2>&1; then
  log "packages: dpkg-query not found (not Debian?), skipping the package check"
else
  missing=()
  for p in "${packages[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)"
    [[ "$status" == installed ]] || missing+=("$p")
  done
  if (( ${#missing[@]} == 0 )); then
    log "packages: all ${#packages[@]} installed"
  else
    if [[ "$(id -u)" == 0 ]]; then
      sudo=()
    elif command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      die "missing packages (${missing[*]}) and not root and no sudo; run as root: apt-get install -y --no-install-recommends ${missing[*]}"
    fi
    log "packages: installing ${missing[*]}"
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
  fi
fi

# CUDA: nvcc is usually installed outside PATH; Meson finds it (and builds the CUDA kernels, also
# without a GPU) when it is on PATH. -Dcuda=disabled in MESON_ARGS turns it off.
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
  export CUDA_PATH="${CUDA_PATH:-/usr/local/cuda}"
fi

# Step 2: configure (once, or again when MESON_ARGS changed).
args_file="$build_dir/.gs-setup-args"
wanted_args="${meson_args[*]}"
if [[ -f "$build_dir/build.ninja" && -f "$build_dir/meson-private/coredata.dat" ]]; then
  previous_args="$(cat "$args_file" 2>/dev/null || true)"
  if [[ -f "$args_file" && "$previous_args" == "$wanted_args" ]] || [[ ! -f "$args_file" && -z "$wanted_args" ]]; then
    log "configure: $build_dir already configured"
  elif [[ ! -f "$args_file" ]]; then
    # Configured by hand, not by this script: add the arguments on top rather than start over.
    log "configure: meson setup --reconfigure $build_dir $wanted_args"
    meson setup --reconfigure "$build_dir" "${meson_args[@]}"
  else
    log "configure: MESON_ARGS changed ('$previous_args' -> '$wanted_args'), fresh meson setup $build_dir"
    rm -rf -- "$build_dir"   # a Meson build directory (checked above), so nothing else is lost
    meson setup "$build_dir" "${meson_args[@]}"
    printf '%s' "$wanted_args" > "$args_file"
  fi
else
  if [[ -d "$build_dir/meson-private" ]]; then
    log "configure: $build_dir is half-configured, removing it"
    rm -rf -- "$build_dir"
  fi
  log "configure: meson setup $build_dir $wanted_args"
  meson setup "$build_dir" "${meson_args[@]}"
  printf '%s' "$wanted_args" > "$args_file"
fi

# Step 3: build.
read -r -a targets <<< "${BUILD_TARGETS:-}"
log "build: ninja -C $build_dir ${targets[*]}"
ninja -C "$build_dir" "${targets[@]}"
log "done: $build_dir is built"
