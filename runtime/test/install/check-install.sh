#!/bin/sh
# ctest runtime.install: installs the runtime component of the build tree
# BUILD into a scratch prefix, builds the consumer project against it with
# find_package(fusion), and checks what it prints for MANIFEST (expected:
# EXPECTED, e.g. "0.1.0 decode_layer 2").
#   check-install.sh BUILD SCRATCH MANIFEST EXPECTED
set -eu
build=$1 scratch=$2 manifest=$3 expected=$4
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$scratch"
cmake --install "$build" --component fusion_runtime --prefix "$scratch/prefix" > /dev/null
test -L "$scratch/prefix/lib/libfusion.so.0"
cmake -S "$here" -B "$scratch/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$scratch/prefix" > /dev/null
cmake --build "$scratch/consumer" > /dev/null
got=$("$scratch/consumer/consumer" "$manifest")
if [ "$got" != "$expected" ]; then
  echo "check-install.sh: the consumer printed \"$got\", expected \"$expected\"" >&2
  exit 1
fi
echo "installed runtime OK: $got"
