#!/usr/bin/env bash
# The GPU half of the main job: generates text from the whole SmolLM2 model
# scripts/example.sh compiled (scripts/generate.py over fusion-generate:
# greedy, 8 copies of the prompt as a batch, tokens/s), then runs the layers
# it compiled into build/example with fusion-run, fused and unfused. The
# Llama-3-8B layer runs
# on random weights (batch 1, 1024 cached tokens) against the CPU reference;
# the bundled checkpoint test/golden/llama3_gqa runs on its real weights and
# inputs against the transformers goldens. Exits non-zero on any mismatch.
#
# Needs only the runtime, so it also works on a GPU machine without LLVM:
# copy build/example and build/models/smollm2 there, build runtime/ alone
# (cmake -S runtime -B /tmp/rt -G Ninja && ninja -C /tmp/rt) and run
# FUSION_RUN=/tmp/rt/tools/fusion-run FUSION_GENERATE=/tmp/rt/tools/fusion-generate
# scripts/example-gpu.sh (generate.py needs the `tokenizers` package).
set -euo pipefail
cd "$(dirname "$0")/.."
run=${FUSION_RUN:-build/bin/fusion-run}
generate=${FUSION_GENERATE:-build/bin/fusion-generate}
out=build/example
ckpt=test/golden/llama3_gqa
scripts/generate.py --fusion-generate "$generate" --model "$out/smollm2.decode" \
  --checkpoint build/models/smollm2 --batch 8 --max-new-tokens 48 \
  "The capital of France is"
for strategy in decode none; do
  "$run" --ptx "$out/llama3_8b.$strategy.ptx" \
    --manifest "$out/llama3_8b.$strategy.manifest.json" --graph \
    --seed 1 --batch 1 --kv-len 1024
  "$run" --ptx "$out/llama3_gqa.$strategy.ptx" \
    --manifest "$out/llama3_gqa.$strategy.manifest.json" --graph \
    --weights "$ckpt" --inputs "$ckpt/decode_step.safetensors"
done
echo "main job: fused and unfused runs match their references"
