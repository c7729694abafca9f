// The runtime tests' fixture, runtime/test/data/tiny_decode.ptx and
// tiny_decode.manifest.json, is fusion-compile's output for
// runtime/test/data/tiny_decode.mlir, byte for byte: compile the model and
// compare both files with the committed ones.
//
// When this test fails, the compiler's output changed (codegen, schedules,
// the manifest exporter). Regenerate the fixture from the repository root:
//   build/bin/fusion-compile runtime/test/data/tiny_decode.mlir -o runtime/test/data/tiny_decode
// then run the runtime tests (ctest --test-dir build -R runtime) and update
// the expectations the change affects (grids, blocks, entry names, shared
// memory, schedules), deriving them from the model and docs/abi.md.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: fusion-compile %fusion_src_root/runtime/test/data/tiny_decode.mlir -o %t/tiny_decode
// RUN: diff %fusion_src_root/runtime/test/data/tiny_decode.manifest.json %t/tiny_decode.manifest.json || \
// RUN:   not echo "tiny_decode.manifest.json is not the compiler's output. Regenerate the fixture: fusion-compile %fusion_src_root/runtime/test/data/tiny_decode.mlir -o %fusion_src_root/runtime/test/data/tiny_decode (and see %s)"
// RUN: diff %fusion_src_root/runtime/test/data/tiny_decode.ptx %t/tiny_decode.ptx > %t/ptx.diff || \
// RUN:   not echo "tiny_decode.ptx is not the compiler's output (diff: %t/ptx.diff). Regenerate the fixture: fusion-compile %fusion_src_root/runtime/test/data/tiny_decode.mlir -o %fusion_src_root/runtime/test/data/tiny_decode (and see %s)"
