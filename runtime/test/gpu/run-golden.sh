#!/bin/sh
# Imports the config.json of a Hugging Face golden (test/golden/<name>) with
# fusion-import, compiles it with fusion-compile and checks it with fusion-run
# on the golden's checkpoint and decode step (--weights, --inputs). Registered
# with ctest as runtime.gpu.golden.* and, with --dry-run (no GPU: the fp32
# reference stands in for the kernels), as runtime.golden.*.
#
#   run-golden.sh FUSION_IMPORT FUSION_COMPILE FUSION_RUN GOLDEN_DIR \
#                 STRATEGY RESIDUAL OUTDIR [fusion-run options...]
#
# STRATEGY is decode or none (fusion-compile --strategy), RESIDUAL on or off
# (fusion-import --residual; the goldens are of layer 0, without a residual
# add: with "on" fusion-run passes a zero residual).
#
# Exit status: fusion-run's (0 pass, 1 mismatch, 2 error), or 77 when there
# is no CUDA driver or device and --dry-run is not given (ctest
# SKIP_RETURN_CODE: checked before compiling).
set -u
import=$1 compile=$2 run=$3 golden=$4 strategy=$5 residual=$6 out=$7
shift 7
case " $* " in
  *" --dry-run "*) ;;
  *) "$run" --check-device || exit $? ;;
esac
mkdir -p "$out" || exit 2
prefix="$out/$(basename "$golden").$strategy.residual-$residual"
"$import" "$golden/config.json" --residual="$residual" -o "$prefix.mlir" || {
  echo "run-golden.sh: fusion-import failed on $golden/config.json" >&2
  exit 2
}
"$compile" "$prefix.mlir" -o "$prefix" --strategy="$strategy" || {
  echo "run-golden.sh: fusion-compile failed on $prefix.mlir" >&2
  exit 2
}
exec "$run" --ptx "$prefix.ptx" --manifest "$prefix.manifest.json" \
  --weights "$golden" --inputs "$golden/decode_step.safetensors" "$@"
