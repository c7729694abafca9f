#!/usr/bin/env bash
# Compiles what bench/bench.py runs: the Llama-3-8B decode-layer front half
# in f16 and bf16, fused (strategy decode) and unfused (strategy none), to
# <out>/llama3_8b.<dtype>.<strategy>.{ptx,manifest.json}. Runs where LLVM/MLIR
# is installed; the GPU machine needs only these files (bench/README.md).
#
#   bench/compile.sh [OUT_DIR]    (default build/bench)
#
# for the chip CHIP (default sm_90a, what the H200 runs fastest: the
# GEMM-shaped projection's warpgroup MMA, PTX that runs on compute
# capability 9.0 only; CHIP=sm_90 for the portable PTX), with the extra
# fusion-compile options COMPILE_FLAGS (e.g. "--warp-specialized-gemm").
#
# f16 is examples/llama3_8b.mlir; bf16 is imported from the Llama-3.1-8B
# config.json (runtime/test/data/configs/llama3_8b.json), which gives the
# same module in bf16 (test/Import/examples.mlir checks that it reproduces
# the example in f16). Both use pages of 16 tokens. ptxas checks the PTX
# when the CUDA toolkit is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-build/bench}
chip=${CHIP:-sm_90a}

[ -f build/build.ninja ] || scripts/setup.sh
ninja -C build -j2 fusion-compile fusion-import
mkdir -p "$out"

build/bin/fusion-import --dtype=bf16 runtime/test/data/configs/llama3_8b.json \
  -o "$out/llama3_8b.bf16.mlir"
for dtype in f16 bf16; do
  module=examples/llama3_8b.mlir
  [ "$dtype" = f16 ] || module=$out/llama3_8b.bf16.mlir
  for strategy in decode none; do
    prefix=$out/llama3_8b.$dtype.$strategy
    build/bin/fusion-compile --strategy="$strategy" --chip="$chip" \
      ${COMPILE_FLAGS:-} "$module" -o "$prefix"
    if [ -x /usr/local/cuda/bin/ptxas ]; then
      /usr/local/cuda/bin/ptxas -arch="$chip" "$prefix.ptx" -o "$prefix.cubin"
    fi
    echo "compiled $module ($dtype, strategy $strategy) -> $prefix.ptx"
  done
done

# nlohmann-json for a GPU machine that lacks it (run.sh finds it here): the
# header-only library and its CMake package, laid out as an install prefix.
json_cmake=/usr/share/cmake/nlohmann_json
if [ -f "$json_cmake/nlohmann_jsonConfig.cmake" ] && [ -d /usr/include/nlohmann ]; then
  mkdir -p "$out/deps/include" "$out/deps/share/cmake"
  cp -r /usr/include/nlohmann "$out/deps/include/"
  cp -r "$json_cmake" "$out/deps/share/cmake/"
  echo "staged nlohmann-json in $out/deps (for bench/run.sh on the GPU machine)"
fi
