// RUN: fusion-opt %s -split-input-file --fusion-form-kernels=strategy=none --convert-fusion-to-gpu | FileCheck %s
// RUN: fusion-opt %s -split-input-file --fusion-form-kernels --convert-fusion-to-gpu | FileCheck %s --check-prefix=DECODE
// RUN: rm -rf %t && mkdir -p %t
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT fusion-compile %S/Inputs/embed_argmax_swiglu.mlir --strategy=none -o %t/s
// RUN: FileCheck %s --input-file=%t/s.manifest.json --check-prefix=MANIFEST
// RUN: FileCheck %s --input-file=%t/s.ptx --check-prefix=PTX
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t/s.ptx -o %t/s.cubin %}

// The unfused SwiGLU activation, y = round(silu(g32) * u32) with
// silu(g) = g / (1 + 2^(-g * log2(e))) in fp32: grid [batch, chunks], one
// vector of the gate, the vector of the up half I elements further and one
// vector of y per thread. Llama-3-8B (I = 14336 f16): 1792 16-byte vectors,
// 256 threads x 7 chunks.

// CHECK-LABEL: func.func @llama3(
// CHECK:       fusion.kernel @llama3_k0_silu_mul
// CHECK-SAME:    launch = #fusion.launch<entry = "llama3_k0_silu_mul", grid = [batch, 7, 1], block = 256, smem = 0, static_smem = 0,
// CHECK-SAME:    params = [#fusion.param<kind = input, role = "input", dtype = f16, shape = [batch, 28672]>,
// CHECK-SAME:              #fusion.param<kind = output, role = "output", dtype = f16, shape = [batch, 14336]>,
// CHECK-SAME:              #fusion.param<kind = scalar, role = "batch", dtype = i32>]
// CHECK-SAME:    schedule = #fusion.row_schedule<kind = silu_mul, threads = 256, chunks = 7, vector_width = 8, unroll = 1>, strategy = #fusion.strategy<none>

// CHECK:       gpu.func @llama3_k0_silu_mul(%[[IN:.*]]: memref<1099511627776xf16>, %[[OUT:.*]]: memref<1099511627776xf16>, %{{.*}}: i32)
// CHECK-SAME:    known_block_size = array<i32: 256, 1, 1>
// CHECK:         %[[B:.*]] = gpu.block_id x
// CHECK:         %[[C:.*]] = gpu.block_id y
// CHECK:         %[[CT:.*]] = arith.muli %[[C]], %c256
// CHECK:         %[[V:.*]] = arith.addi %[[CT]], %{{.*}}
// CHECK:         arith.cmpi ult, %[[V]], %c1792
// CHECK:         scf.if
// CHECK:           %[[COL:.*]] = arith.muli %[[V]], %c8
// CHECK:           %[[ROW:.*]] = arith.muli %[[B]], %c28672
// CHECK:           %[[GAT:.*]] = arith.addi %[[ROW]], %[[COL]]
// CHECK:           %[[G16:.*]] = vector.load %[[IN]][%[[GAT]]] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK:           %[[G:.*]] = arith.extf %[[G16]] : vector<8xf16> to vector<8xf32>
// CHECK:           %[[UAT:.*]] = arith.addi %[[GAT]], %c14336
// CHECK:           %[[U16:.*]] = vector.load %[[IN]][%[[UAT]]] {alignment = 16 : i64}
// CHECK:           %[[U:.*]] = arith.extf %[[U16]] : vector<8xf16> to vector<8xf32>
// CHECK:           %[[NLOG2E:.*]] = arith.constant -1.44269502 : f32
// CHECK:           %[[SPLAT:.*]] = vector.broadcast %[[NLOG2E]]
// CHECK:           %[[T:.*]] = arith.mulf %[[G]], %[[SPLAT]] : vector<8xf32>
// CHECK-COUNT-8:   llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK:           %[[E:.*]] = vector.from_elements
// CHECK:           %[[DEN:.*]] = arith.addf %{{.*}}, %[[E]] : vector<8xf32>
// CHECK:           %[[SILU:.*]] = arith.divf %[[G]], %[[DEN]] : vector<8xf32>
// CHECK:           %[[Y32:.*]] = arith.mulf %[[SILU]], %[[U]] : vector<8xf32>
// CHECK:           %[[Y:.*]] = arith.truncf %[[Y32]] : vector<8xf32> to vector<8xf16>
// CHECK:           %[[OROW:.*]] = arith.muli %[[B]], %c14336
// CHECK:           %[[OAT:.*]] = arith.addi %[[OROW]], %[[COL]]
// CHECK:           vector.store %[[Y]], %[[OUT]][%[[OAT]]] {alignment = 16 : i64}
// CHECK:         gpu.return

// DECODE:      fusion.kernel @llama3_k0_silu_mul
// DECODE-SAME:   schedule = #fusion.row_schedule<kind = silu_mul, threads = 256, chunks = 7, vector_width = 8, unroll = 1>, strategy = #fusion.strategy<decode>
func.func @llama3(%gate_up: tensor<?x28672xf16>) -> tensor<?x14336xf16> {
  %y = fusion.silu_mul %gate_up : tensor<?x28672xf16> -> tensor<?x14336xf16>
  return %y : tensor<?x14336xf16>
}

// -----

// I = 6 (bf16): 2-element vectors (4 bytes), three threads of one warp.
// CHECK-LABEL: func.func @tiny(
// CHECK:       launch = #fusion.launch<entry = "tiny_k0_silu_mul", grid = [batch, 1, 1], block = 32,
// CHECK-SAME:    schedule = #fusion.row_schedule<kind = silu_mul, threads = 32, chunks = 1, vector_width = 2, unroll = 1>
// CHECK:       gpu.func @tiny_k0_silu_mul(
// CHECK:         arith.cmpi ult, %{{.*}}, %c3
// CHECK:         vector.load %{{.*}} {alignment = 4 : i64} : memref<1099511627776xbf16>, vector<2xbf16>
// CHECK-COUNT-2: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// CHECK-NOT:     llvm.call_intrinsic
// CHECK:         arith.truncf %{{.*}} : vector<2xf32> to vector<2xbf16>
// CHECK:         vector.store %{{.*}} {alignment = 4 : i64} : memref<1099511627776xbf16>, vector<2xbf16>
// DECODE-LABEL: func.func @tiny(
func.func @tiny(%gate_up: tensor<?x12xbf16>) -> tensor<?x6xbf16> {
  %y = fusion.silu_mul %gate_up : tensor<?x12xbf16> -> tensor<?x6xbf16>
  return %y : tensor<?x6xbf16>
}

// The example module's silu_mul kernels in the manifest.
// MANIFEST:      "entry": "smollm2_k2_silu_mul",
// MANIFEST:      "grid": [
// MANIFEST-NEXT:   "batch",
// MANIFEST-NEXT:   1,
// MANIFEST-NEXT:   1
// MANIFEST:      "op": "silu_mul"
// MANIFEST:      "params": [
// MANIFEST:          "argument": 3
// MANIFEST:        "dtype": "bf16",
// MANIFEST:        "kind": "input",
// MANIFEST-NEXT:   "role": "input",
// MANIFEST-NEXT:   "shape": [
// MANIFEST-NEXT:     "batch",
// MANIFEST-NEXT:     3072
// MANIFEST:        "kind": "output",
// MANIFEST-NEXT:   "role": "output",
// MANIFEST-NEXT:   "shape": [
// MANIFEST-NEXT:     "batch",
// MANIFEST-NEXT:     1536
// MANIFEST:      "schedule": {
// MANIFEST-NEXT:   "chunks": 1,
// MANIFEST-NEXT:   "kind": "silu_mul",
// MANIFEST-NEXT:   "strategy": "none",
// MANIFEST-NEXT:   "threads": 192,
// MANIFEST-NEXT:   "unroll": 1,
// MANIFEST-NEXT:   "vector_width": 8
// MANIFEST:      "entry": "llama3_k1_silu_mul",
// MANIFEST:      "grid": [
// MANIFEST-NEXT:   "batch",
// MANIFEST-NEXT:   7,
// MANIFEST-NEXT:   1
// MANIFEST:      "entry": "odd_sizes_k2_silu_mul",
// MANIFEST:      "vector_width": 4

// ex2.approx (no libdevice exp), a correctly rounded division, 16-byte
// loads and stores.
// PTX-LABEL: .visible .entry smollm2_k2_silu_mul(
// PTX:       ld.global.v4.b32
// PTX:       ld.global.v4.b32
// PTX:       ex2.approx.ftz.f32
// PTX:       div.rn.f32
// PTX:       st.global.v4.b32
// PTX-LABEL: .visible .entry odd_sizes_k2_silu_mul(
// PTX:       ld.global.v4.b16
// PTX:       st.global.v2.b32
// PTX-NOT:   __nv_
