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
#
# The flashinfer column (optional; bench/README.md): BENCH_WHEELS=DIR installs
# DIR/*.whl (flashinfer-python and apache-tvm-ffi, no network: --no-index
# --no-deps) into BENCH_SITE (default /tmp/bench-site, put on PYTHONPATH;
# skipped when the same wheels are there already) and unpacks
# DIR/flashinfer-modules-<version>-<arch>.tar.xz, if there is one for this
# GPU, as FlashInfer's prebuilt kernel modules. FlashInfer JIT-compiles the
# others with nvcc into FLASHINFER_WORKSPACE_BASE (default
# /tmp/flashinfer-bench, kept while the machine is) with MAX_JOBS (default
# the core count) jobs; after the run, when it compiled any and OUT is set,
# all of them are packed into $OUT/flashinfer-modules-<version>-<arch>.tar.xz
# (copy it into DIR for the next machine).
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

if [ -n "${BENCH_WHEELS:-}" ]; then
  site=${BENCH_SITE:-/tmp/bench-site}
  wheels=$(cd "$BENCH_WHEELS" && cksum ./*.whl)
  # Reinstalling would renew the sources' times and make ninja recompile
  # every JIT module: install only what is not there yet.
  if [ "$(cat "$site/.bench-wheels" 2>/dev/null)" != "$wheels" ]; then
    if python3 -m pip install -q --no-index --no-deps --no-compile \
        --no-cache-dir --upgrade --target "$site" "$BENCH_WHEELS"/*.whl; then
      echo "$wheels" >"$site/.bench-wheels"
    else
      echo "bench/run.sh: could not install $BENCH_WHEELS/*.whl; bench.py" \
           "skips the flashinfer column if it cannot import it" >&2
    fi
  fi
  export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
  export FLASHINFER_WORKSPACE_BASE=${FLASHINFER_WORKSPACE_BASE:-/tmp/flashinfer-bench}
  export MAX_JOBS=${MAX_JOBS:-$(nproc)}
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
  fi
  fi_version=none
  for info in "$site"/flashinfer_python-*.dist-info; do
    [ -d "$info" ] || continue
    fi_version=$(basename "$info" .dist-info)
    fi_version=${fi_version#flashinfer_python-}
  done
  aot=$site/flashinfer/data/aot  # where FlashInfer looks for prebuilt modules
  cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null \
    | head -1 | tr -d ' .' || true)
  for tarball in "$BENCH_WHEELS/flashinfer-modules-$fi_version-$cap"*.tar.xz; do
    [ -f "$tarball" ] || continue
    mkdir -p "$aot"
    tar -xJf "$tarball" -C "$aot"
    echo "unpacked FlashInfer's prebuilt modules from $tarball"
    break
  done
fi

status=0
env PYTHONUNBUFFERED=1 python3 bench/bench.py \
  --fusion-run "$build/tools/fusion-run" --ptx-dir "$ptx_dir" "$@" || status=$?

# FlashInfer's modules compiled in this run (or an earlier one on this
# machine), with the prebuilt ones, for the next machine.
if [ -n "${BENCH_WHEELS:-}" ] && [ -n "${OUT:-}" ]; then
  for jit in "$FLASHINFER_WORKSPACE_BASE/.cache/flashinfer/$fi_version"/*/cached_ops; do
    ls "$jit"/*/*.so >/dev/null 2>&1 || continue
    for so in "$jit"/*/*.so; do
      name=$(basename "$(dirname "$so")")
      mkdir -p "$aot/$name"
      cp "$so" "$aot/$name/"
    done
    arch=$(basename "$(dirname "$jit")")
    packed=$(cd "$OUT" && pwd)/flashinfer-modules-$fi_version-$arch.tar.xz
    (cd "$aot" && XZ_OPT="-T0 -6" tar -cJf "$packed" ./*/*.so)
    echo "packed FlashInfer's modules into $packed ($(du -h "$packed" | cut -f1));" \
      "copy it into $BENCH_WHEELS for the next machine"
  done
fi
exit $status
