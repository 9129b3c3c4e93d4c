#!/usr/bin/env bash
# Builds the libFuzzer targets of test/fuzz (clang, ASan + UBSan; the runtime
# only, no MLIR, no CUDA) in build-fuzz/, writes a seed corpus for each, and
# runs every target for SECONDS (default 20) on it:
#
#   bash tools/fuzz.sh [SECONDS]        (the test suite runs it with 10)
#
# Each run prints libFuzzer's last status line (executions, coverage) and
# fails on the first crash, leak, sanitizer report or timeout; the input that
# caused it is left in build-fuzz/crashes/. A longer run: bash tools/fuzz.sh 600.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-20}"
out="$root/build-fuzz"
if ! command -v clang++ > /dev/null; then
  echo "fuzz: clang++ not found; install clang to build the fuzz targets" >&2
  exit 1
fi
if [ ! -f "$out/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S "$root" -B "$out" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DFSDPC_BUILD_COMPILER=OFF -DFSDPC_BUILD_TESTS=OFF -DFSDPC_CUDA=OFF -DFSDPC_FUZZ=ON > /dev/null
fi
ninja -C "$out" -j "$(nproc)" fuzz-npy fuzz-safetensors fuzz-plan > /dev/null

# Seeds: small valid files of each kind (numpy's own .npy, a safetensors file
# written by hand, and plans fsdpc compiled when the main build has it).
seeds="$out/seeds"
rm -rf "$seeds" && mkdir -p "$seeds/npy" "$seeds/safetensors" "$seeds/plan" "$out/crashes"
/usr/bin/python3 - "$seeds" <<'PY'
import json, struct, sys
import numpy as np
seeds = sys.argv[1]
for i, array in enumerate([np.arange(6, dtype=np.float32).reshape(2, 3), np.array([3, -1], np.int64),
                           np.zeros((0,), np.float32), np.ones((2, 1, 2), np.float16), np.array(7, np.int32)]):
    np.save("%s/npy/seed%d.npy" % (seeds, i), array)
data = np.arange(4, dtype=np.float32).tobytes() + np.arange(2, dtype=np.int64).tobytes()
header = json.dumps({"__metadata__": {"rank": "0"},
                     "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
                     "step": {"dtype": "I64", "shape": [2], "data_offsets": [16, 32]}}).encode()
header += b" " * (-len(header) % 8)
open("%s/safetensors/seed0.safetensors" % seeds, "wb").write(struct.pack("<Q", len(header)) + header + data)
PY
if [ -x "$root/build/bin/fsdpc" ]; then
  /usr/bin/python3 "$root/examples/mlp/export.py" --out-dir "$seeds" --sizes 3,4,4,2 --batch 2 > /dev/null
  "$root/build/bin/fsdpc" "$seeds/mlp.onnx" -o "$seeds/plan/train.plan" > /dev/null
  "$root/build/bin/fsdpc" "$seeds/mlp.onnx" --forward-only -o "$seeds/plan/forward.plan" > /dev/null
  "$root/build/bin/fsdpc" "$seeds/mlp.onnx" --world-size 2 -o "$seeds/plan/sharded.plan" > /dev/null
fi

status=0
for target in npy safetensors plan; do
  log="$out/fuzz-$target.log"
  if "$out/bin/fuzz-$target" -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 \
      -artifact_prefix="$out/crashes/$target-" "$seeds/$target" > "$log" 2>&1; then
    echo "fuzz-$target: no finding in ${seconds} s: $(grep -E '^#[0-9]+' "$log" | tail -1)"
  else
    echo "fuzz-$target: FAILED (see $log)"; tail -30 "$log"; status=1
  fi
done
exit $status
