// RUN: fusion-opt %s -split-input-file --fusion-form-kernels | FileCheck %s

// Ops that are not fusion ops between members of a chain.

// A side-effecting op ends the group: the norm is alone, the rest of the
// chain forms the next group after the store.
// CHECK-LABEL: func.func @store_interrupts(
//       CHECK:   %[[N:.+]] = fusion.kernel @store_interrupts_k0_rmsnorm
//       CHECK:   memref.store
//       CHECK:   fusion.kernel @store_interrupts_k1_fused ({{.*}} = %[[N]],
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.rope
func.func @store_interrupts(%x: tensor<?x64xf16>, %nw: tensor<64xf16>, %qkv_w: tensor<128x64xf16>,
    %pos: tensor<?xi32>, %flag: memref<1xi32>) -> tensor<?x4x16xf16> {
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : i32
  memref.store %c1, %flag[%c0] : memref<1xi32>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  return %qr : tensor<?x4x16xf16>
}

// -----
// A pure op that neither feeds nor depends on the chain does not interrupt
// it; the kernel is placed at the chain's first op, before it.
// CHECK-LABEL: func.func @pure_op_between(
//       CHECK:   fusion.kernel @pure_op_between_k0_fused
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.rope
//  CHECK-NEXT:     fusion.yield
//       CHECK:   arith.addi
func.func @pure_op_between(%x: tensor<?x64xf16>, %nw: tensor<64xf16>, %qkv_w: tensor<128x64xf16>,
    %pos: tensor<?xi32>, %a: i32) -> (tensor<?x4x16xf16>, i32) {
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %s = arith.addi %a, %a : i32
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  return %qr, %s : tensor<?x4x16xf16>, i32
}

// -----
// A pure op computed after the chain started that RoPE needs (its
// positions) cannot move above the group's first op, so RoPE cannot join
// without a cycle: norm + projection fuse, RoPE is its own kernel.
// CHECK-LABEL: func.func @late_operand(
//       CHECK:   %[[P:.+]]:2 = fusion.kernel @late_operand_k0_fused
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.yield
//       CHECK:   %[[POS:.+]] = tensor.extract_slice
//       CHECK:   fusion.kernel @late_operand_k1_rope ({{.*}} = %[[P]]#0, {{.*}} = %[[P]]#1, {{.*}} = %[[POS]])
func.func @late_operand(%x: tensor<?x64xf16>, %nw: tensor<64xf16>, %qkv_w: tensor<128x64xf16>,
    %all_pos: tensor<?xi32>, %b: index) -> tensor<?x4x16xf16> {
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %pos = tensor.extract_slice %all_pos[0] [%b] [1] : tensor<?xi32> to tensor<?xi32>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  return %qr : tensor<?x4x16xf16>
}

// -----
// An op that uses a group result and feeds a later member (a diamond through
// an outside op) would create a cycle: the chain is cut before that member.
// CHECK-LABEL: func.func @diamond_through_outside_op(
//       CHECK:   %[[P:.+]]:2 = fusion.kernel @diamond_through_outside_op_k0_fused
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     fusion.qkv_proj
//  CHECK-NEXT:     fusion.yield
//       CHECK:   %[[Q2:.+]] = tensor.empty
//       CHECK:   fusion.kernel @diamond_through_outside_op_k1_rope ({{.*}} = %[[P]]#0,
func.func @diamond_through_outside_op(%x: tensor<?x64xf16>, %nw: tensor<64xf16>, %qkv_w: tensor<128x64xf16>,
    %pos: tensor<?xi32>) -> (tensor<?x4x16xf16>, tensor<?x2x16xf16>) {
  %y = fusion.rmsnorm %x, %nw {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  %c0 = arith.constant 0 : index
  %b = tensor.dim %k, %c0 : tensor<?x2x16xf16>
  %k2 = tensor.empty(%b) : tensor<?x2x16xf16>
  %qr, %kr = fusion.rope %q, %k2, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
  return %qr, %kr : tensor<?x4x16xf16>, tensor<?x2x16xf16>
}
