// RUN: fusion-opt %s -split-input-file --fusion-form-kernels | FileCheck %s
// RUN: fusion-opt %s -split-input-file --fusion-form-kernels=strategy=none | FileCheck %s --check-prefix=NONE

// Rule 1's linear -> argmax edge (the final norm, the LM head and greedy
// sampling in one kernel) and rule 2's exception for the logits; the whole
// decode step is in form-kernels-back-half.mlir.

// Logits that the function also returns (as the whole model does, for
// scoring): the argmax stays in the LM head's kernel (rule 2's exception)
// and the kernel yields the logits too, which the return reads.

// CHECK-LABEL: func.func @head_returns_logits(
//       CHECK:   %[[K:.+]]:2 = fusion.kernel @head_returns_logits_k0_fused
//  CHECK-SAME:     -> (tensor<?x256xf16>, tensor<?xi32>)
//  CHECK-NEXT:     fusion.rmsnorm
//  CHECK-NEXT:     %[[LG:.+]] = fusion.linear
//  CHECK-NEXT:     %[[IDS:.+]] = fusion.argmax %[[LG]]
//  CHECK-NEXT:     fusion.yield %[[LG]], %[[IDS]] :
//       CHECK:   return %[[K]]#1, %[[K]]#0
//   CHECK-NOT:   fusion.kernel
// NONE-LABEL: func.func @head_returns_logits(
//       NONE:   fusion.kernel @head_returns_logits_k0_rmsnorm
//       NONE:   fusion.kernel @head_returns_logits_k1_linear
//       NONE:   fusion.kernel @head_returns_logits_k2_argmax
func.func @head_returns_logits(%x: tensor<?x64xf16>, %w: tensor<64xf16>,
    %head: tensor<256x64xf16>) -> (tensor<?xi32>, tensor<?x256xf16>) {
  %f = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %logits = fusion.linear %f, %head : tensor<?x64xf16>, tensor<256x64xf16> -> tensor<?x256xf16>
  %next = fusion.argmax %logits : tensor<?x256xf16> -> tensor<?xi32>
  return %next, %logits : tensor<?xi32>, tensor<?x256xf16>
}

// -----
// Rule 1 holds argmax to logits a linear of the group computes: an argmax
// of a function argument, or of SwiGLU activations, is a kernel of its own.

// CHECK-LABEL: func.func @argmax_alone(
//       CHECK:   fusion.kernel @argmax_alone_k0_argmax
//       CHECK:   fusion.kernel @argmax_alone_k1_fused
//  CHECK-NEXT:     fusion.linear
//  CHECK-NEXT:     fusion.silu_mul
//  CHECK-NEXT:     fusion.yield
//       CHECK:   fusion.kernel @argmax_alone_k2_argmax
//  CHECK-NEXT:     fusion.argmax
//  CHECK-NEXT:     fusion.yield
func.func @argmax_alone(%logits: tensor<?x256xf16>, %x: tensor<?x64xf16>,
    %gate_up_w: tensor<256x64xf16>) -> (tensor<?xi32>, tensor<?xi32>) {
  %a = fusion.argmax %logits : tensor<?x256xf16> -> tensor<?xi32>
  %gu = fusion.linear %x, %gate_up_w : tensor<?x64xf16>, tensor<256x64xf16> -> tensor<?x256xf16>
  %m = fusion.silu_mul %gu : tensor<?x256xf16> -> tensor<?x128xf16>
  %b = fusion.argmax %m : tensor<?x128xf16> -> tensor<?xi32>
  return %a, %b : tensor<?xi32>, tensor<?xi32>
}
