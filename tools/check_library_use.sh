#!/usr/bin/env bash
# Checks that gradsphere works as a library in a project outside this tree, the two ways the top
# README.md ("Use it from your own project") shows, with the README's own hvp.cpp and meson.build
# (cut from README.md, so the README cannot drift from what is tested).
#
#   tools/check_library_use.sh [install] [subproject-setup] [subproject]   (default: install subproject-setup)
#
#   install          stages `meson install` of BUILD_DIR (already built; nothing is rebuilt) and
#                    checks it: every header of the tree installed; the pkg-config cflags name no
#                    private dependency; the library finds all it needs (ldd) and needs CUDA only
#                    in a CUDA build. Then compiles hvp.cpp with `pkg-config --cflags --libs
#                    gradsphere` alone (and gradsphere-tcmalloc, which must bring tcmalloc), runs
#                    it and checks its output. About 20 s.
#   subproject-setup configures a parent project (buildtype=debug) whose subprojects/gradsphere is
#                    this tree: the dependency resolves, every compile command of the library is
#                    optimised (-O3, no -O0, -g or -G) while the parent's own is -O0 -g, and with
#                    -Dgradsphere:subproject_build=parent the library has the parent's flags. Seconds.
#   subproject       builds that parent (CPU only: -Dgradsphere:cuda=disabled, mpi=disabled) and
#                    runs hvp, then stages its install and checks it as above (a CPU-only library:
#                    no CUDA library needed). Compiles the whole library: minutes. Not run by CI.
#
#   BUILD_DIR  the build directory for `install` (default: build)
#   GS_KEEP=1  keep the scratch directory (printed) instead of deleting it
# Exits non-zero when a check fails; the last line is `library use: ok` or `library use: FAILED`.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
build_dir="${BUILD_DIR:-build}"
modes=("$@")
(( ${#modes[@]} > 0 )) || modes=(install subproject-setup)

# nvcc is usually outside PATH (as in tools/setup.sh): Meson finds CUDA when it is on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

scratch="$(mktemp -d "${TMPDIR:-/tmp}/gs-library-use.XXXXXX")"
if [[ "${GS_KEEP:-0}" == 1 ]]; then
  echo "[library] scratch directory kept: $scratch"
else
  trap 'rm -rf "$scratch"' EXIT
fi
failures=0
log() { printf '[library] %s\n' "$*"; }
fail() { printf '[library] FAILED: %s\n' "$*"; failures=$(( failures + 1 )); }
expected_output='Hv = 1 -6 -4'

# The fenced block of language $1 after the README's marker line.
readme_block() {
  awk -v lang="$1" '
    /tools\/check_library_use.sh builds this program/ { armed = 1 }
    armed && !inside && $0 == "```" lang { inside = 1; next }
    inside && $0 == "```" { exit }
    inside { print }' README.md
}
readme_block cpp > "$scratch/hvp.cpp"
readme_block meson > "$scratch/meson.build"
if [[ ! -s "$scratch/hvp.cpp" || ! -s "$scratch/meson.build" ]]; then
  echo "[library] README.md has no cpp and meson block after the marker line"; exit 1
fi

# Stages `meson install` of build directory $1 under $2 and checks what was installed. Sets
# staged_prefix and PKG_CONFIG_PATH (gradsphere's .pc files, prefix rewritten to the stage).
stage_and_check_install() {
  local from="$1" stage="$2"
  meson install -C "$from" --no-rebuild --quiet --destdir "$stage" >"$scratch/install.log" 2>&1 \
    || { cat "$scratch/install.log"; fail "meson install -C $from"; return 1; }
  local pc
  pc="$(find "$stage" -name gradsphere.pc | head -n 1)"
  [[ -n "$pc" ]] || { fail "no gradsphere.pc installed"; return 1; }
  local prefix
  prefix="$(sed -n 's/^prefix=//p' "$pc")"
  staged_prefix="$stage$prefix"
  mkdir -p "$scratch/pc"
  for f in "$(dirname "$pc")"/gradsphere*.pc; do
    # awk, not sed: the prefix is data (a TMPDIR with '|' or '&' must not change the substitution).
    awk -v p="$staged_prefix" '/^prefix=/ { print "prefix=" p; next } { print }' "$f" > "$scratch/pc/$(basename "$f")"
  done
  export PKG_CONFIG_PATH="$scratch/pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

  # Every header of the library's folders is installed (the list is taken when Meson configures).
  local inc="$staged_prefix/include/gradsphere" missing
  missing="$(cd "$repo_root" && find engine ops distributed models -name '*.h' | LC_ALL=C sort \
    | while read -r h; do [[ -f "$inc/$h" ]] || echo "$h"; done)"
  if [[ -n "$missing" ]]; then
    fail "headers not installed (a header added since Meson last configured: meson setup --reconfigure $from): $(tr '\n' ' ' <<< "$missing")"
  fi
  [[ -f "$inc/gradsphere.h" && -f "$inc/gradsphere_config.h" ]] || fail "gradsphere.h or gradsphere_config.h not installed"

  # A user's compile needs fmt only: no private dependency's flags in the cflags.
  local cflags
  cflags="$(pkg-config --cflags gradsphere)" || { fail "pkg-config --cflags gradsphere"; return 1; }
  if grep -qiE 'eigen|mpich|mpi/|netcdf|fftw|cuda' <<< "$cflags"; then fail "gradsphere.pc cflags leak a private dependency: $cflags"; fi

  # The installed library finds what it needs without help, and needs CUDA only in a CUDA build.
  local lib libdir needed
  libdir="$(pkg-config --variable=libdir gradsphere)" || { fail "pkg-config --variable=libdir gradsphere"; return 1; }
  lib="$libdir/libgradsphere.so"
  [[ -f "$lib" ]] || { fail "no $lib"; return 1; }
  # Outputs are captured before they are searched: `cmd | grep -q` under pipefail can fail on
  # SIGPIPE when grep stops reading early.
  local deps dynamic runpath
  deps="$(env -u LD_LIBRARY_PATH ldd "$lib")" || { fail "ldd $lib"; return 1; }
  if grep -q 'not found' <<< "$deps"; then
    fail "the installed library misses dependencies: $(grep 'not found' <<< "$deps" | tr -s ' \t' ' ')"
  fi
  dynamic="$(readelf -d "$lib")" || { fail "readelf -d $lib"; return 1; }
  needed="$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' <<< "$dynamic" | tr '\n' ' ')"
  runpath="$(sed -n 's/.*(R[UN]*PATH).*\[\(.*\)\]/\1/p' <<< "$dynamic")"
  if grep -q '^#define GS_HAVE_CUDA 1' "$inc/gradsphere_config.h"; then
    log "installed: a CUDA build; needs $needed; RUNPATH: $runpath"
  elif grep -qE 'libcu(da|dart|blas|fft)' <<< "$needed"; then
    fail "a build without CUDA needs CUDA libraries: $needed"
  else
    log "installed: a CPU-only build; needs $needed (no CUDA library)"
  fi
  local build_abs
  build_abs="$(cd "$from" && pwd)"
  if [[ -n "$runpath" ]] && { grep -qF "$repo_root" <<< "$runpath" || grep -qF "$build_abs" <<< "$runpath"; }; then
    fail "the installed library's RUNPATH points into the source or build tree: $runpath"
  fi
}

# Runs program $1 (with LD_LIBRARY_PATH $2, may be empty) and checks its output.
run_hvp() {
  local out
  if ! out="$(LD_LIBRARY_PATH="$2" "$1" 2>&1)"; then fail "$1 exited with an error: $out"; return; fi
  if [[ "$out" == "$expected_output" ]]; then log "$(basename "$1") printed '$out'"; else fail "$1 printed '$out', expected '$expected_output'"; fi
}

check_install() {
  local start=$SECONDS
  [[ -f "$build_dir/build.ninja" ]] || { fail "$build_dir is not a configured build directory (bash tools/setup.sh)"; return; }
  log "install: staging meson install -C $build_dir"
  stage_and_check_install "$build_dir" "$scratch/stage" || return
  local libdir
  libdir="$(pkg-config --variable=libdir gradsphere)" || { fail "pkg-config --variable=libdir gradsphere"; return; }
  # Exactly the README's command line (the library is not on the loader's path: LD_LIBRARY_PATH).
  log "install: c++ hvp.cpp \$(pkg-config --cflags --libs gradsphere) -o hvp"
  # shellcheck disable=SC2046
  c++ "$scratch/hvp.cpp" $(pkg-config --cflags --libs gradsphere) -o "$scratch/hvp" || { fail "compiling hvp.cpp with pkg-config gradsphere"; return; }
  run_hvp "$scratch/hvp" "$libdir"
  if pkg-config --exists gradsphere-tcmalloc; then
    # shellcheck disable=SC2046
    c++ "$scratch/hvp.cpp" $(pkg-config --cflags --libs gradsphere-tcmalloc) -o "$scratch/hvp_tcmalloc" \
      || { fail "compiling hvp.cpp with pkg-config gradsphere-tcmalloc"; return; }
    grep -q 'NEEDED.*libtcmalloc' <<< "$(readelf -d "$scratch/hvp_tcmalloc")" || fail "gradsphere-tcmalloc did not link tcmalloc"
    run_hvp "$scratch/hvp_tcmalloc" "$libdir"
  else
    log "install: no gradsphere-tcmalloc.pc (a build without tcmalloc)"
  fi
  log "install: done, $(( SECONDS - start ))s"
}

# A parent project under $scratch/parent whose subprojects/gradsphere is this tree.
make_parent() {
  local parent="$scratch/parent"
  mkdir -p "$parent/subprojects"
  cp "$scratch/hvp.cpp" "$scratch/meson.build" "$parent/"
  ln -sfn "$repo_root" "$parent/subprojects/gradsphere"
  echo "$parent"
}

# Checks the compile commands of build directory $1: the library's must (want=release) or must
# not (want=parent) be optimised, the parent's hvp.cpp must be -O0 -g.
check_compile_commands() {
  python3 - "$1/compile_commands.json" "$2" <<'EOF'
import json, shlex, sys
commands, want = json.load(open(sys.argv[1])), sys.argv[2]
ours = [c for c in commands if 'subprojects/gradsphere/' in c['file']]
parent = [c for c in commands if c['file'].endswith('hvp.cpp')]
bad = []
for c in ours:
    args = set(shlex.split(c['command']))
    debug_flags = args & {'-O0', '-g', '-G'}
    if want == 'release' and (debug_flags or '-O3' not in args):
        bad.append(f"{c['file']}: {sorted(debug_flags) or 'no -O3'}")
    if want == 'parent' and not debug_flags:
        bad.append(f"{c['file']}: no -O0/-g/-G")
for c in parent:
    args = set(shlex.split(c['command']))
    if not {'-O0', '-g'} <= args:
        bad.append(f"{c['file']} (the parent's): not -O0 -g")
cuda = sum(c['file'].endswith('.cu') for c in ours)
print(f"{len(ours)} library compile commands ({cuda} CUDA), {len(parent)} of the parent; "
      f"{'all as wanted' if not bad else str(len(bad)) + ' not as wanted: ' + '; '.join(bad[:5])}")
sys.exit(1 if bad or not ours or not parent else 0)
EOF
}

check_subproject_setup() {
  local start=$SECONDS parent
  parent="$(make_parent)"
  # --force-fallback-for: use the subproject even where a gradsphere.pc is installed.
  log "subproject-setup: meson setup --buildtype=debug (parent), the library's flags"
  if ! meson setup "$parent/build" "$parent" --buildtype=debug --force-fallback-for=gradsphere >"$scratch/setup.log" 2>&1; then
    tail -n 30 "$scratch/setup.log"; fail "meson setup of the parent project"; return
  fi
  grep -q 'Dependency gradsphere found: YES' "$scratch/setup.log" || fail "the parent's dependency('gradsphere') did not resolve to the subproject"
  local line
  if line="$(check_compile_commands "$parent/build" release)"; then log "subproject-setup: $line"; else fail "subproject-setup (release): $line"; fi
  log "subproject-setup: -Dgradsphere:subproject_build=parent"
  if ! meson setup "$parent/build-parent" "$parent" --buildtype=debug --force-fallback-for=gradsphere \
      -Dgradsphere:subproject_build=parent >"$scratch/setup-parent.log" 2>&1; then
    tail -n 30 "$scratch/setup-parent.log"; fail "meson setup of the parent project with subproject_build=parent"; return
  fi
  if line="$(check_compile_commands "$parent/build-parent" parent)"; then log "subproject-setup: $line"; else fail "subproject-setup (parent): $line"; fi
  log "subproject-setup: done, $(( SECONDS - start ))s"
}

check_subproject() {
  local start=$SECONDS parent
  parent="$(make_parent)"
  log "subproject: meson setup --buildtype=debug -Dgradsphere:cuda=disabled -Dgradsphere:mpi=disabled"
  if ! meson setup "$parent/build-full" "$parent" --buildtype=debug --force-fallback-for=gradsphere \
      -Dgradsphere:cuda=disabled -Dgradsphere:mpi=disabled >"$scratch/setup-full.log" 2>&1; then
    tail -n 30 "$scratch/setup-full.log"; fail "meson setup of the parent project"; return
  fi
  log "subproject: ninja (the whole library)"
  local build_start=$SECONDS
  if ! ninja -C "$parent/build-full" >"$scratch/ninja.log" 2>&1; then
    tail -n 40 "$scratch/ninja.log"; fail "building the parent project"; return
  fi
  log "subproject: built in $(( SECONDS - build_start ))s"
  run_hvp "$parent/build-full/hvp" ""
  if grep -q 'NEEDED.*libtcmalloc' <<< "$(readelf -d "$parent/build-full/hvp")"; then
    log "subproject: hvp links tcmalloc"
  else
    log "subproject: hvp does not link tcmalloc (not found, or -Dgradsphere:allocator=system)"
  fi
  stage_and_check_install "$parent/build-full" "$scratch/stage-subproject" || return
  log "subproject: done, $(( SECONDS - start ))s"
}

for mode in "${modes[@]}"; do
  case "$mode" in
    install) check_install ;;
    subproject-setup) check_subproject_setup ;;
    subproject) check_subproject ;;
    *) echo "usage: $0 [install] [subproject-setup] [subproject]"; exit 2 ;;
  esac
done

if (( failures > 0 )); then
  echo "library use: FAILED ($failures)"
  exit 1
fi
echo "library use: ok"
