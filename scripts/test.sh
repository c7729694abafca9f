#!/usr/bin/env bash
# The test command: installs what is missing, builds everything, and runs all
# tests through ctest (the lit/FileCheck suite, the GoogleTest units, the
# golden cross-check and the fuzz smoke test) and the Python package's tests
# (pytest), then builds and runs the ctest suite again under the sanitizers.
# GPU tests report themselves as skipped on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --with-sanitizers
ninja -C build
ctest --test-dir build --output-on-failure

# The Python package (python/): built and installed into build/venv, then its
# tests (GPU tests skip themselves without a GPU; the engine's host side runs
# on the mock driver and the model that ctest's runtime.mock-driver.* built).
scripts/python.sh
FUSION_TEST_MOCK_DRIVER=$PWD/build/runtime/test/libfusion_mock_cuda.so \
  FUSION_TEST_MOCK_MODELS=$PWD/build/runtime/test/mock-driver-models \
  build/venv/bin/python -m pytest -q python/tests

# Again under AddressSanitizer + UndefinedBehaviorSanitizer (build-asan/): the
# unit tests, lit and the fuzz smoke test; any report fails the test. The
# golden cross-check is Python only and is not repeated.
ninja -C build-asan
ASAN_OPTIONS=allow_user_poisoning=0:detect_leaks=1:abort_on_error=1:hard_rss_limit_mb=6144 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build-asan --output-on-failure -E '^golden-'
