#!/usr/bin/env bash
# The GPU half of the main job: runs what scripts/example.sh compiled into
# build/example with fusion-run, fused and unfused. The Llama-3-8B layer runs
# on random weights (batch 1, 1024 cached tokens) against the CPU reference;
# the bundled checkpoint test/golden/llama3_gqa runs on its real weights and
# inputs against the transformers goldens. Exits non-zero on any mismatch.
#
# Needs only the runtime, so it also works on a GPU machine without LLVM:
# copy build/example there, build runtime/ alone
# (cmake -S runtime -B /tmp/rt -G Ninja && ninja -C /tmp/rt fusion-run) and
# run FUSION_RUN=/tmp/rt/tools/fusion-run scripts/example-gpu.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
run=${FUSION_RUN:-build/bin/fusion-run}
out=build/example
ckpt=test/golden/llama3_gqa
for strategy in decode none; do
  "$run" --ptx "$out/llama3_8b.$strategy.ptx" \
    --manifest "$out/llama3_8b.$strategy.manifest.json" --graph \
    --seed 1 --batch 1 --kv-len 1024
  "$run" --ptx "$out/llama3_gqa.$strategy.ptx" \
    --manifest "$out/llama3_gqa.$strategy.manifest.json" --graph \
    --weights "$ckpt" --inputs "$ckpt/decode_step.safetensors"
done
echo "main job: fused and unfused runs match their references"
