#!/bin/sh
# Imports a Hugging Face config.json as a whole model (fusion-import
# --whole-model) and compiles it (fusion-compile) for the engine's GPU tests
# (the ctest fixtures runtime.gpu.engine.compile.*).
#
#   compile-model.sh FUSION_GENERATE FUSION_IMPORT FUSION_COMPILE CONFIG.json \
#                    OUT_PREFIX [fusion-import options...]
#
# Writes OUT_PREFIX.mlir, OUT_PREFIX.ptx and OUT_PREFIX.manifest.json. Exit
# status: 0, 2 when importing or compiling fails, or 77 when there is no
# CUDA driver or device (checked first, so that CI without a GPU compiles
# nothing; the tests that use the model skip themselves there).
set -u
generate=$1 import=$2 compile=$3 config=$4 prefix=$5
shift 5
"$generate" --check-device || exit $?
mkdir -p "$(dirname "$prefix")" || exit 2
"$import" "$config" --whole-model "$@" -o "$prefix.mlir" || {
  echo "compile-model.sh: fusion-import --whole-model failed on $config" >&2
  exit 2
}
"$compile" "$prefix.mlir" -o "$prefix" || {
  echo "compile-model.sh: fusion-compile failed on $prefix.mlir" >&2
  exit 2
}
