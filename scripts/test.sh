#!/usr/bin/env bash
# The test command: installs what is missing, builds everything, and runs all
# tests through ctest (the lit/FileCheck suite and the GoogleTest units). GPU tests
# report themselves as skipped on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
ninja -C build
ctest --test-dir build --output-on-failure
