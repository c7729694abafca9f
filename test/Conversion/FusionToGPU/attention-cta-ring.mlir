// RUN: fusion-opt %s --convert-fusion-to-gpu="attention-cta-ring=true" | FileCheck %s
// RUN: fusion-opt %s --convert-fusion-to-gpu | FileCheck %s --check-prefix=OFF
// RUN: rm -rf %t && mkdir -p %t
// RUN: fusion-compile %s --chip=sm_90a --attention-cta-ring -o %t/ring
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t/ring.manifest.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t/ring.ptx -o %t/ring.cubin %}
// RUN: fusion-compile %s --chip=sm_80 --attention-cta-ring -o %t/sm80
// RUN: FileCheck %s --check-prefix=SM80 --input-file=%t/sm80.manifest.json
// RUN: fusion-opt %s --convert-fusion-to-gpu="attention-cta-ring=true" --split-input-file 2>&1 | FileCheck %s --check-prefix=D96
// RUN: fusion-opt %s --convert-fusion-to-gpu="attention-cta-ring=true attention-ring-stages=8" | FileCheck %s --check-prefix=S8
// RUN: fusion-compile %s --chip=sm_90a --attention-cta-ring --attention-ring-stages=8 -o %t/ring8
// RUN: FileCheck %s --check-prefix=MANIFEST8 --input-file=%t/ring8.manifest.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90a %t/ring8.ptx -o %t/ring8.cubin %}
// RUN: fusion-compile %s --chip=sm_90a --attention-cta-ring --attention-ring-stages=24 -o %t/ring24
// RUN: FileCheck %s --check-prefix=MANIFEST24 --input-file=%t/ring24.manifest.json

// The tensor-core attention with one CTA-wide K/V ring filled by TMA boxes
// (opt-in: attention-cta-ring; Kernels/AttentionMma.h). Llama-3-8B shapes:
// Hq/Hkv = 32/8 (G = 4), D = 128, f16, pages of 16. A stage (16 K rows and
// 16 V rows of 128 elements, unpadded: the boxes are 128-byte swizzled) is
// 2 x 16 x 128 x 2 = 8192 bytes; 16 stages + 1 KiB of alignment = 132096
// bytes (1 CTA per SM, so target_ctas = 132 SMs x 1). 4 consumer warps + the
// producer = 160 threads. The kernel takes the caches' tensor maps after the
// workspaces: the caches viewed as [num_pages * 16, 8 * 128], boxes of 16
// token slots x 64 columns.
// CHECK-LABEL: func.func @llama
// CHECK:       fusion.kernel @attn_g4
// CHECK-SAME:    #fusion.param<kind = workspace, role = "split_counters", dtype = i32, shape = [batch, 8], zero_init = true>,
// CHECK-SAME:    #fusion.param<kind = tensor_map, role = "key_cache_map", dtype = f16, shape = [num_pages, 16, 8, 128], of = 1, box = [16, 64]>,
// CHECK-SAME:    #fusion.param<kind = tensor_map, role = "value_cache_map", dtype = f16, shape = [num_pages, 16, 8, 128], of = 2, box = [16, 64]>,
// CHECK-SAME:    #fusion.param<kind = scalar, role = "batch", dtype = i32>
// CHECK-SAME:    entry = "attn_g4_mma", grid = [num_splits, 8, batch], block = 160, smem = 132096,
// CHECK-SAME:    schedule = #fusion.split_kv_attention_mma_schedule<threads = 160, {{.*}} chunk_multiple = 64, stages = 16, target_ctas = 132, {{.*}} cta_ring = true>
// CHECK:       gpu.func @attn_g4_mma(
// CHECK-SAME:    known_block_size = array<i32: 160, 1, 1>
// The ring's first 1 KiB boundary (in f16 elements), then the full and the
// empty barriers of the 16 slots (32 mbarriers, one arrival each),
// initialised together.
// CHECK:       llvm.ptrtoint %{{.*}} : !llvm.ptr<3> to i32
// CHECK:       arith.remui %{{.*}}, %c1024 : index
// CHECK-COUNT-32: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK-NEXT:  nvvm.fence.mbarrier.init
// CHECK:       gpu.barrier
// CHECK-NOT:   nvvm.mbarrier.init
// Warps 0-3 consume: each tile but its last, then (if it has any) its last
// tile with the V fragments of tokens at or past the split's end zeroed
// (the boxes copied those slots too: stale or NaN). A tile: the slot's full
// phase (t / 16 mod 2), Q K^T with K read at the swizzled chunk (chunk xor
// row % 8), the online softmax, P V, then lane 0 releases the slot on its
// empty barrier after a warp sync.
// CHECK:       arith.cmpi ult, %{{.*}}, %c4
// CHECK:       scf.for
// CHECK:         arith.remui %{{.*}}, %c16_i32
// CHECK:         mbarrier.try_wait.parity
// CHECK:         arith.remui %{{.*}}, %c8
// CHECK:         arith.xori %{{.*}}, %{{.*}} : index
// CHECK:         nvvm.ldmatrix
// CHECK:         nvvm.mma.sync
// CHECK-NOT:     vector<2xi1>
// CHECK:         nvvm.bar.warp.sync
// CHECK:         @p mbarrier.arrive.shared::cta.b64
// CHECK:       scf.if %{{.*}} -> (f32
// CHECK:         mbarrier.try_wait.parity
// CHECK:         arith.xori
// CHECK:         nvvm.ldmatrix {{.*}} layout = #nvvm.mma_layout<col>
// CHECK:         arith.select %{{.*}} : vector<2xi1>, vector<2xf16>
// CHECK-NEXT:    arith.select %{{.*}} : vector<2xi1>, vector<2xf16>
// CHECK-NEXT:    arith.select %{{.*}} : vector<2xi1>, vector<2xf16>
// CHECK-NEXT:    arith.select %{{.*}} : vector<2xi1>, vector<2xf16>
// CHECK:         nvvm.bar.warp.sync
// CHECK:         @p mbarrier.arrive.shared::cta.b64
// The producer warp: lane l holds the block-table entries of tiles l and
// 32 + l, and every 32 tiles the next batch's become this one's and the
// one after is loaded; tile t's page is lane t % 32's entry (a shuffle).
// From t = 16 it waits for the slot's empty phase ((t / 16 - 1) mod 2)
// and fences for the async proxy; lane 0 arms the full barrier for the
// whole tile (8192 bytes) and copies 4 boxes: K columns [128 h, +64) and
// [128 h + 64, +64) of row page * 16 + the tile's first slot in its page,
// then V's, into the slot's K and V halves (2048 elements apart, the
// second box of each 1024 elements in).
// CHECK:       } else {
// CHECK:         memref.load
// CHECK:         memref.load
// CHECK:         scf.for {{.*}} -> (i32, i32)
// CHECK:           scf.if %{{.*}} -> (i32, i32)
// CHECK:             memref.load
// CHECK:           gpu.shuffle  idx
// CHECK:           arith.cmpi uge, %{{.*}}, %c16_i32
// CHECK-NEXT:      scf.if
// CHECK:             arith.subi %{{.*}}, %c1_i32
// CHECK:             mbarrier.try_wait.parity
// CHECK-NEXT:        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK:             nvvm.mbarrier.arrive.expect_tx %[[FULL:[0-9]+]], %c8192_i32
// CHECK:             arith.trunci %{{.*}} : i64 to i32
// CHECK-NEXT:        arith.muli %{{.*}}, %c16_i32
// CHECK:             arith.muli %block_id_y, %c128
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[KMAP:[0-9]+]], %[[FULL]], box[
// CHECK:             arith.addi %{{.*}}, %c1024
// CHECK:             arith.addi %{{.*}}, %c64
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[KMAP]], %[[FULL]], box[
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[VMAP:[0-9]+]], %[[FULL]], box[
// CHECK:             nvvm.cp.async.bulk.tensor.shared.cluster.global %{{.*}}, %[[VMAP]], %[[FULL]], box[
// CHECK-NOT:         nvvm.cp.async.bulk.tensor
// CHECK:       gpu.barrier
// CHECK:       gpu.return

// Off by default: each warp's own cp.async ring, 128 threads, no maps.
// attention-ring-stages=8: 8 stages of 8192 bytes + 1 KiB = 66560 bytes, so
// 2 CTAs fit an SM and the split policy targets 2 x 132 CTAs; 16 barriers,
// slots and phases modulo 8.
// S8:          entry = "attn_g4_mma", grid = [num_splits, 8, batch], block = 160, smem = 66560,
// S8-SAME:     stages = 8, target_ctas = 264,
// S8:          gpu.func @attn_g4_mma(
// S8-COUNT-16: nvvm.mbarrier.init %{{.*}}, %c1_i32
// S8-NOT:      nvvm.mbarrier.init
// S8:          arith.remui %{{.*}}, %c8_i32
// fusion-compile passes the option down: 8 stages as above; 24, the most,
// 24 x 8192 + 1024 = 197632 bytes, still one tensor-core variant.
// MANIFEST8:      "dynamic_shared_bytes": 66560,
// MANIFEST8-NEXT: "entry": "attn_g4_mma",
// MANIFEST8:      "stages": 8,
// MANIFEST8-NEXT: "target_ctas": 264,
// MANIFEST24:      "dynamic_shared_bytes": 197632,
// MANIFEST24-NEXT: "entry": "attn_g4_mma",
// MANIFEST24:      "stages": 24,
// MANIFEST24-NEXT: "target_ctas": 132,
// OFF-NOT:     tensor_map
// OFF:         entry = "attn_g4_mma", grid = [num_splits, 8, batch], block = 128, smem = 104448,
// OFF-NOT:     cta_ring

// MANIFEST:    "role": "key_cache_map"
// MANIFEST-NEXT: "shape": [
// MANIFEST-NEXT:   "num_pages",
// MANIFEST-NEXT:   16,
// MANIFEST-NEXT:   8,
// MANIFEST-NEXT:   128
// MANIFEST-NEXT: ],
// MANIFEST-NEXT: "tensor_map": {
// MANIFEST-NEXT:   "box": [
// MANIFEST-NEXT:     16,
// MANIFEST-NEXT:     64
// MANIFEST-NEXT:   ],
// MANIFEST-NEXT:   "of": 1,
// MANIFEST:    "role": "value_cache_map"
// MANIFEST:    "entry": "attn_g4_mma"
// MANIFEST:    "cta_ring": true
// MANIFEST:    "stages": 16
// MANIFEST:    "target_ctas": 132
// MANIFEST:    "threads": 160

// sm_80 has no TMA: the flag changes nothing (no maps, no ring: the
// per-warp rings' 128 threads).
// SM80-NOT:    tensor_map
// SM80:        "entry": "attn_g4_mma"
// SM80-NOT:    cta_ring
// SM80:        "threads": 128
// SM80-NOT:    cta_ring
func.func @llama(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x32x128xf16> {
  %o = fusion.kernel @attn_g4 (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x32x128xf16>, memref<?x16x8x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x32x128xf16> attributes {strategy = #fusion.strategy<decode>} {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x32x128xf16>
  }
  return %o : tensor<?x32x128xf16>
}

// -----

// head_dim 96 is not a whole number of 64-column boxes: the per-warp rings,
// no maps.
// D96-LABEL: func.func @d96
// D96-NOT:   tensor_map
// D96:       entry = "attn_d96_mma", grid = [num_splits, 8, batch], block = 128,
// D96-NOT:   cta_ring
func.func @d96(%q: tensor<?x32x96xf16>, %kc: memref<?x16x8x96xf16>, %vc: memref<?x16x8x96xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x32x96xf16> {
  %o = fusion.kernel @attn_d96 (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x32x96xf16>, memref<?x16x8x96xf16>, memref<?x16x8x96xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x32x96xf16> attributes {strategy = #fusion.strategy<decode>} {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x32x96xf16>, memref<?x16x8x96xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x32x96xf16>
  }
  return %o : tensor<?x32x96xf16>
}
