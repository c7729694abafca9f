// The committed 32-layer example is exactly what the generator writes.
// RUN: %python %fusion_src_root/examples/gen_layers.py --layers 32 > %t
// RUN: diff -u %fusion_src_root/examples/llama3_8b_32layers.mlir %t

// A smaller module from the generator parses and verifies too: 3 layers,
// 2 collapse_shapes between them, 5 + 4 * 3 = 17 arguments.
// RUN: %python %fusion_src_root/examples/gen_layers.py --layers 3 | fusion-opt | FileCheck %s
// CHECK-LABEL: func.func @decode_layers
// CHECK-SAME:    %arg16: memref<?x16x8x128xf16>) -> (tensor<?x32x128xf16>, tensor<?x4096xf16>)
// CHECK-COUNT-2: tensor.collapse_shape
// CHECK-NOT:     tensor.collapse_shape
// CHECK:         return
