#!/usr/bin/env bash
# Installs the Debian 12 packages the build and the tests need, and configures
# build/ (CMake + Ninja against LLVM/MLIR 22). Safe to run again: it installs
# only what is missing and reconfigures only when build/ has no build.ninja.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ ccache python3 python3-pip python3-venv libgtest-dev nlohmann-json3-dev
          llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
fi

# Python packages of the tests and tools: numpy for the golden-data
# cross-check (test/golden/check_goldens.py); gguf, safetensors and tokenizers
# for the checkpoint converter (tools/convert-gguf, scripts/get-smollm2.sh).
# pip where python3 is a user install; on Debian's system python3 (which
# refuses pip without --break-system-packages) a --user install.
if ! python3 -c "import numpy, gguf, safetensors, tokenizers" 2>/dev/null; then
  python3 -m pip install -q numpy gguf safetensors tokenizers 2>/dev/null ||
    python3 -m pip install -q --user --break-system-packages numpy gguf safetensors tokenizers
fi

configure() {  # configure <dir> [cmake options]: only when not yet configured
  local dir=$1
  shift
  [ -f "$dir/build.ninja" ] && return
  cmake -G Ninja -S . -B "$dir" \
    -DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir \
    -DLLVM_EXTERNAL_LIT=/usr/lib/llvm-22/bin/lit "$@"
}
configure build -DCMAKE_BUILD_TYPE=Release
# The sanitizer build (ASan + UBSan) that scripts/test.sh also runs; -O1
# keeps its compile time and its slowdown small. The fuzz smoke test runs
# half of its cases there. It shares build/'s real checkpoints
# (scripts/get-smollm2.sh) instead of fetching them again.
if [ "${1:-}" = "--with-sanitizers" ]; then
  configure build-asan -DCMAKE_BUILD_TYPE=Release -DFUSION_SANITIZE=ON \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DCMAKE_C_FLAGS_RELEASE="-O1 -DNDEBUG" \
    -DFUSION_FUZZ_SCALE=0.5 -DFUSION_MODELS_DIR="$PWD/build/models"
fi
