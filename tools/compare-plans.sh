#!/usr/bin/env bash
# Compiles the same models with two builds of fsdpc and checks that every
# plan is byte-identical: the plan must depend on the model and the flags,
# never on the C++ compiler that built fsdpc (argument evaluation order,
# hash-table iteration, uninitialised values). Typically the release build
# (g++) against the sanitizer build (clang):
#
#   bash tools/compare-plans.sh build build-asan
#
# Models: the example MLP, GPT and LLaMA (training, 2 ranks, and the GPT in
# bf16 with --recompute auto), the torch 2.x fixtures of test/e2e/Inputs
# (training), and every ONNX node test both builds compile (forward only).
set -euo pipefail
if [ $# -ne 2 ]; then
  echo "usage: tools/compare-plans.sh BUILD_DIR_A BUILD_DIR_B" >&2
  exit 2
fi
root="$(cd "$(dirname "$0")/.." && pwd)"
nameA="$1" nameB="$2"
a="$(cd "$1" && pwd)/bin/fsdpc"
b="$(cd "$2" && pwd)/bin/fsdpc"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
py=/usr/bin/python3

"$py" "$root/examples/mlp/export.py" --out-dir "$work" > /dev/null
"$py" "$root/examples/gpt/prepare_data.py" --out-dir "$work/data" > /dev/null
"$py" "$root/examples/gpt/export.py" --out "$work/gpt.onnx" --data-dir "$work/data" --batch 4 > /dev/null 2>&1
"$py" "$root/examples/llama/export.py" --out "$work/llama.onnx" --data-dir "$work/data" --batch 4 > /dev/null 2>&1

compared=0 differ=0 skipped=0
compare() { # name model flags...
  local name=$1 model=$2
  shift 2
  if ! "$a" "$model" "$@" -o "$work/a.plan" > /dev/null 2>&1; then
    if "$b" "$model" "$@" -o "$work/b.plan" > /dev/null 2>&1; then
      echo "DIFFER $name: only $nameB compiles it"; differ=$((differ + 1))
    else
      skipped=$((skipped + 1))
    fi
    return
  fi
  if ! "$b" "$model" "$@" -o "$work/b.plan" > /dev/null 2>&1; then
    echo "DIFFER $name: only $nameA compiles it"; differ=$((differ + 1))
    return
  fi
  compared=$((compared + 1))
  if ! cmp -s "$work/a.plan" "$work/b.plan"; then
    echo "DIFFER $name"; differ=$((differ + 1))
  fi
}

compare mlp "$work/mlp.onnx" --world-size 2
compare gpt "$work/gpt.onnx" --world-size 2
compare gpt-bf16-recompute "$work/gpt.onnx" --world-size 2 --mixed-precision bf16 --recompute auto --memory-budget 40M
compare llama "$work/llama.onnx" --world-size 2
for model in "$root"/test/e2e/Inputs/torch2/*.onnx; do
  compare "$(basename "$model")" "$model" --batch-size 2
done
# Optimum's exports name their sequence axes: the flags their manifest gives.
# One line per export, its file and each flag separated by tabs (a --loss
# expression holds spaces).
while IFS=$'\t' read -r -a fields; do
  compare "${fields[0]}" "$root/test/e2e/Inputs/optimum/${fields[0]}" --batch-size 2 "${fields[@]:1}"
done < <("$py" -c 'import json, sys
for model in json.load(open(sys.argv[1]))["models"].values():
    for export in model["exports"]:
        print("\t".join([export["file"]] + export.get("fsdpc_flags", [])))' "$root/test/e2e/Inputs/optimum/manifest.json")
for dir in /usr/share/libonnx-testdata/data/node/*/; do
  [ -f "$dir/model.onnx" ] && compare "$(basename "$dir")" "$dir/model.onnx" --forward-only
done
echo "compare-plans: $compared plans compared, $differ differ, $skipped compiled by neither build"
[ "$differ" -eq 0 ]
