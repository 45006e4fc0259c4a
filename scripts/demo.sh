#!/usr/bin/env bash
# Builds the examples and runs the main demo on the small model shipped in tests/golden.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-demo -DCMAKE_BUILD_TYPE=Release -DHYLENS_BUILD_TESTS=OFF -DHYLENS_BUILD_EXAMPLES=ON > build-demo.log 2>&1 \
  || { cat build-demo.log; exit 1; }
cmake --build build-demo --target cache_surgery_demo hylens_cli -j "$(nproc)"
./build-demo/examples/cache_surgery_demo "$@"
