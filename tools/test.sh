#!/usr/bin/env bash
# The whole test suite on a fresh machine: packages, build, then ctest runs
# both tiers:
#   fast: the runtime unit tests (GoogleTest, collectives) and the lit tests
#         of the dialects, passes, importer and CLI (seconds);
#   e2e:  the end-to-end comparisons against PyTorch and ONNX's node tests
#         (minutes).
# `bash tools/test.sh fast` or `bash tools/test.sh e2e` runs one tier.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tier="${1:-all}"
case "$tier" in
  all) label=() ;;
  fast|e2e) label=(-L "$tier") ;;
  *) echo "usage: tools/test.sh [fast|e2e]" >&2; exit 2 ;;
esac
bash "$root/tools/setup.sh"
bash "$root/tools/build.sh" "$root/build"
cd "$root/build"
ctest --output-on-failure -j "$(nproc)" "${label[@]}"
