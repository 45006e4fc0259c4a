#!/usr/bin/env bash
# Cross-builds the test suite, the examples and the hylens tool for 64-bit Arm (aarch64) on a
# Debian 12 x86-64 machine and runs every test under QEMU user-mode emulation
# (cmake/toolchains/aarch64-linux-gnu.cmake). On aarch64 the kernels' baseline level is NEON (GCC
# vector extensions) and no x86 level exists, so this checks that the library builds without the
# x86 code paths and computes the same results there. It checks correctness, not speed: QEMU
# runs the code 10-50x slower than an Arm CPU would.
#
# usage: bash scripts/test-aarch64.sh      (as root, or with sudo; JOBS=N for the build)
# env: HYLENS_AARCH64_TESTS=REGEX  only the ctest tests matching REGEX (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-$(nproc)}"
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi

# The native packages (headers, cmake) and the arm64 libraries beside them (Debian multiarch).
# libcld2-dev cannot be installed for two architectures at once (installing the arm64 one
# removes the native one): only its arm64 runtime library, named to cmake below.
dpkg --print-foreign-architectures | grep -qx arm64 || $SUDO dpkg --add-architecture arm64
bash scripts/install-deps.sh g++-aarch64-linux-gnu qemu-user libopenblas-dev:arm64 liblapacke-dev:arm64 \
  liblapack-dev:arm64 libpcre2-dev:arm64 libutf8proc-dev:arm64 libcld2-0:arm64 zlib1g-dev:arm64 libxxhash-dev:arm64

# Release, no -march (there is none to give a cross compiler here), the compile-time checks
# (standalone headers, compile-fail) left to the native suite: they do not depend on the target.
cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
      -DCMAKE_BUILD_TYPE=Release -DHYLENS_NATIVE=OFF -DHYLENS_BUILD_TESTS=ON -DHYLENS_BUILD_EXAMPLES=ON \
      -DHYLENS_EXAMPLES_OPT=-O1 -DHYLENS_COMPILE_CHECKS=OFF \
      -DHYLENS_CLD2_LIBRARY=/usr/lib/aarch64-linux-gnu/libcld2.so.0 \
      > build-aarch64.log 2>&1 || { cat build-aarch64.log; exit 1; }
cmake --build build-aarch64 -j "$JOBS"
ctest --test-dir build-aarch64 --output-on-failure -j "$JOBS" ${HYLENS_AARCH64_TESTS:+-R "$HYLENS_AARCH64_TESTS"}
