// RUN: fusion-opt %s -split-input-file --fusion-form-kernels=strategy=none --convert-fusion-to-gpu | FileCheck %s
// RUN: fusion-opt %s -split-input-file --fusion-form-kernels --convert-fusion-to-gpu | FileCheck %s --check-prefix=DECODE
// RUN: rm -rf %t && mkdir -p %t
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT fusion-compile %S/Inputs/embed_argmax_swiglu.mlir --strategy=none -o %t/e
// RUN: FileCheck %s --input-file=%t/e.manifest.json --check-prefix=MANIFEST
// RUN: FileCheck %s --input-file=%t/e.ptx --check-prefix=PTX
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t/e.ptx -o %t/e.cubin %}

// The token embedding: grid [batch, chunks], one 16-byte vector of the
// row per thread. Llama-2's table (32000 x 4096 f16): 512 vectors per row,
// 256 threads x 2 chunks. The id is clamped to [0, V - 1] before the 64-bit
// row offset (tokens[b] * H, in index arithmetic) is formed.

// CHECK-LABEL: func.func @llama2(
// CHECK:       fusion.kernel @llama2_k0_embedding
// CHECK-SAME:    launch = #fusion.launch<entry = "llama2_k0_embedding", grid = [batch, 2, 1], block = 256, smem = 0, static_smem = 0,
// CHECK-SAME:    params = [#fusion.param<kind = input, role = "tokens", dtype = i32, shape = [batch]>,
// CHECK-SAME:              #fusion.param<kind = input, role = "weight", dtype = f16, shape = [32000, 4096]>,
// CHECK-SAME:              #fusion.param<kind = output, role = "output", dtype = f16, shape = [batch, 4096]>,
// CHECK-SAME:              #fusion.param<kind = scalar, role = "batch", dtype = i32>]
// CHECK-SAME:    schedule = #fusion.row_schedule<kind = embedding, threads = 256, chunks = 2, vector_width = 8, unroll = 1>, strategy = #fusion.strategy<none>

// CHECK:       gpu.func @llama2_k0_embedding(%[[TOK:.*]]: memref<1099511627776xi32>, %[[TABLE:.*]]: memref<1099511627776xf16>, %[[OUT:.*]]: memref<1099511627776xf16>, %{{.*}}: i32)
// CHECK-SAME:    known_block_size = array<i32: 256, 1, 1>
// CHECK:         %[[B:.*]] = gpu.block_id x
// CHECK:         %[[C:.*]] = gpu.block_id y
// CHECK:         %[[CT:.*]] = arith.muli %[[C]], %c256
// CHECK:         %[[T:.*]] = gpu.thread_id x
// CHECK:         %[[V:.*]] = arith.addi %[[CT]], %[[T]]
// CHECK:         arith.cmpi ult, %[[V]], %c512
// CHECK:         scf.if
// CHECK:           %[[ID32:.*]] = memref.load %[[TOK]][%[[B]]]
// CHECK:           %[[ID:.*]] = arith.index_cast %[[ID32]] : i32 to index
// CHECK:           %[[LO:.*]] = arith.maxsi %[[ID]], %c0
// CHECK:           %[[CL:.*]] = arith.minsi %[[LO]], %c31999
// CHECK:           %[[ROW:.*]] = arith.muli %[[CL]], %c4096
// CHECK:           %[[COL:.*]] = arith.muli %[[V]], %c8
// CHECK:           %[[AT:.*]] = arith.addi %[[ROW]], %[[COL]]
// CHECK:           %[[X:.*]] = vector.load %[[TABLE]][%[[AT]]] {alignment = 16 : i64} : memref<1099511627776xf16>, vector<8xf16>
// CHECK:           %[[OROW:.*]] = arith.muli %[[B]], %c4096
// CHECK:           %[[OAT:.*]] = arith.addi %[[OROW]], %[[COL]]
// CHECK:           vector.store %[[X]], %[[OUT]][%[[OAT]]] {alignment = 16 : i64}
// CHECK:         gpu.return

// The decode strategy gives the same kernel.
// DECODE:      fusion.kernel @llama2_k0_embedding
// DECODE-SAME:   schedule = #fusion.row_schedule<kind = embedding, threads = 256, chunks = 2, vector_width = 8, unroll = 1>, strategy = #fusion.strategy<decode>
func.func @llama2(%tokens: tensor<?xi32>, %table: tensor<32000x4096xf16>) -> tensor<?x4096xf16> {
  %x = fusion.embedding %tokens, %table : tensor<?xi32>, tensor<32000x4096xf16> -> tensor<?x4096xf16>
  return %x : tensor<?x4096xf16>
}

// -----

// A row of fewer vectors than a warp: one CTA of 32 threads, 8 of them
// copying (bf16, hidden 64, a static batch).
// CHECK-LABEL: func.func @small(
// CHECK:       launch = #fusion.launch<entry = "small_k0_embedding", grid = [batch, 1, 1], block = 32,
// CHECK-SAME:    schedule = #fusion.row_schedule<kind = embedding, threads = 32, chunks = 1, vector_width = 8, unroll = 1>
// CHECK:       gpu.func @small_k0_embedding(
// CHECK:         arith.cmpi ult, %{{.*}}, %c8
// CHECK:         arith.minsi %{{.*}}, %c9
// CHECK:         vector.load %{{.*}} {alignment = 16 : i64} : memref<1099511627776xbf16>, vector<8xbf16>
// DECODE-LABEL: func.func @small(
func.func @small(%tokens: tensor<4xi32>, %table: tensor<10x64xbf16>) -> tensor<4x64xbf16> {
  %x = fusion.embedding %tokens, %table : tensor<4xi32>, tensor<10x64xbf16> -> tensor<4x64xbf16>
  return %x : tensor<4x64xbf16>
}

// The example module's embeddings in the manifest: the table is bound as
// `weight`, the token ids as `tokens`; the schedule's members.
// MANIFEST:      "entry": "smollm2_k0_embedding",
// MANIFEST:      "grid": [
// MANIFEST-NEXT:   "batch",
// MANIFEST-NEXT:   1,
// MANIFEST-NEXT:   1
// MANIFEST:      "op": "embedding"
// MANIFEST:      "params": [
// MANIFEST:          "argument": 0
// MANIFEST:        "dtype": "i32",
// MANIFEST:        "kind": "input",
// MANIFEST-NEXT:   "role": "tokens",
// MANIFEST:          "argument": 1
// MANIFEST:        "dtype": "bf16",
// MANIFEST:        "kind": "input",
// MANIFEST-NEXT:   "role": "weight",
// MANIFEST-NEXT:   "shape": [
// MANIFEST-NEXT:     49152,
// MANIFEST-NEXT:     576
// MANIFEST:        "kind": "output",
// MANIFEST-NEXT:   "role": "output",
// MANIFEST:      "schedule": {
// MANIFEST-NEXT:   "chunks": 1,
// MANIFEST-NEXT:   "kind": "embedding",
// MANIFEST-NEXT:   "strategy": "none",
// MANIFEST-NEXT:   "threads": 96,
// MANIFEST-NEXT:   "unroll": 1,
// MANIFEST-NEXT:   "vector_width": 8
// MANIFEST:      "entry": "odd_sizes_k0_embedding",
// MANIFEST:      "schedule": {
// MANIFEST-NEXT:   "chunks": 1,
// MANIFEST-NEXT:   "kind": "embedding",
// MANIFEST-NEXT:   "strategy": "none",
// MANIFEST-NEXT:   "threads": 32,

// The clamp, the row's 64-bit byte offset (576 x 2 bytes per row), 16-byte
// loads and stores, no libdevice.
// PTX-LABEL: .visible .entry smollm2_k0_embedding(
// PTX:       max.s32 [[LO:%r[0-9]+]], %r{{[0-9]+}}, 0;
// PTX:       min.s32 [[ID:%r[0-9]+]], [[LO]], 49151;
// PTX:       mul.wide.u32 %rd{{[0-9]+}}, [[ID]], 1152;
// PTX:       ld.global.v4.b32
// PTX:       st.global.v4.b32
// PTX-LABEL: .visible .entry odd_sizes_k0_embedding(
// PTX:       min.s32 %r{{[0-9]+}}, %r{{[0-9]+}}, 1000;
// PTX-NOT:   __nv_
