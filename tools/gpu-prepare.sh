#!/usr/bin/env bash
# Prepares, on a development machine (no GPU needed), everything
# tools/gpu-check.sh runs on a GPU machine, into gpu-carry/ (git-ignored,
# about 13 MiB gzip'd, so it travels within the device tool's 64 MiB):
#   gpu-carry/bin/    fsdp-run and fsdpc-cuda-kernel-test, a runtime-only
#                     build for sm_90 with protobuf linked statically (the GPU
#                     machine has another protobuf and no MLIR);
#   gpu-carry/plans/  the example MLP / GPT / LLaMA plans of
#                     test/gpu/devices_agree.py, with their data;
#   gpu-carry/bench/  GPT-2 124M's weight-free bf16 plans (plain, offloaded,
#                     recomputed) and parameter-name map for
#                     test/bench/gpu_vs_torch.py;
#   gpu-carry/moe/    a mixture of experts layer's weight-free bf16 plan for
#                     test/bench/moe_gpu.py.
# Needs the compiler built (tools/build.sh) and /usr/bin/python3 with torch.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
carry="$root/gpu-carry"
build="$root/build-gpu"
if [ ! -x "$root/build/bin/fsdpc" ]; then
  echo "gpu-prepare: build the compiler first (bash tools/build.sh)" >&2
  exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DFSDPC_BUILD_COMPILER=OFF \
    -DFSDPC_CUDA=ON -DFSDPC_STATIC_PROTOBUF=ON -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null
fi
ninja -C "$build" -j "$(nproc)" fsdp-run fsdpc-cuda-kernel-test
rm -rf "$carry"
mkdir -p "$carry/bin"
cp "$build/bin/fsdp-run" "$build/bin/fsdpc-cuda-kernel-test" "$carry/bin/"
# The host symbol tables (2.7 MB of the carry's 64 MiB) are not needed
# there; the kernels' names, which compute-sanitizer reports, stay.
strip "$carry/bin/fsdp-run" "$carry/bin/fsdpc-cuda-kernel-test"
/usr/bin/python3 "$root/test/gpu/devices_agree.py" prepare --fsdpc "$root/build/bin/fsdpc" --out "$carry/plans"
/usr/bin/python3 "$root/test/bench/gpu_vs_torch.py" prepare --fsdpc "$root/build/bin/fsdpc" --out "$carry/bench" \
  > "$carry/bench-prepare.log" 2>&1
/usr/bin/python3 "$root/test/bench/moe_gpu.py" prepare --fsdpc "$root/build/bin/fsdpc" --out "$carry/moe" \
  > "$carry/moe-prepare.log" 2>&1
# gzip'd: the binaries are mostly cubins (14 MB each, 4.9 MB compressed)
# and the weight-free plans mostly zeros (8.5 MB each, 33 KB), so the carry
# is about 13 MiB of the 64 instead of 62. gpu-check.sh unpacks them (gzip
# is on every machine; xz is not sure to be).
gzip -9 "$carry/bin/fsdp-run" "$carry/bin/fsdpc-cuda-kernel-test" "$carry"/bench/*.bin "$carry"/moe/*.bin
git -C "$root" rev-parse HEAD > "$carry/commit"
du -sh "$carry"
echo "gpu-prepare: carry gpu-carry to the GPU machine and run: bash tools/gpu-check.sh"
