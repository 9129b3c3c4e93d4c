#!/usr/bin/env bash
# Trains the example MLP, GPT and LLaMA for 20 steps with two builds of
# fsdpc (each build's own fsdpc and fsdp-run, on 1 and 2 ranks) and checks
# that every step's fp32 loss is bit-identical. Run it across a
# restructuring that must not change any number:
#
#   git worktree add /tmp/before <commit> && bash /tmp/before/tools/build.sh /tmp/before/build
#   bash tools/compare-builds.sh /tmp/before/build build
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: tools/compare-builds.sh BEFORE_BUILD_DIR AFTER_BUILD_DIR" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
before="$(cd "$1" && pwd)"
after="$(cd "$2" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
py=/usr/bin/python3
mpirun=(mpirun --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS=1)

"$py" "$root/examples/mlp/export.py" --out-dir "$work" > /dev/null
"$py" "$root/examples/gpt/prepare_data.py" --out-dir "$work/data" > /dev/null
"$py" "$root/examples/gpt/export.py" --out "$work/gpt.onnx" --data-dir "$work/data" --batch 12 > /dev/null
"$py" "$root/examples/llama/export.py" --out "$work/llama.onnx" --data-dir "$work/data" --batch 12 > /dev/null

failures=0
check() { # name ranks onnx fsdpc-flags... -- fsdp-run-flags...
  local name=$1 ranks=$2 model=$3
  shift 3
  local compile=() run=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do compile+=("$1"); shift; done
  shift
  run=("$@")
  local launch=()
  [ "$ranks" -gt 1 ] && launch=("${mpirun[@]}" -np "$ranks")
  for side in before after; do
    local bin; bin="$([ $side = before ] && echo "$before" || echo "$after")/bin"
    "$bin/fsdpc" "$model" -o "$work/$name-$side.bin" --world-size "$ranks" "${compile[@]}" > /dev/null
    "${launch[@]}" "$bin/fsdp-run" "$work/$name-$side.bin" --steps 20 --metrics-json "$work/$name-$side.jsonl" \
      "${run[@]}" > /dev/null
  done
  if "$py" - "$work/$name-before.jsonl" "$work/$name-after.jsonl" <<'PY'
import json, sys
def losses(path):
    return [(r["step"], r["loss"]) for r in map(json.loads, open(path)) if "loss" in r]
a, b = losses(sys.argv[1]), losses(sys.argv[2])
same = len(a) == 20 and a == b
print("%-16s %s (last loss %r)" % (sys.argv[1].rsplit("/", 1)[1][:-13], "20 steps bit-identical" if same else "DIFFERENT", b[-1][1]))
sys.exit(0 if same else 1)
PY
  then :; else failures=$((failures + 1)); fi
}

check mlp-1 1 "$work/mlp.onnx" --wrap 'module:fc[0-9]' --
check mlp-2 2 "$work/mlp.onnx" --wrap 'module:fc[0-9]' --
check mlp-sgd-2 2 "$work/mlp_relu.onnx" --optimizer sgd --momentum 0.9 --wrap 'module:fc[0-9]' --
check gpt-1 1 "$work/gpt.onnx" --batch-size 12 --wrap 'module:blocks\.[0-9]+' -- --data "$work/data"
check gpt-2 2 "$work/gpt.onnx" --batch-size 12 --wrap 'module:blocks\.[0-9]+' -- --data "$work/data"
check llama-1 1 "$work/llama.onnx" --batch-size 12 --wrap 'module:blocks\.[0-9]+' -- --data "$work/data"
check llama-2 2 "$work/llama.onnx" --batch-size 12 --wrap 'module:blocks\.[0-9]+' -- --data "$work/data"
echo "RESULT: $([ $failures -eq 0 ] && echo PASS || echo "FAIL ($failures)")"
[ $failures -eq 0 ]
