#!/usr/bin/env bash
# Decode (or prefill) speed of revisions of the headers side by side in one process
# (tools/ab/README.md).
#
#   tools/ab/ab-decode.sh REV REV [REV...] -- --model DIR [-t N] [-r N] [-n N | -p N] [--mapped] [--json]
#
# REV is a git revision (its include/ tree) or "." (the working tree's include/). Each is built
# into a shared object from tools/ab/decode_build.cpp with the Release build's flags without
# -march=native (HYLENS_AB_OPT overrides -O3; CXX the compiler), kept in $HYLENS_AB_DIR (default
# build-ab/) by commit (rebuilt when decode_build.cpp is newer), and the driver hylens_ab runs
# them interleaved with the options after --.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage() { sed -n '5,5p' "$0" | sed 's/^#   /usage: /' >&2; exit 2; }
revs=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do revs+=("$1"); shift; done
[ $# -gt 0 ] || usage
shift
[ ${#revs[@]} -ge 2 ] || usage
out="${HYLENS_AB_DIR:-build-ab}"
mkdir -p "$out"
CXX="${CXX:-g++}"
FLAGS=(-std=c++20 "${HYLENS_AB_OPT:--O3}" -DNDEBUG -DXTENSOR_USE_XSIMD -ffp-contract=off -fPIC -shared
       -fvisibility=hidden -fvisibility-inlines-hidden -pthread)

if [ ! -x "$out/hylens_ab" ] || [ tools/ab/ab_decode.cpp -nt "$out/hylens_ab" ]; then
  "$CXX" -std=c++20 -O2 -o "$out/hylens_ab" tools/ab/ab_decode.cpp -ldl
fi

sos=()
pids=()
declare -A building=()
for rev in "${revs[@]}"; do
  if [ "$rev" = "." ]; then
    tree=include
    so="$out/worktree.so"
    [ -n "${building[$so]:-}" ] || rm -f "$so"
  else
    sha=$(git rev-parse --verify --quiet "$rev^{commit}") || { echo "ab-decode: no revision $rev" >&2; exit 2; }
    so="$out/$sha.so"
    tree="$out/src/$sha/include"
    if [ ! -d "$tree" ]; then  # extracted beside, then moved: never a partial tree
      rm -rf "$out/src/$sha.tmp" && mkdir -p "$out/src/$sha.tmp"
      git archive "$sha" include | tar -x -C "$out/src/$sha.tmp"
      mkdir -p "$out/src/$sha" && mv "$out/src/$sha.tmp/include" "$tree" && rm -rf "$out/src/$sha.tmp"
    fi
  fi
  sos+=("$so")
  echo "ab-decode: $rev = $so" >&2
  if { [ ! -f "$so" ] || [ tools/ab/decode_build.cpp -nt "$so" ]; } && [ -z "${building[$so]:-}" ]; then
    building[$so]=1
    # to a temporary name first: a failed build leaves nothing a later run would take as built
    ( "$CXX" "${FLAGS[@]}" -I"$tree" -o "$so.tmp" tools/ab/decode_build.cpp -lopenblas -llapack && mv "$so.tmp" "$so" ) &
    pids+=($!)
  fi
done
for p in "${pids[@]}"; do wait "$p"; done
exec "$out/hylens_ab" "$@" "${sos[@]}"
