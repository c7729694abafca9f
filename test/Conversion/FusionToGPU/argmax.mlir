// RUN: fusion-opt %s -split-input-file --fusion-form-kernels=strategy=none --convert-fusion-to-gpu | FileCheck %s
// RUN: fusion-opt %s -split-input-file --fusion-form-kernels --convert-fusion-to-gpu | FileCheck %s --check-prefix=DECODE
// RUN: rm -rf %t && mkdir -p %t
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT fusion-compile %S/Inputs/embed_argmax_swiglu.mlir -o %t/a
// RUN: FileCheck %s --input-file=%t/a.manifest.json --check-prefix=MANIFEST
// RUN: FileCheck %s --input-file=%t/a.ptx --check-prefix=PTX
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t/a.ptx -o %t/a.cubin %}

// Greedy sampling: one CTA per row (grid [batch]). Llama-3's vocabulary
// (128256 bf16 = 16032 16-byte vectors): 1024 threads, each scanning its
// vectors t, t + 1024, ... four loads at a time (12288 vectors), then one at
// a time (the last 3744). Per vector: the packed maxnum of its elements; the
// thread keeps (max, vector) when the max is a number (ord) greater than its
// best or its best is NaN (ugt). Then it reloads its best vector and takes
// the first element equal to the best (oeq: -0 == +0), and the CTA reduces
// the (value, index) pairs by shuffles and shared memory: a number beats
// NaN, a larger value a smaller one, equal values (or two NaN) the lower
// index. Thread 0 writes the index.

// CHECK-LABEL: func.func @llama3(
// CHECK:       fusion.kernel @llama3_k0_argmax
// CHECK-SAME:    launch = #fusion.launch<entry = "llama3_k0_argmax", grid = [batch, 1, 1], block = 1024, smem = 0, static_smem = 256,
// CHECK-SAME:    params = [#fusion.param<kind = input, role = "logits", dtype = bf16, shape = [batch, 128256]>,
// CHECK-SAME:              #fusion.param<kind = output, role = "tokens", dtype = i32, shape = [batch]>,
// CHECK-SAME:              #fusion.param<kind = scalar, role = "batch", dtype = i32>]
// CHECK-SAME:    schedule = #fusion.row_schedule<kind = argmax, threads = 1024, chunks = 1, vector_width = 8, unroll = 4>, strategy = #fusion.strategy<none>

// CHECK:       gpu.func @llama3_k0_argmax(%[[LOGITS:.*]]: memref<1099511627776xbf16>, %[[OUT:.*]]: memref<1099511627776xi32>, %{{.*}}: i32)
// CHECK-SAME:    workgroup(%[[SV:.*]] : memref<32xf32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}, %[[SI:.*]] : memref<32xi32, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME:    known_block_size = array<i32: 1024, 1, 1>
// CHECK:         %[[ROW:.*]] = gpu.block_id x
// CHECK:         %[[TID:.*]] = gpu.thread_id x
// CHECK:         %[[BASE:.*]] = arith.muli %[[ROW]], %c128256
// CHECK:         %[[NAN:.*]] = arith.constant 0x7FC00000 : f32
// CHECK:         %[[MAIN:.*]]:2 = scf.for %[[V:.*]] = %[[TID]] to %c12288 step %c4096 iter_args(%{{.*}} = %[[NAN]], %{{.*}} = %c0) -> (f32, index)
// CHECK-COUNT-4:   vector.load %[[LOGITS]][%{{.*}}] {alignment = 16 : i64} : memref<1099511627776xbf16>, vector<8xbf16>
// CHECK:           llvm.intr.maxnum(%{{.*}}, %{{.*}}) : (vector<4xbf16>, vector<4xbf16>) -> vector<4xbf16>
// CHECK:           llvm.intr.maxnum(%{{.*}}, %{{.*}}) : (vector<2xbf16>, vector<2xbf16>) -> vector<2xbf16>
// CHECK:           llvm.intr.maxnum(%{{.*}}, %{{.*}}) : (vector<1xbf16>, vector<1xbf16>) -> vector<1xbf16>
// CHECK:           %[[M:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK:           %[[ORD:.*]] = arith.cmpf ord, %[[M]], %[[M]] : f32
// CHECK:           %[[UGT:.*]] = arith.cmpf ugt, %[[M]], %{{.*}} : f32
// CHECK:           %[[BETTER:.*]] = arith.andi %[[ORD]], %[[UGT]]
// CHECK:           arith.select %[[BETTER]], %[[M]]
// CHECK:           arith.select %[[BETTER]], %[[V]]
// CHECK-COUNT-3:   arith.cmpf ugt
// CHECK:           scf.yield
// CHECK:         %[[TAIL_LB:.*]] = arith.addi %[[TID]], %c12288
// CHECK:         %[[TAIL:.*]]:2 = scf.for %{{.*}} = %[[TAIL_LB]] to %c16032 step %c1024 iter_args(%{{.*}} = %[[MAIN]]#0, %{{.*}} = %[[MAIN]]#1) -> (f32, index)
// CHECK-COUNT-1:   vector.load
// CHECK-NOT:       vector.load
// CHECK:           scf.yield
// CHECK:         %[[AT:.*]] = arith.muli %[[TAIL]]#1, %c8
// CHECK:         %[[BEST_AT:.*]] = arith.addi %[[BASE]], %[[AT]]
// CHECK:         %[[BEST:.*]] = vector.load %[[LOGITS]][%[[BEST_AT]]]
// CHECK:         arith.extf %[[BEST]] : vector<8xbf16> to vector<8xf32>
// CHECK:         vector.extract %{{.*}}[7]
// CHECK-COUNT-8: arith.cmpf oeq, %{{.*}}, %[[TAIL]]#0 : f32
// CHECK:         arith.index_cast %{{.*}} : index to i32
// CHECK-COUNT-10: gpu.shuffle xor
// CHECK:         scf.if
// CHECK:           memref.store %{{.*}}, %[[SV]]
// CHECK:           memref.store %{{.*}}, %[[SI]]
// CHECK:         gpu.barrier
// CHECK:         memref.load %[[SV]]
// CHECK:         memref.load %[[SI]]
// CHECK:         %[[OV:.*]], %{{.*}} = gpu.shuffle xor %{{.*}}, %c16_i32{{.*}}, %c32_i32{{.*}} : f32
// CHECK:         %[[OI:.*]], %{{.*}} = gpu.shuffle xor %{{.*}}, %c16_i32{{.*}}, %c32_i32{{.*}} : i32
// CHECK:         %[[ONUM:.*]] = arith.cmpf ord, %[[OV]], %[[OV]]
// CHECK:         %[[MINE_NAN:.*]] = arith.cmpf uno
// CHECK:         %[[GT:.*]] = arith.cmpf ugt, %[[OV]]
// CHECK:         arith.andi %[[ONUM]], %[[GT]]
// CHECK:         arith.cmpf oeq, %[[OV]]
// CHECK:         arith.cmpi ult, %[[OI]]
// CHECK-COUNT-8: gpu.shuffle xor
// CHECK:         gpu.barrier
// CHECK:         %[[T0:.*]] = arith.cmpi eq, %[[TID]], %c0
// CHECK:         scf.if %[[T0]]
// CHECK:           memref.store %{{.*}}, %[[OUT]][%[[ROW]]] : memref<1099511627776xi32>
// CHECK:         gpu.return

// DECODE:      fusion.kernel @llama3_k0_argmax
// DECODE-SAME:   schedule = #fusion.row_schedule<kind = argmax, threads = 1024, chunks = 1, vector_width = 8, unroll = 4>, strategy = #fusion.strategy<decode>
func.func @llama3(%logits: tensor<?x128256xbf16>) -> tensor<?xi32> {
  %t = fusion.argmax %logits : tensor<?x128256xbf16> -> tensor<?xi32>
  return %t : tensor<?xi32>
}

// -----

// Rows no 16-byte vector divides: 100 = 25 vectors of 4 elements, fewer
// than one step of 32 threads x 4, so only the one-at-a-time loop; one
// warp, no shared memory.
// CHECK-LABEL: func.func @vocab100(
// CHECK:       launch = #fusion.launch<entry = "vocab100_k0_argmax", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0,
// CHECK-SAME:    schedule = #fusion.row_schedule<kind = argmax, threads = 32, chunks = 1, vector_width = 4, unroll = 4>
// CHECK:       gpu.func @vocab100_k0_argmax(
// CHECK-NOT:     workgroup
// CHECK:         scf.for %{{.*}} = %{{.*}} to %c25 step %c32
// CHECK:           vector.load %{{.*}} {alignment = 8 : i64} : memref<1099511627776xf16>, vector<4xf16>
// CHECK-COUNT-4: arith.cmpf oeq
// CHECK-COUNT-10: gpu.shuffle xor
// CHECK-NOT:     gpu.barrier
// CHECK:         gpu.return
// DECODE-LABEL: func.func @vocab100(
func.func @vocab100(%logits: tensor<?x100xf16>) -> tensor<?xi32> {
  %t = fusion.argmax %logits : tensor<?x100xf16> -> tensor<?xi32>
  return %t : tensor<?xi32>
}

// The example module's argmax kernels in the manifest (decode strategy):
// the logits in, the token ids out, the schedule's members.
// MANIFEST:      "entry": "smollm2_k1_argmax",
// MANIFEST:      "grid": [
// MANIFEST-NEXT:   "batch",
// MANIFEST-NEXT:   1,
// MANIFEST-NEXT:   1
// MANIFEST:      "op": "argmax"
// MANIFEST:      "params": [
// MANIFEST:          "argument": 2
// MANIFEST:        "dtype": "bf16",
// MANIFEST:        "kind": "input",
// MANIFEST-NEXT:   "role": "logits",
// MANIFEST:          "result": 0
// MANIFEST-NEXT:   },
// MANIFEST-NEXT:   "dtype": "i32",
// MANIFEST:        "kind": "output",
// MANIFEST-NEXT:   "role": "tokens",
// MANIFEST:        "role": "batch"
// MANIFEST:      "schedule": {
// MANIFEST-NEXT:   "chunks": 1,
// MANIFEST-NEXT:   "kind": "argmax",
// MANIFEST-NEXT:   "strategy": "decode",
// MANIFEST-NEXT:   "threads": 1024,
// MANIFEST-NEXT:   "unroll": 4,
// MANIFEST-NEXT:   "vector_width": 8
// MANIFEST-NEXT: },
// MANIFEST-NEXT: "static_shared_bytes": 256
// Vocab 1001: scalar loads.
// MANIFEST:      "entry": "odd_sizes_k1_argmax",
// MANIFEST:      "kind": "argmax",
// MANIFEST-NEXT: "strategy": "decode",
// MANIFEST-NEXT: "threads": 256,
// MANIFEST-NEXT: "unroll": 4,
// MANIFEST-NEXT: "vector_width": 1

// Packed maxnum (max.bf16x2 / max.f16x2), the reductions by shfl.sync,
// four 16-byte loads in flight in Llama-3's loop, no libdevice.
// PTX-LABEL: .visible .entry smollm2_k1_argmax(
// PTX:       ld.global.v4.b32
// PTX:       max.bf16x2
// PTX:       shfl.sync.bfly.b32
// PTX:       bar.sync
// PTX-LABEL: .visible .entry llama3_k0_argmax(
// PTX:       ld.global.v4.b32
// PTX-NOT:   max
// PTX:       ld.global.v4.b32
// PTX-NOT:   max
// PTX:       ld.global.v4.b32
// PTX-NOT:   max
// PTX:       ld.global.v4.b32
// PTX-NEXT:  max.f16x2
// PTX-LABEL: .visible .entry odd_sizes_k1_argmax(
// PTX:       ld.global.b16
// PTX-NOT:   __nv_
