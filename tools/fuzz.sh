#!/usr/bin/env bash
# Runs every libFuzzer target of test/fuzz (ONNX importer to plan, plan
# loader and kernels, .npy, safetensors) for SECONDS (default 20) each on a
# seed corpus it writes, in the sanitizer build (clang 22, ASan + UBSan:
# tools/build.sh --sanitize, which it runs unless BUILD_DIR is given):
#
#   bash tools/fuzz.sh [SECONDS] [BUILD_DIR] [TARGET...]   (the sanitizer suite: 10 s)
#
# TARGETs are among onnx, plan, npy, safetensors (default: all); as many
# run at once as the machine has cores. Each run prints libFuzzer's last
# status line (executions, coverage) and fails on the first crash, leak,
# sanitizer report or timeout; the input that caused it is left in
# BUILD_DIR/fuzz/crashes/. A longer run: bash tools/fuzz.sh 600.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-20}"
targets=()
if [ -n "${2:-}" ]; then
  build="$2"
  shift 2
  targets=("$@")
else
  build="$root/build-asan"
  bash "$root/tools/build.sh" --sanitize "$build" > /dev/null
fi
out="$build/fuzz"
mkdir -p "$out"
# Open MPI's allocations that live until exit (tools/lsan.supp), as in the suite.
export LSAN_OPTIONS="suppressions=$root/tools/lsan.supp:print_suppressions=0"

# Seeds: small valid files of each kind (numpy's own .npy, a safetensors file
# written by hand, plans this build's fsdpc compiles, ONNX models).
seeds="$out/seeds"
rm -rf "$seeds" && mkdir -p "$seeds/npy" "$seeds/safetensors" "$seeds/plan" "$seeds/onnx" "$out/crashes"
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
/usr/bin/python3 "$root/examples/mlp/export.py" --out-dir "$seeds" --sizes 3,4,4,2 --batch 2 > /dev/null
"$build/bin/fsdpc" "$seeds/mlp.onnx" -o "$seeds/plan/train.plan" > /dev/null
"$build/bin/fsdpc" "$seeds/mlp.onnx" --forward-only -o "$seeds/plan/forward.plan" > /dev/null
"$build/bin/fsdpc" "$seeds/mlp.onnx" --world-size 2 -o "$seeds/plan/sharded.plan" > /dev/null
# A one-layer GPT and LLaMA: attention, norms, embeddings, cross entropy,
# AdamW and SGD with momentum, bf16, clipping, recompute (weight-free where
# the weights would pass -max_len).
fsdpc=("$build/bin/fsdpc" --batch-size 2)
/usr/bin/python3 "$root/examples/gpt/export.py" --out "$seeds/gpt.onnx" --vocab 11 --dim 8 --heads 2 --layers 1 \
  --context 4 --batch 2 > /dev/null 2>&1
/usr/bin/python3 -c "import json, sys; json.dump({str(i): i for i in range(11)}, open(sys.argv[1], 'w'))" \
  "$seeds/vocab.json"
/usr/bin/python3 "$root/examples/llama/export.py" --out "$seeds/llama.onnx" --data-dir "$seeds" --layers 1 \
  --context 4 --batch 2 > /dev/null 2>&1
"${fsdpc[@]}" "$seeds/gpt.onnx" -o "$seeds/plan/gpt.plan" > /dev/null
"${fsdpc[@]}" "$seeds/gpt.onnx" --optimizer sgd --momentum 0.9 --clip-grad-norm 1 -o "$seeds/plan/gpt-sgd.plan" > /dev/null
"${fsdpc[@]}" "$seeds/gpt.onnx" --mixed-precision bf16 --recompute 'units:.*' -o "$seeds/plan/gpt-bf16.plan" > /dev/null
"${fsdpc[@]}" "$seeds/gpt.onnx" --forward-only -o "$seeds/plan/gpt-forward.plan" > /dev/null
"${fsdpc[@]}" "$seeds/llama.onnx" --no-weights -o "$seeds/plan/llama.plan" > /dev/null
# ONNX seeds: the MLP and GPT exports, and a few of ONNX's node tests.
cp "$seeds/mlp.onnx" "$seeds/gpt.onnx" "$seeds/onnx/"
for test in test_layer_normalization_2d_axis0 test_gemm_default_matrix_bias test_softmax_axis_1 test_conv_with_strides_padding \
    test_gather_0 test_reduce_mean_default_axes_keepdims_example test_transpose_all_permutations_0 test_einsum_batch_matmul; do
  model="/usr/share/libonnx-testdata/data/node/$test/model.onnx"
  [ -f "$model" ] && cp "$model" "$seeds/onnx/$test.onnx"
done

fuzz_one() {
  local target="$1" max_len=16384
  case "$target" in
    onnx|plan) max_len=32768 ;; # the bf16 GPT plan is 20 KB
    npy|safetensors) ;;
    *) echo "fuzz.sh: no fuzz target '$target' (onnx, plan, npy, safetensors)" >&2; return 2 ;;
  esac
  "$build/bin/fuzz-$target" -max_total_time="$seconds" -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$out/crashes/$target-" "$seeds/$target" > "$out/fuzz-$target.log" 2>&1
}

# One target per core at a time; each reports when all are done.
[ "${#targets[@]}" -gt 0 ] || targets=(onnx plan npy safetensors)
slots="$(nproc)"
declare -A pids
for target in "${targets[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$slots" ]; do wait -n || true; done
  fuzz_one "$target" &
  pids[$target]=$!
done
status=0
for target in "${targets[@]}"; do
  log="$out/fuzz-$target.log"
  if wait "${pids[$target]}"; then
    echo "fuzz-$target: no finding in ${seconds} s: $(grep -E '^#[0-9]+' "$log" | tail -1)"
  else
    echo "fuzz-$target: FAILED (see $log)"; tail -30 "$log"; status=1
  fi
done
exit $status
