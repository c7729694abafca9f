#!/bin/sh
# Prepares the GPU check of the Hugging Face goldens (test/golden, see
# docs/goldens.md) for a machine without LLVM: imports each golden's
# config.json with fusion-import and compiles it with fusion-compile HERE,
# for both strategies (decode, none) and both forms of the norm (without the
# residual add, as the goldens' layer 0; with it, fed zeros), and writes
#
#   OUTDIR/<golden>.<strategy>.residual-<on|off>.{mlir,ptx,manifest.json}
#   OUTDIR/run.sh   runs every check with fusion-run and summarises
#
# then prints the fusion-run command lines. On the GPU machine, from the root
# of the same checkout (with OUTDIR copied to the same place):
#
#   cmake -S runtime -B /tmp/rt -G Ninja && ninja -C /tmp/rt fusion-run
#   sh OUTDIR/run.sh                 # FUSION_RUN=/tmp/rt/tools/fusion-run
#
# Usage: test/gpu/goldens.sh OUTDIR [BUILD_DIR (default: build)]
# OUTDIR is taken relative to the repository root when it is not absolute.
set -eu

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUTDIR [BUILD_DIR]" >&2
  exit 2
fi
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=$1
build=${2:-build}
import="$build/bin/fusion-import"
compile="$build/bin/fusion-compile"
for tool in "$import" "$compile"; do
  if [ ! -x "$tool" ]; then
    echo "$0: $tool not found; build it first: ninja -C $build" \
      "fusion-import fusion-compile" >&2
    exit 2
  fi
done
mkdir -p "$out"

commands=""
for dir in test/golden/*/; do
  golden=${dir%/}
  [ -f "$golden/decode_step.safetensors" ] || continue
  name=$(basename "$golden")
  for strategy in decode none; do
    for residual in off on; do
      prefix="$out/$name.$strategy.residual-$residual"
      "$import" "$golden/config.json" --residual="$residual" -o "$prefix.mlir"
      "$compile" "$prefix.mlir" -o "$prefix" --strategy="$strategy"
      options="--iters 20"
      [ "$strategy" = none ] && options="--graph --iters 20"
      commands="$commands\"\$FUSION_RUN\" --ptx $prefix.ptx --manifest $prefix.manifest.json --weights $golden --inputs $golden/decode_step.safetensors $options
"
    done
  done
done

{
  cat <<'EOF'
#!/bin/sh
# Written by test/gpu/goldens.sh: checks the compiled goldens on the GPU.
# Run from the root of the repository checkout:
#   sh OUTDIR/run.sh
# FUSION_RUN names fusion-run (default: the standalone runtime build,
# cmake -S runtime -B /tmp/rt -G Ninja && ninja -C /tmp/rt fusion-run).
# Each check prints its error table; the summary lists PASS / FAIL (exit 1:
# a mismatch, 2: an error) / SKIP (77: no CUDA device) per check.
FUSION_RUN=${FUSION_RUN:-/tmp/rt/tools/fusion-run}
failed=0
summary=""
check() {
  echo "==> $*"
  "$@"
  rc=$?
  case $rc in
    0) result=PASS ;;
    77) result=SKIP ;;
    *) result="FAIL ($rc)"; failed=1 ;;
  esac
  summary="$summary$result  $3
"
}
EOF
  printf '%s' "$commands" | sed 's/^/check /'
  cat <<'EOF'
printf '\nsummary:\n%s' "$summary"
exit $failed
EOF
} > "$out/run.sh"
chmod +x "$out/run.sh"

echo "Compiled $(printf '%s' "$commands" | wc -l) checks into $out."
echo "On the GPU machine, from the repository root (copy $out there too):"
echo
echo "  cmake -S runtime -B /tmp/rt -G Ninja && ninja -C /tmp/rt fusion-run"
echo "  FUSION_RUN=/tmp/rt/tools/fusion-run"
printf '%s' "$commands" | sed 's/^/  /'
echo
echo "or all of them with a summary: sh $out/run.sh"
