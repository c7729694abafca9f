#!/usr/bin/env bash
# The main job. Gets the real SmolLM2-135M checkpoint (scripts/get-smollm2.sh)
# and compiles the whole model (fusion-import --whole-model, 30 layers,
# embedding to greedy sampling) to PTX + launch manifest; also compiles the
# bundled Llama-3-8B decode layer (examples/) and the bundled Hugging Face
# checkpoint (test/golden/llama3_gqa, imported from its config.json), fused
# (strategy decode) and unfused (strategy none), and checks the PTX with
# ptxas. On a machine with an NVIDIA GPU it then generates text from SmolLM2
# with our kernels and prints tokens/s, and runs the layers with fusion-run
# against their references (scripts/example-gpu.sh, which also runs alone on
# a GPU machine without LLVM). Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
ninja -C build

out=build/example
mkdir -p "$out"
ckpt=test/golden/llama3_gqa
build/bin/fusion-import --residual=off "$ckpt/config.json" -o "$out/llama3_gqa.mlir"
echo "imported $ckpt/config.json -> $out/llama3_gqa.mlir"

compile() { # <module.mlir> <strategy>
  local prefix="$out/$(basename "$1" .mlir).$2"
  echo "compiling $1 (strategy $2)"
  # Prints "fusion-compile: wrote <prefix>.ptx (K kernels, E entries) and
  # <prefix>.manifest.json": K kernel launches per step, E PTX entries
  # (batch variants such as the tensor-core projection are extra entries).
  build/bin/fusion-compile --strategy="$2" "$1" -o "$prefix"
  if [ -x /usr/local/cuda/bin/ptxas ]; then
    /usr/local/cuda/bin/ptxas -arch=sm_90 "$prefix.ptx" -o "$prefix.cubin"
    echo "  ptxas -arch=sm_90: ok"
  fi
}
for strategy in decode none; do
  compile examples/llama3_8b.mlir $strategy
  compile "$out/llama3_gqa.mlir" $strategy
done

# The real model, whole: one module, one kernel per kernel kind shared by
# the 30 layers.
scripts/get-smollm2.sh build/models/smollm2
build/bin/fusion-import build/models/smollm2/config.json --whole-model \
  --dtype=f16 -o "$out/smollm2.mlir"
echo "imported build/models/smollm2/config.json (whole model) -> $out/smollm2.mlir"
compile "$out/smollm2.mlir" decode

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "no GPU on this machine: stopped after PTX (the whole SmolLM2 model is" \
       "$out/smollm2.decode.ptx; run this script on a machine with an NVIDIA GPU" \
       "to generate text with it and to execute and check the layers)"
  exit 0
fi
exec scripts/example-gpu.sh
