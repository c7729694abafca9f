#!/bin/sh
# Compiles an example with fusion-compile and checks it on the GPU with
# fusion-run (registered with ctest as runtime.gpu.example.*).
#
#   run-example.sh FUSION_COMPILE FUSION_RUN EXAMPLE.mlir STRATEGY OUTDIR \
#                  [fusion-run options...]
#
# Exit status: fusion-run's (0 pass, 1 mismatch, 2 error), or 77 when there
# is no CUDA driver or device (ctest SKIP_RETURN_CODE: reported as skipped,
# checked before compiling so that CI without a GPU spends no time here).
set -u
compile=$1 run=$2 example=$3 strategy=$4 out=$5
shift 5
"$run" --check-device || exit $?
mkdir -p "$out" || exit 2
prefix="$out/$(basename "$example" .mlir).$strategy"
"$compile" "$example" -o "$prefix" --strategy="$strategy" || {
  echo "run-example.sh: fusion-compile failed on $example" >&2
  exit 2
}
exec "$run" --ptx "$prefix.ptx" --manifest "$prefix.manifest.json" "$@"
