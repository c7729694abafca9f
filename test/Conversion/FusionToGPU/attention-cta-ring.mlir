// RUN: fusion-opt %s --convert-fusion-to-gpu="attention-cta-ring=true" | FileCheck %s
// RUN: fusion-opt %s --convert-fusion-to-gpu | FileCheck %s --check-prefix=OFF
// RUN: rm -rf %t && mkdir -p %t
// RUN: fusion-compile %s --chip=sm_90 --attention-cta-ring -o %t/ring
// RUN: FileCheck %s --check-prefix=MANIFEST --input-file=%t/ring.manifest.json
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t/ring.ptx -o %t/ring.cubin %}

// The tensor-core attention with one CTA-wide K/V ring (opt-in:
// attention-cta-ring; Kernels/AttentionMma.h). Llama-3-8B shapes: Hq/Hkv =
// 32/8 (G = 4), D = 128, f16, pages of 16. A tile (16 K rows and 16 V rows
// of 128 + 8 elements) is 2 x 16 x 136 x 2 = 8704 bytes; the ring deepens
// by rounds of the 4 consumer warps while 2 CTAs fit an SM: 12 stages
// (104448 + 8516 static, 192 of it the mbarriers, + 1 KiB reserved, twice, fits
// 227 KiB; 16 would not). 4 consumer warps + the producer = 160 threads.
// CHECK-LABEL: func.func @llama
// CHECK:       fusion.kernel @attn_g4
// CHECK-SAME:    entry = "attn_g4_mma", grid = [num_splits, 8, batch], block = 160, smem = 104448, static_smem = 8516,
// CHECK-SAME:    schedule = #fusion.split_kv_attention_mma_schedule<threads = 160, {{.*}} chunk_multiple = 64, stages = 12, {{.*}} cluster_splits = 0, cta_ring = true>
// CHECK:       gpu.func @attn_g4_mma(
// CHECK-SAME:    known_block_size = array<i32: 160, 1, 1>
// The full and the empty barriers of the 12 slots (24 mbarriers, one
// arrival each), initialised together.
// CHECK-COUNT-24: nvvm.mbarrier.init %{{.*}}, %c1_i32
// CHECK-NEXT:  nvvm.fence.mbarrier.init
// CHECK:       gpu.barrier
// CHECK-NOT:   nvvm.mbarrier.init
// Warps 0-3 consume: each tile but its last, then (if it has any) its last
// tile with the V fragments of tokens at or past the split's end zeroed
// (rows the producer did not copy). A tile: the slot's full phase
// (t / 12 mod 2), Q K^T, the online softmax, P V, then lane 0 releases
// the slot on its empty barrier after a warp sync.
// CHECK:       arith.cmpi ult, %{{.*}}, %c4
// CHECK:       scf.for
// CHECK:         arith.remui %{{.*}}, %c12_i32
// CHECK:         mbarrier.try_wait.parity
// CHECK:         nvvm.ldmatrix
// CHECK:         nvvm.mma.sync
// CHECK-NOT:     vector<2xi1>
// CHECK:         nvvm.bar.warp.sync
// CHECK:         @p mbarrier.arrive.shared::cta.b64
// CHECK:       scf.if %{{.*}} -> (f32
// CHECK:         mbarrier.try_wait.parity
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
// From t = 12 it waits for the slot's empty phase ((t / 12 - 1) mod 2)
// and fences for the async proxy; lane 0 arms the full barrier for the
// tile's valid rows (512 bytes each: a K row and a V row), a warp sync,
// and lane r copies row r % 16 of K (r < 16) or V by one 256-byte bulk
// copy where r % 16 is below the valid rows.
// CHECK:       } else {
// CHECK:         memref.load
// CHECK:         memref.load
// CHECK:         scf.for {{.*}} -> (i32, i32)
// CHECK:           scf.if %{{.*}} -> (i32, i32)
// CHECK:             memref.load
// CHECK:           gpu.shuffle  idx
// CHECK:           arith.cmpi uge, %{{.*}}, %c12_i32
// CHECK-NEXT:      scf.if
// CHECK:             arith.subi %{{.*}}, %c1_i32
// CHECK:             mbarrier.try_wait.parity
// CHECK-NEXT:        nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// CHECK:           arith.minsi %{{.*}}, %c16_i32
// CHECK:           arith.muli %{{.*}}, %c512_i32
// CHECK-NEXT:      nvvm.mbarrier.arrive.expect_tx
// CHECK:           nvvm.bar.warp.sync
// CHECK:           arith.cmpi slt
// CHECK-NEXT:      scf.if
// CHECK:           arith.select %{{.*}}, %{{.*}}, %{{.*}} : !llvm.ptr<1>
// CHECK:           nvvm.cp.async.bulk.shared.cluster.global %{{.*}}, %{{.*}}, %{{.*}}, %c256_i32
// CHECK:       gpu.barrier
// CHECK:       gpu.return

// Off by default: each warp's own cp.async ring, 128 threads.
// OFF:         entry = "attn_g4_mma", grid = [num_splits, 8, batch], block = 128, smem = 104448,
// OFF-NOT:     cta_ring

// MANIFEST:    "entry": "attn_g4_mma"
// MANIFEST:    "cta_ring": true
// MANIFEST:    "stages": 12
// MANIFEST:    "threads": 160
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
