// RUN: fusion-opt %s -split-input-file --fusion-form-kernels=strategy=none --convert-fusion-to-gpu | FileCheck %s

// The unfused (`none`) layer: one kernel per op. rmsnorm is one CTA per
// token with a block reduction; rope and kv_append are one CTA per
// (head slot, token), one thread per element pair; the projection kernel is
// the same emitter as the fused one.

// CHECK-LABEL: func.func @layer(
// CHECK: fusion.kernel @layer_k0_rmsnorm
// CHECK-SAME: launch = #fusion.launch<entry = "layer_k0_rmsnorm", grid = [batch, 1, 1], block = 64,
// CHECK-SAME: role = "normed"
// CHECK-SAME: role = "residual_out"
// CHECK-SAME: schedule = #fusion.norm_row_schedule<threads = 64, vector_width = 8, tokens_per_cta = 1>, strategy = #fusion.strategy<none>
// CHECK: fusion.kernel @layer_k1_qkv_proj
// CHECK-SAME: schedule = #fusion.projection_schedule<
// CHECK: fusion.kernel @layer_k2_rope
// CHECK-SAME: launch = #fusion.launch<entry = "layer_k2_rope", grid = [6, batch, 1], block = 32,
// CHECK-SAME: schedule = #fusion.head_schedule<kind = rope, threads = 32, head_slots = 6, elements_per_thread = 2>, strategy = #fusion.strategy<none>
// CHECK: fusion.kernel @layer_k3_kv_append
// CHECK-SAME: launch = #fusion.launch<entry = "layer_k3_kv_append", grid = [4, batch, 1], block = 32,
// CHECK-SAME: role = "key_cache"
// CHECK-SAME: #fusion.param<kind = scalar, role = "batch", dtype = i32>, #fusion.param<kind = scalar, role = "max_pages", dtype = i32>]
// CHECK-SAME: schedule = #fusion.head_schedule<kind = kv_append,

// CHECK: gpu.module @fusion_kernels
// CHECK: memref.global "private" constant @layer_k2_rope_inv_freq : memref<32xf32>
// CHECK: gpu.func @layer_k0_rmsnorm(
// CHECK-SAME: workgroup(%{{.*}} : memref<512xf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}
// CHECK-SAME: known_block_size = array<i32: 64, 1, 1>
// CHECK: gpu.block_id x
// CHECK: vector.load %{{.*}} {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK: gpu.shuffle xor %{{.*}}, %c16_i32
// CHECK: gpu.shuffle xor %{{.*}}, %c1_i32
// CHECK: gpu.barrier
// CHECK: gpu.shuffle xor
// CHECK: gpu.barrier
// CHECK: vector.store %{{.*}} {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK: gpu.return
// CHECK: gpu.func @layer_k1_qkv_proj(
// CHECK: gpu.func @layer_k2_rope(
// CHECK-SAME: known_block_size = array<i32: 32, 1, 1>
// CHECK: memref.get_global @layer_k2_rope_inv_freq
// CHECK: arith.fptosi %{{.*}} : f64 to i64
// CHECK: gpu.func @layer_k3_kv_append(
// CHECK: arith.divsi %{{.*}}, %c16
// CHECK: arith.remsi %{{.*}}, %c16
// CHECK: gpu.return
func.func @layer(%x: tensor<?x512xf16>, %res: tensor<?x512xf16>, %norm_w: tensor<512xf16>,
    %qkv_w: tensor<512x512xf16>, %pos: tensor<?xi32>,
    %block_table: tensor<?x?xi32>, %kc: memref<?x16x2x64xf16>, %vc: memref<?x16x2x64xf16>)
    -> (tensor<?x4x64xf16>, tensor<?x512xf16>) {
  %y, %h = fusion.rmsnorm %x, %norm_w residual(%res : tensor<?x512xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x512xf16>, tensor<512xf16> -> tensor<?x512xf16>, tensor<?x512xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 64 : i64}
      : tensor<?x512xf16>, tensor<512x512xf16> -> tensor<?x4x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x64xf16>, tensor<?x2x64xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%block_table, %pos]
      : tensor<?x2x64xf16> into memref<?x16x2x64xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr, %h : tensor<?x4x64xf16>, tensor<?x512xf16>
}

// -----

// bf16 LayerNorm alone (1024 elements: one 8-element chunk per thread of
// 128, kept in registers): the mean, then the variance from the registers (two
// block reductions, no shared-row reads), then the output.

// CHECK-LABEL: func.func @layernorm(
// CHECK: fusion.kernel @layernorm_k0_layernorm
// CHECK-SAME: grid = [batch, 1, 1]
// CHECK-SAME: role = "norm_bias"
// CHECK: gpu.func @layernorm_k0_layernorm(
// CHECK-SAME: memref<1099511627776xbf16>
// CHECK: vector.load %{{.*}} : memref<1099511627776xbf16>, vector<8xbf16>
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK-NOT: vector.load {{.*}}#gpu.address_space<workgroup>
// CHECK: gpu.barrier
// CHECK: gpu.barrier
// CHECK-NOT: vector.load {{.*}}#gpu.address_space<workgroup>
// CHECK: arith.truncf %{{.*}} : vector<8xf32> to vector<8xbf16>
func.func @layernorm(%x: tensor<?x1024xbf16>, %w: tensor<1024xbf16>, %b: tensor<1024xbf16>) -> tensor<?x1024xbf16> {
  %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64}
      : tensor<?x1024xbf16>, tensor<1024xbf16>, tensor<1024xbf16> -> tensor<?x1024xbf16>
  return %y : tensor<?x1024xbf16>
}

// -----

// Identical kernels (here two layers' norms) share one gpu.func; each
// fusion.kernel records the shared entry.

// CHECK-LABEL: func.func @two_norms(
// CHECK: fusion.kernel @two_norms_k0_rmsnorm
// CHECK-SAME: entry = "two_norms_k0_rmsnorm"
// CHECK: fusion.kernel @two_norms_k1_rmsnorm
// CHECK-SAME: entry = "two_norms_k0_rmsnorm"
// CHECK: gpu.module @fusion_kernels
// CHECK-COUNT-1: gpu.func
// CHECK-NOT: gpu.func
func.func @two_norms(%x: tensor<?x256xf16>, %w0: tensor<256xf16>, %w1: tensor<256xf16>) -> tensor<?x256xf16> {
  %a = fusion.rmsnorm %x, %w0 {epsilon = 1.0e-05 : f64} : tensor<?x256xf16>, tensor<256xf16> -> tensor<?x256xf16>
  %b = fusion.rmsnorm %a, %w1 {epsilon = 1.0e-05 : f64} : tensor<?x256xf16>, tensor<256xf16> -> tensor<?x256xf16>
  return %b : tensor<?x256xf16>
}

// -----

// A row that is not a whole number of strides (576 elements, 96 threads x 8):
// the row stays in registers with its one chunk guarded. Thread t reads
// element 8t of x, the residual and the weight (element 0 where 8t is past
// the row: always in the buffers) in one round trip, before the reduction;
// the threads past the row add zeros and store nothing.

// CHECK-LABEL: func.func @row576(
// CHECK: gpu.func @row576_k0_rmsnorm(
// CHECK: %[[E:.*]] = arith.muli %thread_id_x, %c8 : index
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[E]], %c576{{.*}} : index
// CHECK: %[[AT:.*]] = arith.select %[[IN]], %[[E]], %c0{{.*}} : index
// CHECK: vector.load %{{.*}} : memref<1099511627776xf16>, vector<8xf16>
// CHECK-NEXT: vector.load %{{.*}} : memref<1099511627776xf16>, vector<8xf16>
// CHECK-NEXT: %[[W:.*]] = vector.load %{{.*}}[%[[AT]]] {{.*}} : memref<1099511627776xf16>, vector<8xf16>
// CHECK: scf.if %[[IN]] {
// CHECK: vector.store
// CHECK: %[[SQ:.*]] = arith.mulf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK-NEXT: arith.select %[[IN]], %[[SQ]], %{{.*}} : vector<8xf32>
// CHECK: gpu.shuffle xor
// CHECK-NOT: vector.load %{{.*}} : memref<1099511627776xf16>
// CHECK: gpu.barrier
// CHECK: scf.if %[[IN]] {
// CHECK: arith.extf %[[W]] : vector<8xf16> to vector<8xf32>
// CHECK: gpu.return
func.func @row576(%x: tensor<?x576xf16>, %res: tensor<?x576xf16>, %norm_w: tensor<576xf16>)
    -> (tensor<?x576xf16>, tensor<?x576xf16>) {
  %y, %h = fusion.rmsnorm %x, %norm_w residual(%res : tensor<?x576xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x576xf16>, tensor<576xf16> -> tensor<?x576xf16>, tensor<?x576xf16>
  return %y, %h : tensor<?x576xf16>, tensor<?x576xf16>
}
