#!/usr/bin/env bash
# The main job: compile the bundled Llama-3-8B decode layer (examples/) to PTX
# and a launch manifest, fused (strategy decode) and unfused (strategy none),
# and check the PTX with ptxas. On a machine with a GPU, also run it with
# fusion-run against the CPU reference. Safe to run again.
#
#   scripts/example.sh [examples/<model>.mlir]
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:-examples/llama3_8b.mlir}
name=$(basename "$model" .mlir)

scripts/setup.sh
ninja -C build

out=build/example
mkdir -p "$out"
for strategy in decode none; do
  prefix="$out/$name.$strategy"
  build/bin/fusion-compile --strategy="$strategy" "$model" -o "$prefix"
  kernels=$(grep -c '^.visible .entry' "$prefix.ptx")
  echo "compiled $model (strategy $strategy): $kernels kernels -> $prefix.ptx, $prefix.manifest.json"
  ptxas=/usr/local/cuda/bin/ptxas
  if [ -x "$ptxas" ]; then
    "$ptxas" -arch=sm_90 "$prefix.ptx" -o "$prefix.cubin"
    echo "  ptxas -arch=sm_90: ok"
  else
    echo "  ptxas not found at $ptxas: PTX not assembled"
  fi
done

runner=build/runtime/fusion-run
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no GPU on this machine: stopped after PTX (run this script on a machine with an NVIDIA GPU to execute and check it)"
  exit 0
fi
if [ ! -x "$runner" ]; then
  echo "GPU found, but the runtime's fusion-run is not built yet (issue 5): stopped after PTX"
  exit 0
fi
for strategy in decode none; do
  prefix="$out/$name.$strategy"
  "$runner" --ptx "$prefix.ptx" --manifest "$prefix.manifest.json" --seed 1 --batch 1 --kv-len 1024 --graph
done
