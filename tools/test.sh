#!/usr/bin/env bash
# The whole test suite on a fresh machine: packages, the release build and
# both tiers of its tests, then the sanitizer build and the fast tier under
# it, then every plan of both builds compared (tools/compare-plans.sh):
#   fast: the runtime unit tests (GoogleTest, collectives) and the lit tests
#         of the dialects, passes, importer and CLI (seconds); in the
#         sanitizer build also a 10 s smoke run of every fuzz target;
#   e2e:  the end-to-end comparisons against PyTorch and ONNX's node tests
#         (minutes).
#
#   bash tools/test.sh                      everything above
#   bash tools/test.sh fast|e2e             one tier of the release build
#   bash tools/test.sh --sanitize [fast|e2e]  the sanitizer build only
#       (clang 22, ASan + UBSan over all of fsdpc, no CUDA: build-asan/);
#       any sanitizer report fails the test that triggered it
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

tier_labels() {
  case "$1" in
    all) ;;
    fast|e2e) echo "-L $1" ;;
    *) echo "usage: tools/test.sh [--sanitize] [fast|e2e]" >&2; exit 2 ;;
  esac
}

run_release() {
  local labels
  labels="$(tier_labels "$1")"
  bash "$root/tools/build.sh" "$root/build"
  (cd "$root/build" && ctest --output-on-failure -j "$(nproc)" $labels)
}

run_sanitized() {
  local labels
  labels="$(tier_labels "$1")"
  bash "$root/tools/build.sh" --sanitize "$root/build-asan"
  # Leaks are reported with full stacks (the fast unwinder loses them in
  # libraries built without frame pointers), so that what Open MPI, its
  # plugins (kept loaded for their symbols) and OpenMP keep until exit can
  # be suppressed by library (tools/lsan.supp) while ours are not.
  export ASAN_OPTIONS="fast_unwind_on_malloc=0:halt_on_error=1"
  export LSAN_OPTIONS="suppressions=$root/tools/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  export OMPI_MCA_mca_base_component_disable_dlclose=1
  (cd "$root/build-asan" && ctest --output-on-failure -j "$(nproc)" $labels)
}

bash "$root/tools/setup.sh"
if [ "${1:-}" = "--sanitize" ]; then
  run_sanitized "${2:-all}"
elif [ -n "${1:-}" ]; then
  run_release "$1"
else
  run_release all
  run_sanitized fast
  # The same plans from the g++ and the clang build, byte for byte.
  bash "$root/tools/compare-plans.sh" "$root/build" "$root/build-asan"
fi
