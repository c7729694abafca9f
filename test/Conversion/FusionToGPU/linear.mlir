// RUN: fusion-opt %s -split-input-file --fusion-form-kernels --convert-fusion-to-gpu | FileCheck %s
// The emitted IR parses and verifies again (the schedules' own verifiers):
// RUN: fusion-opt %s -split-input-file --fusion-form-kernels --convert-fusion-to-gpu | fusion-opt -split-input-file > /dev/null
// RUN: rm -rf %t && mkdir -p %t
// RUN: fusion-compile %s -o %t/linear
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t/linear.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t/linear.ptx -o %t/linear.cubin %}

// The linear layers of a decoder's back half lower through the projection
// kernels (Kernels/Projection.h): a linear layer is a projection whose heads
// are its output row pairs. o_proj reads the [B, 4, 16] attention output as
// [B, 64]; the post-attention norm (with the residual add), gate/up and
// SwiGLU are one kernel whose output is [B, I] = [B, 128]; down_proj; the
// final norm with the LM head. Each gets the CUDA-core kernel at batch 1 and
// the GEMM-shaped variants from batch 2 (tile rows: whole "heads", so 2-row
// pairs tile freely; gate/up tiles of 128 rows hold 64 whole (gate, up)
// pairs: 2 tiles).

// CHECK-LABEL: func.func @mlp(
// CHECK: fusion.kernel @mlp_k0_linear
// CHECK-SAME: params = [#fusion.param<kind = input, role = "input", dtype = f16, shape = [batch, 4, 16]>,
// CHECK-SAME: #fusion.param<kind = input, role = "weight", dtype = f16, shape = [64, 64]>,
// CHECK-SAME: #fusion.param<kind = output, role = "output", dtype = f16, shape = [batch, 64]>,
// CHECK-SAME: #fusion.variant<min_batch = 2, entry = "mlp_k0_linear_gemm16"
// CHECK-SAME: tile_rows = 64
// CHECK: fusion.kernel @mlp_k1_fused
// CHECK-SAME: #fusion.param<kind = input, role = "residual", dtype = f16, shape = [batch, 64]>,
// CHECK-SAME: #fusion.param<kind = input, role = "weight", dtype = f16, shape = [256, 64]>,
// CHECK-SAME: #fusion.param<kind = output, role = "residual_out", dtype = f16, shape = [batch, 64]>,
// CHECK-SAME: #fusion.param<kind = output, role = "output", dtype = f16, shape = [batch, 128]>,
// CHECK-SAME: #fusion.variant<min_batch = 2, entry = "mlp_k1_fused_gemm16", grid = [2, 1, 1], block = 256
// CHECK-SAME: tile_rows = 128
// CHECK: fusion.kernel @mlp_k2_linear
// CHECK-SAME: shape = [batch, 128]>, #fusion.param<kind = input, role = "weight", dtype = f16, shape = [64, 128]>
// CHECK: fusion.kernel @mlp_k3_fused
// CHECK-SAME: #fusion.param<kind = input, role = "weight", dtype = f16, shape = [512, 64]>,
// CHECK-SAME: #fusion.param<kind = output, role = "output", dtype = f16, shape = [batch, 512]>,

// The gate/up epilogue of the CUDA-core kernel: the two dot products
// rounded to f16 (the linear's output), silu(g) * u in fp32, one rounding,
// stored at [token, j] of the [B, 128] output.
// CHECK: gpu.func @mlp_k1_fused(
// CHECK: %[[G:.+]] = arith.truncf %{{.*}} : f32 to f16
// CHECK: %[[U:.+]] = arith.truncf %{{.*}} : f32 to f16
// CHECK-DAG: %[[U32:.+]] = arith.extf %[[U]] : f16 to f32
// CHECK-DAG: %[[G32:.+]] = arith.extf %[[G]] : f16 to f32
// CHECK: %[[NEG:.+]] = arith.mulf %[[G32]], %{{.*}} : f32
// CHECK: %[[EXP:.+]] = llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"(%[[NEG]])
// CHECK: %[[DEN:.+]] = arith.addf %{{.*}}, %[[EXP]] : f32
// CHECK: %[[SILU:.+]] = arith.divf %[[G32]], %[[DEN]] : f32
// CHECK: %[[ACT:.+]] = arith.mulf %[[SILU]], %[[U32]] : f32
// CHECK: %[[AT:.+]] = arith.muli %{{.*}}, %c128{{.*}} : index
// CHECK: %[[OUT:.+]] = arith.truncf %[[ACT]] : f32 to f16
// CHECK: memref.store %[[OUT]], %arg5[
// CHECK: gpu.return

// PTX-DAG: .visible .entry mlp_k0_linear(
// PTX-DAG: .visible .entry mlp_k1_fused_gemm64(
// PTX-DAG: .visible .entry mlp_k3_fused_gemm16(
// PTX-DAG: ex2.approx.ftz.f32
func.func @mlp(%a: tensor<?x4x16xf16>, %o_w: tensor<64x64xf16>, %x: tensor<?x64xf16>, %post_w: tensor<64xf16>,
               %gate_up_w: tensor<256x64xf16>, %down_w: tensor<64x128xf16>, %final_w: tensor<64xf16>,
               %head_w: tensor<512x64xf16>) -> (tensor<?x512xf16>, tensor<?x64xf16>) {
  %o = fusion.linear %a, %o_w : tensor<?x4x16xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
  %y2, %h2 = fusion.rmsnorm %o, %post_w residual(%x : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %gu = fusion.linear %y2, %gate_up_w : tensor<?x64xf16>, tensor<256x64xf16> -> tensor<?x256xf16>
  %m = fusion.silu_mul %gu : tensor<?x256xf16> -> tensor<?x128xf16>
  %d = fusion.linear %m, %down_w : tensor<?x128xf16>, tensor<64x128xf16> -> tensor<?x64xf16>
  %f, %h3 = fusion.rmsnorm %d, %final_w residual(%h2 : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  %logits = fusion.linear %f, %head_w : tensor<?x64xf16>, tensor<512x64xf16> -> tensor<?x512xf16>
  return %logits, %h2 : tensor<?x512xf16>, tensor<?x64xf16>
}

// -----

// Gate/up in the GEMM-shaped variant, bf16, I = 256: tile t of 128 rows
// stages the gate rows of pairs [64t, 64t + 64) and then their up rows, so
// staged row r of the tile starting at kernel row n0 is weight row
// n0 / 2 + r (r < 64) or 256 + n0 / 2 + (r - 64); the reduction reads pair
// j's partial sums at kernel rows 128 (j / 64) + j % 64 and 64 further.
// CHECK-LABEL: func.func @gate_up(
// CHECK: fusion.kernel @gate_up_k0_fused
// CHECK-SAME: #fusion.param<kind = output, role = "output", dtype = bf16, shape = [batch, 256]>
// CHECK-SAME: variants = [#fusion.variant<min_batch = 2, entry = "gate_up_k0_fused_gemm16", grid = [4, 1, 1]
// CHECK-SAME: tile_rows = 128
// CHECK: gpu.func @gate_up_k0_fused_gemm16(
// CHECK: %[[N0:.+]] = arith.muli %{{.*}}, %c128{{.*}} : index
// CHECK: %[[FIRST:.+]] = arith.divui %[[N0]], %c2{{.*}} : index
// CHECK: %[[UP:.+]] = arith.cmpi uge, %[[R:.+]], %c64{{.*}} : index
// CHECK: %[[UPR:.+]] = arith.subi %[[R]], %c64
// CHECK: %[[UPROW0:.+]] = arith.addi %[[FIRST]], %[[UPR]]
// CHECK: %[[UPROW:.+]] = arith.addi %[[UPROW0]], %c256
// CHECK: %[[GATEROW:.+]] = arith.addi %[[FIRST]], %[[R]]
// CHECK: arith.select %[[UP]], %[[UPROW]], %[[GATEROW]] : index
// CHECK: llvm.nvvm.ex2.approx.ftz.f32
// CHECK: arith.truncf %{{.*}} : f32 to bf16
func.func @gate_up(%x: tensor<?x64xbf16>, %w: tensor<64xbf16>, %gu_w: tensor<512x64xbf16>) -> tensor<?x256xbf16> {
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x64xbf16>, tensor<64xbf16> -> tensor<?x64xbf16>
  %gu = fusion.linear %y, %gu_w : tensor<?x64xbf16>, tensor<512x64xbf16> -> tensor<?x512xbf16>
  %m = fusion.silu_mul %gu : tensor<?x512xbf16> -> tensor<?x256xbf16>
  return %m : tensor<?x256xbf16>
}

// -----

// An LM head at batch 1 with several row pairs per warp: 24576 pairs of
// 64-element rows over 396 CTAs x 8 warps, 8 pairs per warp. Each lane loads
// its vectors of the warp's first pair (pair 8 block + warp) before
// griddepcontrol.wait; the loop over the warp's pairs carries the vectors of
// the pair it reduces and loads those of the next one (pair + 3168, pair 0
// past the last) before that pair's dot products and shuffles.
// CHECK-LABEL: func.func @lm_head(
// CHECK: schedule = #fusion.projection_schedule<threads = 256, warps = 8, grid = 396, rows_per_warp = 2,
// CHECK-SAME: pairs_per_warp = 8, vector_width = 8, k_unroll = 1, batch_tile = 1, min_ctas_per_sm = 3,
// CHECK-SAME: preload_chunks = 1>
// CHECK: gpu.func @lm_head_k0_fused(
// CHECK: %[[A0:.*]] = vector.load %[[W:.*]][%{{.*}}] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK: %[[B0:.*]] = vector.load %[[W]][%{{.*}}] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK: "griddepcontrol.wait;"
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %c8{{.*}} step %{{.*}} iter_args(%[[A:.*]] = %[[A0]], %[[B:.*]] = %[[B0]]) -> (vector<8xf16>, vector<8xf16>) {
// CHECK: %[[STEP:.*]] = arith.muli %[[I]], %c3168 : index
// CHECK: %[[PAIR:.*]] = arith.addi %{{.*}}, %[[STEP]] : index
// CHECK: %[[NEXT:.*]] = arith.addi %[[PAIR]], %c3168 : index
// CHECK: %[[HAS:.*]] = arith.cmpi ult, %[[NEXT]], %c24576{{.*}} : index
// CHECK: arith.select %[[HAS]], %[[NEXT]], %c0{{.*}} : index
// CHECK: %[[NA:.*]] = vector.load %[[W]][%{{.*}}] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK: %[[NB:.*]] = vector.load %[[W]][%{{.*}}] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK: arith.cmpi ult, %[[PAIR]], %c24576{{.*}} : index
// CHECK: arith.extf %[[A]] : vector<8xf16> to vector<8xf32>
// CHECK: arith.extf %[[B]] : vector<8xf16> to vector<8xf32>
// CHECK: gpu.shuffle xor
// CHECK: scf.yield %[[NA]], %[[NB]] : vector<8xf16>, vector<8xf16>
func.func @lm_head(%x: tensor<?x64xf16>, %w: tensor<64xf16>, %head_w: tensor<49152x64xf16>) -> tensor<?x49152xf16> {
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %logits = fusion.linear %y, %head_w : tensor<?x64xf16>, tensor<49152x64xf16> -> tensor<?x49152xf16>
  return %logits : tensor<?x49152xf16>
}
