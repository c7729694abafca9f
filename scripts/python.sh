#!/usr/bin/env bash
# Builds the `fusion` Python package (pyproject.toml: the C++ runtime bound
# with nanobind, built by scikit-build-core; incremental in build/python/)
# and installs it, with pytest, into the virtual environment build/venv
# (created on first use). Needs what scripts/setup.sh installs and the CUDA
# toolkit's headers (/usr/local/cuda); no GPU. Afterwards:
#   build/venv/bin/python -c "import fusion; print(fusion.Model.load('build/example/smollm2.decode.manifest.json').function)"
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/venv/bin/python ] || python3 -m venv build/venv
build/venv/bin/python -m pip install -q ".[test]"
