// RUN: fusion-opt %s -split-input-file --fusion-form-kernels --convert-fusion-to-gpu | FileCheck %s
// RUN: fusion-opt %s -split-input-file --fusion-form-kernels --convert-fusion-to-gpu="target-sm=75" | FileCheck %s --check-prefix=SM75
// RUN: rm -rf %t && mkdir -p %t
// RUN: fusion-compile %s -o %t/head
// RUN: FileCheck %s --check-prefix=PTX --input-file=%t/head.ptx
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t/head.manifest.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t/head.ptx -o %t/head.cubin %}

// The final norm, the LM head and greedy sampling in one kernel (FormKernels
// rule 1; ProjectionArgmax.cpp). Every entry (the CUDA-core kernel of batch
// 1 and each batch variant) gets one 64-bit shared slot per token of its
// token tile (1, 16, 32, 64), zeroes it, and each pair epilogue takes the
// larger of its two packed keys into the token's slot:
//   key = (ordered f32 bits of the rounded logit) << 32 | ~column,
//   0 for NaN (ord), -0 taken as +0 (oeq 0 -> 0).
// After a tile, one thread per token publishes the slot with an unsigned
// 64-bit atomic max into argmax_keys and zeroes it; after the last tile,
// every CTA fences and counts its arrival, and the last one (of gridDim.x)
// decodes each key to ~(key mod 2^32) (0 for key 0), writes the id and
// zeroes the key. The logits, which the function also returns, are stored as
// before.

// CHECK-LABEL: func.func @lm_head(
// CHECK:       fusion.kernel @lm_head_k0_fused
// CHECK-SAME:    -> (tensor<?x4096xf16>, tensor<?xi32>)
// CHECK-SAME:    #fusion.param<kind = output, role = "output", dtype = f16, shape = [batch, 4096]>,
// CHECK-SAME:    #fusion.param<kind = output, role = "tokens", dtype = i32, shape = [batch]>,
// CHECK-SAME:    #fusion.param<kind = workspace, role = "argmax_keys", dtype = i32, shape = [batch, 2], zero_init = true>,
// CHECK-SAME:    #fusion.param<kind = workspace, role = "argmax_arrivals", dtype = i32, shape = [batch], zero_init = true>,
// CHECK-SAME:    #fusion.param<kind = tensor_map, role = "weight_map"
// CHECK:       gpu.func @lm_head_k0_fused(
// CHECK-SAME:    workgroup(%[[SLOTS:.*]] : memref<1xi64, #gpu.address_space<workgroup>> {llvm.align = 8 : i64}, %[[LAST:.*]] : memref<1xi32, #gpu.address_space<workgroup>>
// CHECK:         "griddepcontrol.wait;"
// CHECK:         memref.store %{{.*}}, %[[SLOTS]]
// The key of each of the pair's two rounded logits.
// CHECK:         arith.truncf %{{.*}} : f32 to f16
// CHECK:         %[[V:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK:         %[[NUM:.*]] = arith.cmpf ord, %[[V]], %[[V]] : f32
// CHECK:         %[[ZERO:.*]] = arith.cmpf oeq, %[[V]], %{{.*}} : f32
// CHECK:         %[[POS0:.*]] = arith.select %[[ZERO]], %{{.*}}, %[[V]] : f32
// CHECK:         %[[BITS:.*]] = arith.bitcast %[[POS0]] : f32 to i32
// CHECK:         %[[NEG:.*]] = arith.cmpi slt, %[[BITS]], %{{.*}} : i32
// CHECK:         arith.ori %[[BITS]], %c-2147483648_i32
// CHECK:         arith.xori %[[BITS]], %c-1_i32
// CHECK:         %[[ORD:.*]] = arith.select %[[NEG]]
// CHECK:         %[[HIGH:.*]] = arith.extui %[[ORD]] : i32 to i64
// CHECK:         arith.shli %[[HIGH]], %c32_i64
// CHECK:         %[[COL:.*]] = arith.index_cast %{{.*}} : index to i32
// CHECK:         arith.xori %[[COL]], %c-1_i32
// CHECK:         %[[KEY:.*]] = arith.ori
// CHECK:         arith.select %[[NUM]], %[[KEY]], %c0_i64 : i64
// CHECK:         %[[BEST:.*]] = arith.maxui
// CHECK:         memref.atomic_rmw maxu %[[BEST]], %[[SLOTS]][%{{.*}}] : (i64, memref<1xi64, #gpu.address_space<workgroup>>) -> i64
// CHECK:         memref.store %{{.*}} : memref<1099511627776xf16>
// The tile's slots published.
// CHECK:         gpu.barrier
// CHECK:         %[[SLOT:.*]] = memref.load %[[SLOTS]]
// CHECK:         memref.store %c0_i64{{.*}}, %[[SLOTS]]
// CHECK:         llvm.atomicrmw umax %{{.*}}, %[[SLOT]] monotonic : !llvm.ptr<1>, i64
// The last CTA.
// CHECK:         nvvm.memory.barrier <gpu>
// CHECK-NEXT:    gpu.barrier
// CHECK:         gpu.grid_dim x
// CHECK:         memref.atomic_rmw addi
// CHECK:         memref.store %{{.*}}, %[[LAST]]
// CHECK:         gpu.barrier
// CHECK:         memref.load %[[LAST]]
// CHECK:         nvvm.memory.barrier <gpu>
// CHECK:         scf.for
// CHECK:           %[[K:.*]] = llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr<1> -> i64
// CHECK:           llvm.store %c0_i64{{.*}} {alignment = 8 : i64} : i64, !llvm.ptr<1>
// CHECK:           %[[LOW:.*]] = arith.trunci %[[K]] : i64 to i32
// CHECK:           %[[ID:.*]] = arith.xori %[[LOW]], %c-1_i32
// CHECK:           %[[NONE:.*]] = arith.cmpi eq, %[[K]], %c0_i64
// CHECK:           %[[OUT:.*]] = arith.select %[[NONE]], %c0_i32{{.*}}, %[[ID]] : i32
// CHECK:           memref.store %[[OUT]], %{{.*}} : memref<1099511627776xi32>
// The GEMM-shaped variants: slots of 16, 32 and 64 tokens.
// CHECK:       gpu.func @lm_head_k0_fused_gemm16(
// CHECK:         memref.atomic_rmw maxu %{{.*}} : (i64, memref<16xi64, #gpu.address_space<workgroup>>) -> i64
// CHECK:         llvm.atomicrmw umax
// CHECK:       gpu.func @lm_head_k0_fused_gemm32(
// CHECK:         memref.atomic_rmw maxu %{{.*}} : (i64, memref<32xi64, #gpu.address_space<workgroup>>) -> i64
// CHECK:       gpu.func @lm_head_k0_fused_gemm64(
// CHECK:         memref.atomic_rmw maxu %{{.*}} : (i64, memref<64xi64, #gpu.address_space<workgroup>>) -> i64

// In the PTX, the shared and global 64-bit atomics of every entry (those of
// the next function too).
// PTX-LABEL: .entry lm_head_k0_fused(
// PTX:         atom.shared.max.u64
// PTX:         atom.global.max.u64
// PTX:         membar.gl
// PTX-LABEL: .entry lm_head_k0_fused_gemm16(
// PTX:         atom.shared.max.u64
// PTX:         atom.global.max.u64
// PTX-LABEL: .entry lm_head_k0_fused_gemm32(
// PTX:         atom.shared.max.u64
// PTX:         atom.global.max.u64
// PTX-LABEL: .entry lm_head_k0_fused_gemm64(
// PTX:         atom.shared.max.u64
// PTX:         atom.global.max.u64
// PTX-LABEL: .entry ln_head_k0_fused(
// PTX:         atom.shared.max.u64
// PTX:         atom.global.max.u64
// PTX-LABEL: .entry ln_head_k0_fused_mma(
// PTX-COUNT-8: atom.shared.max.u64
// PTX:         atom.global.max.u64
// MANIFEST:    "ops": [
// MANIFEST:      "op": "rmsnorm"
// MANIFEST:      "op": "linear"
// MANIFEST:      "op": "argmax"
// MANIFEST:    "role": "argmax_keys",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT:   "batch",
// MANIFEST-NEXT:   2
// MANIFEST:    "zero_init": true
// MANIFEST:    "role": "argmax_arrivals",
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT:   "batch"
// MANIFEST-NEXT: ],
// MANIFEST-NEXT: "zero_init": true
func.func @lm_head(%x: tensor<?x576xf16>, %w: tensor<576xf16>, %r: tensor<?x576xf16>,
    %head: tensor<4096x576xf16>) -> (tensor<?xi32>, tensor<?x4096xf16>) {
  %f, %h = fusion.rmsnorm %x, %w residual(%r : tensor<?x576xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x576xf16>, tensor<576xf16> -> tensor<?x576xf16>, tensor<?x576xf16>
  %logits = fusion.linear %f, %head : tensor<?x576xf16>, tensor<4096x576xf16> -> tensor<?x4096xf16>
  %next = fusion.argmax %logits : tensor<?x4096xf16> -> tensor<?xi32>
  return %next, %logits : tensor<?xi32>, tensor<?x4096xf16>
}

// -----
// A LayerNorm head whose logits only the argmax reads: the kernel yields the
// ids alone and stores no logits. Its batch variant is the mma.sync one
// (tiles of 32 tokens); without tensor cores (SM75) the CUDA-core kernel
// serves every batch in tiles of 4 tokens (slot = token mod 4).

// CHECK-LABEL: func.func @ln_head(
// CHECK:       fusion.kernel @ln_head_k0_fused
// CHECK-SAME:    -> tensor<?xi32>
// CHECK-NOT:     role = "output"
// CHECK:       gpu.func @ln_head_k0_fused(
// CHECK-NOT:     memref.store %{{.*}} : memref<1099511627776xbf16>
// CHECK:         memref.atomic_rmw maxu %{{.*}} : (i64, memref<1xi64, #gpu.address_space<workgroup>>) -> i64
// CHECK:       gpu.func @ln_head_k0_fused_mma(
// CHECK-NOT:     memref.store %{{.*}} : memref<1099511627776xbf16>
// CHECK:         memref.atomic_rmw maxu %{{.*}} : (i64, memref<32xi64, #gpu.address_space<workgroup>>) -> i64
// CHECK:         llvm.atomicrmw umax
// SM75-LABEL: func.func @ln_head(
// SM75:       gpu.func @ln_head_k0_fused(
// SM75-SAME:    workgroup(%[[SLOTS:.*]] : memref<4xi64, #gpu.address_space<workgroup>>
// SM75:         %[[SLOT:.*]] = arith.remui %{{.*}}, %c4
// SM75-NEXT:    memref.atomic_rmw maxu %{{.*}}, %[[SLOTS]][%[[SLOT]]]
// SM75-NOT:   gpu.func
func.func @ln_head(%x: tensor<?x768xbf16>, %w: tensor<768xbf16>, %b: tensor<768xbf16>,
    %head: tensor<2048x768xbf16>) -> tensor<?xi32> {
  %f = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64}
      : tensor<?x768xbf16>, tensor<768xbf16>, tensor<768xbf16> -> tensor<?x768xbf16>
  %logits = fusion.linear %f, %head : tensor<?x768xbf16>, tensor<2048x768xbf16> -> tensor<?x2048xbf16>
  %next = fusion.argmax %logits : tensor<?x2048xbf16> -> tensor<?xi32>
  return %next : tensor<?xi32>
}

// -----
// A vocabulary of 16 x 67 rows: the GEMM-shaped variants get row tiles of 16
// and one warp (32 threads), so `_gemm64`'s tile of 64 tokens has two slots
// per thread: the slots are zeroed and published in a loop over them.

// CHECK-LABEL: func.func @odd_vocab(
// SM75-LABEL: func.func @odd_vocab(
// CHECK:       gpu.func @odd_vocab_k0_fused_gemm64(
// CHECK-SAME:    workgroup(%[[SLOTS:.*]] : memref<64xi64, #gpu.address_space<workgroup>>
// CHECK-SAME:    known_block_size = array<i32: 32, 1, 1>
// CHECK:         scf.for %[[Z:.*]] = %{{.*}} to %c64 step %c32
// CHECK:           memref.store %{{.*}}, %[[SLOTS]][%[[Z]]]
// The publication: the slot is a loop induction variable (%argN).
// CHECK:         %[[KEY:.*]] = memref.load %[[SLOTS]][%[[S:arg[0-9]+]]] : memref<64xi64
// CHECK:           memref.store %{{.*}}, %[[SLOTS]][%[[S]]]
// CHECK:             llvm.atomicrmw umax %{{.*}}, %[[KEY]] monotonic
func.func @odd_vocab(%x: tensor<?x576xf16>, %w: tensor<576xf16>, %r: tensor<?x576xf16>,
    %head: tensor<1072x576xf16>) -> tensor<?xi32> {
  %f, %h = fusion.rmsnorm %x, %w residual(%r : tensor<?x576xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x576xf16>, tensor<576xf16> -> tensor<?x576xf16>, tensor<?x576xf16>
  %logits = fusion.linear %f, %head : tensor<?x576xf16>, tensor<1072x576xf16> -> tensor<?x1072xf16>
  %next = fusion.argmax %logits : tensor<?x1072xf16> -> tensor<?xi32>
  return %next : tensor<?xi32>
}
