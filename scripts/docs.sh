#!/usr/bin/env bash
# Regenerates the dialect and pass reference in docs/ from the ODS sources.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ninja -C build mlir-doc
mkdir -p docs/Dialects docs/Passes
cp build/docs/Dialects/*.md docs/Dialects/
cp build/docs/Passes/*.md docs/Passes/
