#!/usr/bin/env bash
# Snapshot of what the compiler writes, for checking that a refactoring keeps
# the PTX and manifests byte-identical:
#   scripts/snapshot.sh OUT_DIR [BIN_DIR]      (BIN_DIR default: build/bin)
# imports every test/golden/*/config.json with fusion-import and compiles each
# example, the shape inputs of test/Conversion/FusionToGPU/Inputs and the
# imports with fusion-compile under both strategies (the chip CHIP, default
# sm_90; llama3_8b also sm_80). Take one before and one after the change and compare them with
#   diff -r BEFORE AFTER
# (the import headers name the checkout's path: compare from one checkout,
# or use diff -I 'Decode-layer front half of').
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
out=$1
bin=${2:-$src/build/bin}
rm -rf "$out"
mkdir -p "$out"
inputs=("$src"/examples/*.mlir)
for f in gptj_partial_layernorm gemma_unit_offset_bf16 group5_hidden5120 \
         group6_hidden1000_bf16 embed_argmax_swiglu embedding_front_half; do
  inputs+=("$src/test/Conversion/FusionToGPU/Inputs/$f.mlir")
done
for config in "$src"/test/golden/*/config.json; do
  name=$(basename "$(dirname "$config")")
  "$bin/fusion-import" "$config" -o "$out/import_$name.mlir"
  inputs+=("$out/import_$name.mlir")
done
for f in "${inputs[@]}"; do
  name=$(basename "$f" .mlir)
  for strategy in decode none; do
    "$bin/fusion-compile" "$f" --strategy=$strategy --chip="${CHIP:-sm_90}" \
      -o "$out/$name.$strategy" >/dev/null
  done
done
"$bin/fusion-compile" "$src/examples/llama3_8b.mlir" --chip=sm_80 \
  -o "$out/llama3_8b.sm80" >/dev/null
echo "scripts/snapshot.sh: $(ls "$out" | wc -l) files in $out"
