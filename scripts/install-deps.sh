#!/usr/bin/env bash
# Installs the Debian 12 packages hylens needs to build its tests, examples and benchmarks, and
# any further packages named as arguments (scripts/test-aarch64.sh: the cross toolchain).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
PKGS="build-essential cmake pkg-config libxtensor-dev libxsimd-dev xtl-dev libopenblas-dev \
doctest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev libpcre2-dev libutf8proc-dev liblapacke-dev liblapack-dev libcld2-dev \
pybind11-dev python3-dev python3-numpy python3-pytest python3-matplotlib python3-pandas libopenmpi-dev openmpi-bin \
zlib1g-dev libxxhash-dev debian-policy $*"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y --no-install-recommends $missing
fi
