// RUN: fusion-opt %s --convert-fusion-to-gpu | FileCheck %s

// Rule 6 of --fusion-form-kernels in the emitters, at SmolLM2-135M's shape
// (9 query heads, 3 KV heads of 64, hidden 576): the attention kernel also
// projects its 3 heads by W_o into one fp32 partial per KV group, and the
// gate/up kernel sums the partials in its norm's prologue.

// The attention kernel takes W_o as a weight and yields [B, 3, 576] f32.
// CHECK-LABEL: func.func @smol
// CHECK:       fusion.kernel @attn_o
// CHECK-SAME:    grid = [num_splits, 3, batch], block = 256
// CHECK-SAME:    #fusion.param<kind = input, role = "weight", dtype = f16, shape = [576, 576]>, #fusion.param<kind = output, role = "output", dtype = f32, shape = [batch, 3, 576]>
// The gate/up kernel takes them as its input.
// CHECK:       fusion.kernel @mlp
// CHECK-SAME:    params = [#fusion.param<kind = input, role = "input", dtype = f32, shape = [batch, 3, 576]>

// Before griddepcontrol.wait: the L2 prefetch of this split's share of W_o,
// 384 bytes (3 heads x 64 columns) per row, then the loads of its first
// round into registers (4 rows x 3 heads of 8 elements per thread).
// CHECK:       gpu.func @attn_o(%{{[^:]*}}: memref<1099511627776xf16>, %{{[^:]*}}: memref<1099511627776xf16>, %{{[^:]*}}: memref<1099511627776xf16>, %{{[^:]*}}: memref<1099511627776xi32>, %{{[^:]*}}: memref<1099511627776xi32>, %[[W:[^:]*]]: memref<1099511627776xf16>,
// CHECK:         nvvm.cp.async.bulk.prefetch %{{.*}}, %c384_i32
// CHECK-COUNT-12:  vector.load %[[W]][%{{.*}}] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK-NEXT:    llvm.inline_asm has_side_effects "griddepcontrol.wait;"
// The cluster path: every CTA stores its partial into every CTA of the
// cluster (ranks 1 to 7 where below num_splits), then every CTA waits and
// combines, and projects its share of the rows.
// CHECK:         nvvm.mapa %{{.*}}, %c0_i32
// CHECK:         arith.cmpi slt, %c1_i32{{.*}}, %{{.*}} : i32
// CHECK-NEXT:    scf.if
// CHECK-NEXT:      arith.constant 1 : i32
// CHECK-NEXT:      nvvm.mapa %{{.*}}, %c1_i32
// CHECK:         nvvm.cluster.arrive
// CHECK-NEXT:    nvvm.cluster.wait
// The projection: FMAs over the 3 heads, a shuffle tree over the 8 lanes of
// a row, and fp32 stores of the partials.
// CHECK:         vector.fma
// CHECK:         gpu.shuffle  xor %{{.*}}, %c4_i32
// CHECK:         memref.store %{{.*}}, %[[PROJ:arg6]][%{{.*}}] : memref<1099511627776xf32>

// The gate/up kernel: x = round(p0 + p1 + p2), the partials added in order
// as f32 vectors, before the residual add.
// CHECK:       gpu.func @mlp(%[[P:[^:]*]]: memref<1099511627776xf32>,
// CHECK:         %[[P0:.*]] = vector.load %[[P]][%{{.*}}] {alignment = 32 : i64} : memref<1099511627776xf32>, vector<8xf32>
// CHECK:         %[[P1:.*]] = vector.load %[[P]][%{{.*}}] {alignment = 32 : i64} : memref<1099511627776xf32>, vector<8xf32>
// CHECK-NEXT:    %[[S01:.*]] = arith.addf %[[P0]], %[[P1]] : vector<8xf32>
// CHECK:         %[[P2:.*]] = vector.load %[[P]][%{{.*}}] {alignment = 32 : i64} : memref<1099511627776xf32>, vector<8xf32>
// CHECK-NEXT:    %[[S:.*]] = arith.addf %[[S01]], %[[P2]] : vector<8xf32>
// CHECK-NEXT:    arith.truncf %[[S]] : vector<8xf32> to vector<8xf16>
func.func @smol(%qr: tensor<?x9x64xf16>, %kc: memref<?x16x3x64xf16>, %vc: memref<?x16x3x64xf16>,
    %block_table: tensor<?x?xi32>, %seq_lens: tensor<?xi32>, %x: tensor<?x576xf16>,
    %o_w: tensor<576x576xf16>, %post_w: tensor<576xf16>, %gate_up_w: tensor<3072x576xf16>)
    -> (tensor<?x576xf16>, tensor<?x1536xf16>) {
  %p = fusion.kernel @attn_o (%a0 = %qr, %a1 = %kc, %a2 = %vc, %a3 = %block_table, %a4 = %seq_lens, %a5 = %o_w)
      : (tensor<?x9x64xf16>, memref<?x16x3x64xf16>, memref<?x16x3x64xf16>, tensor<?x?xi32>, tensor<?xi32>, tensor<576x576xf16>) -> tensor<?x3x576xf32>
      attributes {strategy = #fusion.strategy<decode>} {
    %a = fusion.decode_attention %a0, %a1, %a2[%a3, %a4] : tensor<?x9x64xf16>, memref<?x16x3x64xf16>, tensor<?x?xi32>, tensor<?xi32>
    %o = fusion.linear_partials %a, %a5 : tensor<?x9x64xf16>, tensor<576x576xf16> -> tensor<?x3x576xf32>
    fusion.yield %o : tensor<?x3x576xf32>
  }
  %h, %m = fusion.kernel @mlp (%b0 = %p, %b1 = %post_w, %b2 = %x, %b3 = %gate_up_w)
      : (tensor<?x3x576xf32>, tensor<576xf16>, tensor<?x576xf16>, tensor<3072x576xf16>) -> (tensor<?x576xf16>, tensor<?x1536xf16>)
      attributes {strategy = #fusion.strategy<decode>} {
    %s = fusion.sum_partials %b0 : tensor<?x3x576xf32> -> tensor<?x576xf16>
    %y, %r = fusion.rmsnorm %s, %b1 residual(%b2 : tensor<?x576xf16>) {epsilon = 1.0e-05 : f64}
        : tensor<?x576xf16>, tensor<576xf16> -> tensor<?x576xf16>, tensor<?x576xf16>
    %gu = fusion.linear %y, %b3 : tensor<?x576xf16>, tensor<3072x576xf16> -> tensor<?x3072xf16>
    %act = fusion.silu_mul %gu : tensor<?x3072xf16> -> tensor<?x1536xf16>
    fusion.yield %r, %act : tensor<?x576xf16>, tensor<?x1536xf16>
  }
  return %h, %m : tensor<?x576xf16>, tensor<?x1536xf16>
}
