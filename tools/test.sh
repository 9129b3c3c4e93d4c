#!/usr/bin/env bash
# The whole test suite on a fresh machine: packages, build, then ctest runs the
# runtime unit tests (GoogleTest) and the lit suite (dialects, passes,
# importer, CLI, and the end-to-end comparisons against PyTorch).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bash "$root/tools/setup.sh"
bash "$root/tools/build.sh" "$root/build"
cd "$root/build"
ctest --output-on-failure -j "$(nproc)"
