#!/usr/bin/env bash
# The GPU-machine side of the benchmark: builds runtime/ alone (no LLVM
# needed) and runs bench/bench.py on the PTX that bench/compile.sh wrote.
#
#   bench/run.sh PTX_DIR [bench.py options...]
#   e.g. bench/run.sh build/bench --dtypes f16 --configs 1x1024,16x4096
#
# Needs cmake, ninja, a C++17 compiler, the CUDA headers, python3 with torch
# and cupy, and nlohmann-json: the system's, the copy bench/compile.sh
# stages in PTX_DIR/deps, or the directory holding its
# nlohmann_jsonConfig.cmake in NLOHMANN_JSON_DIR. The runtime is built in
# FUSION_RUNTIME_BUILD (default /tmp/fusion-runtime-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 1 ] || [ ! -d "$1" ]; then
  echo "usage: bench/run.sh PTX_DIR [bench.py options...]" \
       "(PTX_DIR: what bench/compile.sh wrote)" >&2
  exit 2
fi
ptx_dir=$1
shift
build=${FUSION_RUNTIME_BUILD:-/tmp/fusion-runtime-bench}

config=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DFUSION_RUNTIME_BUILD_TESTS=OFF)
# The copy bench/compile.sh staged beside the PTX, unless one is given.
staged=$ptx_dir/deps/share/cmake/nlohmann_json
if [ -z "${NLOHMANN_JSON_DIR:-}" ] && [ -f "$staged/nlohmann_jsonConfig.cmake" ]; then
  NLOHMANN_JSON_DIR=$(cd "$staged" && pwd)
fi
if [ -n "${NLOHMANN_JSON_DIR:-}" ]; then
  config+=("-Dnlohmann_json_DIR=$NLOHMANN_JSON_DIR")
fi
start=$(date +%s)
cmake -S runtime -B "$build" "${config[@]}" >"$build.log" 2>&1 || {
  cat "$build.log"
  exit 1
}
if ! ninja -C "$build" fusion-run >>"$build.log" 2>&1; then
  tail -30 "$build.log"
  echo "bench/run.sh: could not build fusion-run (log: $build.log); without" \
       "nlohmann-json or the CUDA headers the runtime skips it: set" \
       "NLOHMANN_JSON_DIR to the directory of nlohmann_jsonConfig.cmake" >&2
  exit 1
fi
echo "built $build/tools/fusion-run in $(($(date +%s) - start)) s"

exec env PYTHONUNBUFFERED=1 python3 bench/bench.py \
  --fusion-run "$build/tools/fusion-run" --ptx-dir "$ptx_dir" "$@"
