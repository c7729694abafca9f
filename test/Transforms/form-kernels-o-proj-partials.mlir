// Rule 6 of --fusion-form-kernels: o_proj folded into the attention kernel
// as per-KV-group fp32 partials, summed in the next kernel's norm prologue.
// RUN: fusion-opt %s --split-input-file --fusion-form-kernels=o-proj-partials-max-bytes=8192 | FileCheck %s
// RUN: fusion-opt %s --split-input-file --fusion-form-kernels --fusion-form-kernels | FileCheck %s
// RUN: fusion-opt %s --split-input-file --fusion-form-kernels=o-proj-partials-max-bytes=8191 | FileCheck %s --check-prefix=SMALL
// RUN: fusion-opt %s --split-input-file --fusion-form-kernels | FileCheck %s
// RUN: fusion-opt %s --split-input-file --fusion-form-kernels=o-proj-partials-max-bytes=0 | FileCheck %s --check-prefix=SMALL
// RUN: fusion-opt %s --split-input-file --fusion-form-kernels="strategy=none o-proj-partials-max-bytes=8192" | FileCheck %s --check-prefix=NONE

// The back half of a layer (4 query heads, 2 KV heads, W_o 64 x 64 f16 =
// 8192 bytes): the attention kernel yields [B, 2, 64] f32 partials (one per
// KV group) and the next kernel sums them before the post-attention norm.
// A second run changes nothing.
// CHECK-LABEL: func.func @back_half(
//       CHECK:   %[[A:.+]] = fusion.kernel @back_half_k0_fused
//  CHECK-SAME:     -> tensor<?x2x64xf32>
//  CHECK-NEXT:     %[[O:.+]] = fusion.decode_attention
//  CHECK-NEXT:     %[[P:.+]] = fusion.linear_partials %[[O]], %{{.*}} : tensor<?x4x16xf16>, tensor<64x64xf16> -> tensor<?x2x64xf32>
//  CHECK-NEXT:     fusion.yield %[[P]]
//       CHECK:   fusion.kernel @back_half_k1_fused ({{.*}} = %[[A]],
//  CHECK-SAME:     -> (tensor<?x64xf16>, tensor<?x128xf16>)
//  CHECK-NEXT:     %[[S:.+]] = fusion.sum_partials %{{.*}} : tensor<?x2x64xf32> -> tensor<?x64xf16>
//  CHECK-NEXT:     fusion.rmsnorm %[[S]], {{.*}} residual(
//  CHECK-NEXT:     fusion.linear
//  CHECK-NEXT:     fusion.silu_mul
//  CHECK-NEXT:     fusion.yield
//   CHECK-NOT:   fusion.kernel
// W_o above o-proj-partials-max-bytes (or the rule off, 0): o_proj stays a
// kernel.
// SMALL-LABEL: func.func @back_half(
//       SMALL:   fusion.kernel @back_half_k0_decode_attention
//       SMALL:   fusion.kernel @back_half_k1_linear
//  SMALL-NEXT:     fusion.linear
//       SMALL:   fusion.kernel @back_half_k2_fused
//  SMALL-NEXT:     fusion.rmsnorm
//   SMALL-NOT:   linear_partials
// `none` never folds.
// NONE-LABEL: func.func @back_half(
//   NONE-NOT:   linear_partials
//       NONE:   fusion.kernel @back_half_k1_linear
func.func @back_half(%qr: tensor<?x4x16xf16>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>,
    %block_table: tensor<?x?xi32>, %seq_lens: tensor<?xi32>, %x: tensor<?x64xf16>,
    %o_w: tensor<64x64xf16>, %post_w: tensor<64xf16>, %gate_up_w: tensor<256x64xf16>)
    -> (tensor<?x64xf16>, tensor<?x128xf16>) {
  %a = fusion.decode_attention %qr, %kc, %vc[%block_table, %seq_lens]
      : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.linear %a, %o_w : tensor<?x4x16xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %y, %h = fusion.rmsnorm %o, %post_w residual(%x : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %gu = fusion.linear %y, %gate_up_w : tensor<?x64xf16>, tensor<256x64xf16> -> tensor<?x256xf16>
  %m = fusion.silu_mul %gu : tensor<?x256xf16> -> tensor<?x128xf16>
  return %h, %m : tensor<?x64xf16>, tensor<?x128xf16>
}

// -----

// The attention output has another use (it is returned): no fold.
// CHECK-LABEL: func.func @attention_returned(
//   CHECK-NOT:   linear_partials
//       CHECK:   fusion.kernel @attention_returned_k1_linear
func.func @attention_returned(%qr: tensor<?x4x16xf16>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>,
    %block_table: tensor<?x?xi32>, %seq_lens: tensor<?xi32>, %x: tensor<?x64xf16>,
    %o_w: tensor<64x64xf16>, %post_w: tensor<64xf16>, %gate_up_w: tensor<256x64xf16>)
    -> (tensor<?x4x16xf16>, tensor<?x256xf16>) {
  %a = fusion.decode_attention %qr, %kc, %vc[%block_table, %seq_lens]
      : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.linear %a, %o_w : tensor<?x4x16xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %y, %h = fusion.rmsnorm %o, %post_w residual(%x : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %gu = fusion.linear %y, %gate_up_w : tensor<?x64xf16>, tensor<256x64xf16> -> tensor<?x256xf16>
  return %a, %gu : tensor<?x4x16xf16>, tensor<?x256xf16>
}

// -----

// The post-attention norm has no residual: no fold (the consumer's prologue
// is the residual add's).
// CHECK-LABEL: func.func @no_residual(
//   CHECK-NOT:   linear_partials
//       CHECK:   fusion.kernel @no_residual_k1_linear
func.func @no_residual(%qr: tensor<?x4x16xf16>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>,
    %block_table: tensor<?x?xi32>, %seq_lens: tensor<?xi32>,
    %o_w: tensor<64x64xf16>, %post_w: tensor<64xf16>, %gate_up_w: tensor<256x64xf16>)
    -> tensor<?x256xf16> {
  %a = fusion.decode_attention %qr, %kc, %vc[%block_table, %seq_lens]
      : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.linear %a, %o_w : tensor<?x4x16xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %y = fusion.rmsnorm %o, %post_w {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %gu = fusion.linear %y, %gate_up_w : tensor<?x64xf16>, tensor<256x64xf16> -> tensor<?x256xf16>
  return %gu : tensor<?x256xf16>
}

// -----

// More than 8 query heads per KV head (16 heads, 1 KV head): no fold (the
// attention kernel would split the group over several CTAs).
// CHECK-LABEL: func.func @group16(
//   CHECK-NOT:   linear_partials
//       CHECK:   fusion.kernel @group16_k1_linear
func.func @group16(%qr: tensor<?x16x16xf16>, %kc: memref<?x4x1x16xf16>, %vc: memref<?x4x1x16xf16>,
    %block_table: tensor<?x?xi32>, %seq_lens: tensor<?xi32>, %x: tensor<?x64xf16>,
    %o_w: tensor<64x256xf16>, %post_w: tensor<64xf16>, %gate_up_w: tensor<256x64xf16>)
    -> (tensor<?x64xf16>, tensor<?x256xf16>) {
  %a = fusion.decode_attention %qr, %kc, %vc[%block_table, %seq_lens]
      : tensor<?x16x16xf16>, memref<?x4x1x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.linear %a, %o_w : tensor<?x16x16xf16>, tensor<64x256xf16> -> tensor<?x64xf16>
  %y, %h = fusion.rmsnorm %o, %post_w residual(%x : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %gu = fusion.linear %y, %gate_up_w : tensor<?x64xf16>, tensor<256x64xf16> -> tensor<?x256xf16>
  return %h, %gu : tensor<?x64xf16>, tensor<?x256xf16>
}

// -----

// Another op between o_proj and the norm (here the embedding that makes the
// residual): no fold, since sum_partials could not join the norm's kernel
// and no emitter takes it alone.
// CHECK-LABEL: func.func @op_between(
//   CHECK-NOT:   linear_partials
//       CHECK:   fusion.kernel @op_between_k1_linear
func.func @op_between(%qr: tensor<?x4x16xf16>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>,
    %block_table: tensor<?x?xi32>, %seq_lens: tensor<?xi32>,
    %o_w: tensor<64x64xf16>, %post_w: tensor<64xf16>, %gate_up_w: tensor<256x64xf16>,
    %tok: tensor<?xi32>, %tab: tensor<100x64xf16>) -> (tensor<?x64xf16>, tensor<?x256xf16>) {
  %a = fusion.decode_attention %qr, %kc, %vc[%block_table, %seq_lens]
      : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
  %o = fusion.linear %a, %o_w : tensor<?x4x16xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %e = fusion.embedding %tok, %tab : tensor<?xi32>, tensor<100x64xf16> -> tensor<?x64xf16>
  %y, %h = fusion.rmsnorm %o, %post_w residual(%e : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %gu = fusion.linear %y, %gate_up_w : tensor<?x64xf16>, tensor<256x64xf16> -> tensor<?x256xf16>
  return %h, %gu : tensor<?x64xf16>, tensor<?x256xf16>
}
