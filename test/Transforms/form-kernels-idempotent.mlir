// Running the pass twice changes nothing, for both strategies, and a second
// run with the other strategy leaves formed kernels alone.
// RUN: fusion-opt %s --fusion-form-kernels > %t.once
// RUN: fusion-opt %t.once --fusion-form-kernels > %t.twice
// RUN: diff %t.once %t.twice
// RUN: fusion-opt %t.once --fusion-form-kernels=strategy=none > %t.other
// RUN: diff %t.once %t.other
// RUN: fusion-opt %s --fusion-form-kernels=strategy=none > %t.none.once
// RUN: fusion-opt %t.none.once --fusion-form-kernels=strategy=none > %t.none.twice
// RUN: diff %t.none.once %t.none.twice
// RUN: FileCheck %s < %t.once

// CHECK-COUNT-2: fusion.kernel
func.func @layer(%x: tensor<?x64xf16>, %nw: tensor<64xf16>, %w: tensor<128x64xf16>, %pos: tensor<?xi32>,
    %lens: tensor<?xi32>, %bt: tensor<?x?xi32>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>)
    -> tensor<?x4x16xf16> {
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %q, %k, %v = fusion.qkv_proj %y, %w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%bt, %pos]
      : tensor<?x2x16xf16> into memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.decode_attention %qr, %kc, %vc[%bt, %lens]
      : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %o : tensor<?x4x16xf16>
}
