#!/usr/bin/env bash
# Builds and runs every test: the Release suite (tests, examples, benchmarks compiled,
# -Wall -Wextra -Werror; the suites, the examples and the benchmarks at -O1, the hylens tool and
# the Python module at -O3; the Python module's pytest suite too; the hylens tool with MPI,
# so `mpirun -np 2 hylens experiment` is checked against one process), built as it installs,
# without -march=native (the kernels' run-time SIMD dispatch as an includer without arch flags
# gets it), then the whole library suite again under ASan + UBSan (at -Og -g1: half the compile
# time of -O1 -g, the same run time, line numbers in the reports), built with -march=native so
# that the code a native build compiles is tested too.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DHYLENS_BUILD_TESTS=ON -DHYLENS_BUILD_EXAMPLES=ON \
      -DHYLENS_BUILD_BENCHMARKS=ON -DHYLENS_BUILD_PYTHON=ON -DHYLENS_WITH_MPI=ON -DHYLENS_EXAMPLES_OPT=-O1 \
      > build.log 2>&1 || { cat build.log; exit 1; }
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS"

if [ "${HYLENS_SKIP_SANITIZERS:-0}" != "1" ]; then
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-Og -g1" -DHYLENS_TEST_OPT=-Og \
        -DHYLENS_SANITIZE=ON -DHYLENS_NATIVE=ON -DHYLENS_BUILD_TESTS=ON -DHYLENS_BUILD_EXAMPLES=OFF -DHYLENS_BUILD_BENCHMARKS=OFF \
        -DHYLENS_COMPILE_CHECKS=OFF \
        > build-asan.log 2>&1 || { cat build-asan.log; exit 1; }
  cmake --build build-asan -j "$JOBS"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$JOBS"
fi
