#!/usr/bin/env bash
# Installs every Debian package that the build, the demo and the tests need.
# Idempotent: packages already present are skipped, so re-running is cheap.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build ccache g++ pkg-config
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  libopenblas-dev libopenmpi-dev openmpi-bin
  libgtest-dev
  # the sanitizer build and its fuzz targets (clang 22 with ASan, UBSan,
  # libFuzzer and OpenMP: tools/build.sh --sanitize)
  clang-22 libclang-rt-22-dev libfuzzer-22-dev libomp-22-dev
  # reference oracle and example exports (run with /usr/bin/python3)
  python3-torch python3-torchvision python3-onnx python3-numpy
  # ONNX's own node tests for the conformance harness
  libonnx-testdata
  # torch must run on OpenBLAS, not the reference BLAS, for fair timings
  libopenblas0-pthread
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$pkg")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
