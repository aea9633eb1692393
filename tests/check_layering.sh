#!/usr/bin/env bash
# Fails when a folder includes a header from a folder above it. Dependencies point one way
# (DESIGN.md): engine <- ops <- distributed <- models <- tools.
# Usage: tests/check_layering.sh [REPO_ROOT]   (default: the folder above this script)
set -euo pipefail

root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$root"

layers=(engine ops distributed models tools)
violations=0
for i in "${!layers[@]}"; do
  dir="${layers[$i]}"
  forbidden=("${layers[@]:$((i + 1))}")
  (( ${#forbidden[@]} == 0 )) && continue
  [[ -d "$dir" ]] || continue
  pattern="^[[:space:]]*#[[:space:]]*include[[:space:]]*[\"<]($(IFS='|'; echo "${forbidden[*]}"))/"
  hits="$(grep -rnE --include='*.h' --include='*.hpp' --include='*.cuh' --include='*.inl' \
            --include='*.cpp' --include='*.cc' --include='*.cu' "$pattern" "$dir" || true)"
  if [[ -n "$hits" ]]; then
    echo "layering: $dir/ may not include from ${forbidden[*]}:"
    printf '%s\n' "$hits" | sed 's/^/  /'
    violations=$(( violations + $(printf '%s\n' "$hits" | wc -l) ))
  fi
done

if (( violations > 0 )); then
  echo "layering: $violations forbidden include(s)"
  exit 1
fi
echo "layering: ok (engine <- ops <- distributed <- models <- tools)"
