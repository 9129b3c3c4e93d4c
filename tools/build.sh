#!/usr/bin/env bash
# Configures and builds fsdpc into build/ (or $1). Used by test.sh and demo.sh.
#
#   bash tools/build.sh [DIR]              the release build (build/)
#   bash tools/build.sh --sanitize [DIR]   the sanitizer build (build-asan/):
#       clang 22 with ASan + UBSan over everything we compile, no CUDA, and
#       the libFuzzer targets (tools/test.sh --sanitize, tools/fuzz.sh)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
sanitize=0
if [ "${1:-}" = "--sanitize" ]; then
  sanitize=1
  shift
fi
jobs="$(nproc)"
if [ "$sanitize" = 1 ]; then
  build="${1:-$root/build-asan}"
  if [ ! -f "$build/build.ninja" ]; then
    CC=clang-22 CXX=clang++-22 cmake -G Ninja -S "$root" -B "$build" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DFSDPC_SANITIZE=ON -DFSDPC_FUZZ=ON -DFSDPC_CUDA=OFF \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
      -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
  fi
else
  build="${1:-$root/build}"
  if [ ! -f "$build/build.ninja" ]; then
    cmake -G Ninja -S "$root" -B "$build" \
      -DCMAKE_BUILD_TYPE=Release \
      -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
      -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit
  fi
fi
ninja -C "$build" -j "$jobs"
