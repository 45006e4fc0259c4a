#!/usr/bin/env bash
# Builds every libFuzzer target (fuzz/fuzz_*.cpp) with clang in build-fuzz/ and runs each one
# for a bounded time. A target that finds a crash, a sanitizer report, a leak or an escaping
# exception stops and leaves the input in build-fuzz/artifacts/<target>/; the script then
# exits non-zero after running the remaining targets.
#
#   scripts/fuzz.sh                 every target, FUZZ_SECONDS each (default 60)
#   scripts/fuzz.sh fuzz_foo ...    only these targets
#   FUZZ_SECONDS=600 JOBS=2 scripts/fuzz.sh
#
# Per target, if present: seeds in fuzz/seeds/<target>/ and a dictionary fuzz/<target>.dict.
# The growing corpus is kept in build-fuzz/corpus/<target>/ between runs.
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_EACH="${FUZZ_SECONDS:-60}"
BUILD="${FUZZ_BUILD_DIR:-build-fuzz}"
JOBS="${JOBS:-2}"

if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for src in fuzz/fuzz_*.cpp; do
    [ -e "$src" ] || continue
    targets+=("$(basename "$src" .cpp)")
  done
fi
if [ "${#targets[@]}" -eq 0 ]; then
  echo "fuzz.sh: no fuzz/fuzz_*.cpp targets found" >&2
  exit 1
fi

mkdir -p "$BUILD"
cmake -S . -B "$BUILD" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DHYLENS_BUILD_FUZZERS=ON -DHYLENS_BUILD_TESTS=OFF -DHYLENS_BUILD_EXAMPLES=OFF \
      -DHYLENS_BUILD_BENCHMARKS=OFF -DHYLENS_NATIVE=OFF > "$BUILD/configure.log" 2>&1 \
  || { cat "$BUILD/configure.log"; exit 1; }
cmake --build "$BUILD" --target "${targets[@]}" -j "$JOBS"

# UBSan reports must count as failures, not scroll past.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"

failed=()
for t in "${targets[@]}"; do
  corpus="$BUILD/corpus/$t"
  artifacts="$BUILD/artifacts/$t"
  mkdir -p "$corpus" "$artifacts"
  args=(-max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$artifacts/")
  [ -f "fuzz/$t.dict" ] && args+=(-dict="fuzz/$t.dict")
  dirs=("$corpus")
  [ -d "fuzz/seeds/$t" ] && dirs+=("fuzz/seeds/$t")
  echo "=== $t: ${SECONDS_EACH}s"
  log="$BUILD/$t.log"
  if "$BUILD/fuzz/$t" "${args[@]}" "${dirs[@]}" > "$log" 2>&1; then
    grep -E "^(stat::|Done)|cov:" "$log" | tail -n 8
  else
    tail -n 40 "$log"
    echo "=== $t FAILED (log: $log, inputs: $artifacts/)"
    failed+=("$t")
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz.sh: failures in: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz.sh: ${#targets[@]} target(s) ran ${SECONDS_EACH}s each without a finding"
