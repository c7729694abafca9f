// RUN: fusion-opt %s -split-input-file -verify-diagnostics --convert-fusion-to-gpu

// Shapes and schedules the attention emitter does not support are errors on
// the fusion.kernel that name the value; no gpu.func is emitted for them.

// head_dim must be a multiple of 8 (16-byte K/V vectors).
func.func @head_dim_100(%q: tensor<?x8x100xf16>, %kc: memref<?x16x2x100xf16>, %vc: memref<?x16x2x100xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x8x100xf16> {
  // expected-error @+1 {{'fusion.kernel' op attention emitter: head_dim 100 is not a multiple of 8 (K/V rows are read as 16-byte vectors)}}
  %o = fusion.kernel @attn (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x8x100xf16>, memref<?x16x2x100xf16>, memref<?x16x2x100xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x8x100xf16> {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x8x100xf16>, memref<?x16x2x100xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x8x100xf16>
  }
  return %o : tensor<?x8x100xf16>
}

// -----

// head_dim above 256.
func.func @head_dim_512(%q: tensor<?x8x512xbf16>, %kc: memref<?x16x2x512xbf16>, %vc: memref<?x16x2x512xbf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x8x512xbf16> {
  // expected-error @+1 {{'fusion.kernel' op attention emitter: head_dim 512 is larger than 256}}
  %o = fusion.kernel @attn (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x8x512xbf16>, memref<?x16x2x512xbf16>, memref<?x16x2x512xbf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x8x512xbf16> {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x8x512xbf16>, memref<?x16x2x512xbf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x8x512xbf16>
  }
  return %o : tensor<?x8x512xbf16>
}

// -----

// A kernel with attention and anything else is not an attention kernel.
func.func @rope_and_attention(%q: tensor<?x4x16xf16>, %k: tensor<?x2x16xf16>, %pos: tensor<?xi32>,
    %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>)
    -> tensor<?x4x16xf16> {
  // expected-error @+1 {{'fusion.kernel' op attention emitter: the kernel must hold exactly one fusion.decode_attention, optionally followed by one fusion.linear_partials of its result (its only use), and nothing else, found 'fusion.rope'}}
  %o = fusion.kernel @attn (%a = %q, %a2 = %k, %p = %pos, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>, memref<?x4x2x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x4x16xf16> {
    %qr, %kr = fusion.rope %a, %a2, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
        : tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?xi32>
    %0 = fusion.decode_attention %qr, %b, %c[%d, %e]
        : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x4x16xf16>
  }
  return %o : tensor<?x4x16xf16>
}

// -----

// A schedule the kernel carries is kept, so it must be the one its
// threads, max_splits, kv_unroll, heads_per_cta and cluster_splits give
// (chunk_multiple is 64 here).
func.func @inconsistent_schedule(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x32x128xf16> {
  // expected-error @+1 {{'fusion.kernel' op carries the schedule #fusion.split_kv_attention_schedule<threads = 256, max_splits = 64, heads_per_cta = 4, head_blocks = 1, vector_width = 8, lanes_per_row = 16, kv_unroll = 4, chunk_multiple = 32, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>, but the kernel it describes has #fusion.split_kv_attention_schedule<threads = 256, max_splits = 64, heads_per_cta = 4, head_blocks = 1, vector_width = 8, lanes_per_row = 16, kv_unroll = 4, chunk_multiple = 64, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>}}
  %o = fusion.kernel @attn (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x32x128xf16>, memref<?x16x8x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x32x128xf16> attributes {schedule = #fusion.split_kv_attention_schedule<threads = 256, max_splits = 64, heads_per_cta = 4, head_blocks = 1, vector_width = 8, lanes_per_row = 16, kv_unroll = 4, chunk_multiple = 32, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>} {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x32x128xf16>
  }
  return %o : tensor<?x32x128xf16>
}

// -----

// A schedule of another kind is not the attention kernel's.
func.func @wrong_schedule_kind(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x32x128xf16> {
  // expected-error @+1 {{'fusion.kernel' op carries the schedule #fusion.norm_row_schedule<threads = 256, vector_width = 8, tokens_per_cta = 1>, but the kernel it describes has #fusion.split_kv_attention_schedule<threads = 256,}}
  %o = fusion.kernel @attn (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x32x128xf16>, memref<?x16x8x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x32x128xf16> attributes {schedule = #fusion.norm_row_schedule<threads = 256, vector_width = 8, tokens_per_cta = 1>} {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x32x128xf16>
  }
  return %o : tensor<?x32x128xf16>
}

// -----

// The carried schedule's choices are checked: heads_per_cta must divide the
// group size (4 here).
func.func @bad_heads_per_cta(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x32x128xf16> {
  // expected-error @+1 {{'fusion.kernel' op attention schedule: heads_per_cta (3) must divide the group size 4 and be at most 16}}
  %o = fusion.kernel @attn (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x32x128xf16>, memref<?x16x8x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x32x128xf16> attributes {schedule = #fusion.split_kv_attention_schedule<threads = 256, max_splits = 64, heads_per_cta = 3, head_blocks = 1, vector_width = 8, lanes_per_row = 16, kv_unroll = 4, chunk_multiple = 64, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>} {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x32x128xf16>
  }
  return %o : tensor<?x32x128xf16>
}

// -----

// The cross-warp merge must fit in 48 KB of static shared memory.
func.func @too_much_smem(%q: tensor<?x8x256xf16>, %kc: memref<?x16x1x256xf16>, %vc: memref<?x16x1x256xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x8x256xf16> {
  // expected-error @+1 {{'fusion.kernel' op attention schedule needs 66052 bytes of shared memory (threads 256, heads_per_cta 8, head_dim 256), more than 49152}}
  %o = fusion.kernel @attn (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x8x256xf16>, memref<?x16x1x256xf16>, memref<?x16x1x256xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x8x256xf16> attributes {schedule = #fusion.split_kv_attention_schedule<threads = 256, max_splits = 64, heads_per_cta = 8, head_blocks = 1, vector_width = 8, lanes_per_row = 32, kv_unroll = 2, chunk_multiple = 16, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>} {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x8x256xf16>, memref<?x16x1x256xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x8x256xf16>
  }
  return %o : tensor<?x8x256xf16>
}

// -----

// In-page offsets are 32-bit; the check must not overflow itself
// (2^53 x 8 x 128 elements is 2^63).
func.func @huge_page(%q: tensor<?x8x128xf16>, %kc: memref<?x9007199254740992x8x128xf16>, %vc: memref<?x9007199254740992x8x128xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x8x128xf16> {
  // expected-error @+1 {{'fusion.kernel' op attention emitter: a page of 9007199254740992 x 8 x 128 elements is too large (in-page offsets are 32-bit)}}
  %o = fusion.kernel @attn (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x8x128xf16>, memref<?x9007199254740992x8x128xf16>, memref<?x9007199254740992x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x8x128xf16> {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x8x128xf16>, memref<?x9007199254740992x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x8x128xf16>
  }
  return %o : tensor<?x8x128xf16>
}

// -----

// One CTA row per KV head: grid y is at most 65535.
func.func @too_many_kv_heads(%q: tensor<?x65536x8xf16>, %kc: memref<?x1x65536x8xf16>, %vc: memref<?x1x65536x8xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x65536x8xf16> {
  // expected-error @+1 {{'fusion.kernel' op entry attn needs a grid of 65536 CTAs in y; CUDA allows 1 to 65535}}
  %o = fusion.kernel @attn (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x65536x8xf16>, memref<?x1x65536x8xf16>, memref<?x1x65536x8xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x65536x8xf16> {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x65536x8xf16>, memref<?x1x65536x8xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x65536x8xf16>
  }
  return %o : tensor<?x65536x8xf16>
}

// -----

// The cluster combine's exchange buffer (cluster_splits x heads_per_cta x
// (head_dim + 2) floats) must fit beside the merge buffer (4 warps x 8 x 258
// floats + the 4-byte flag, 33028 bytes, at the 32-byte boundary 33056) in
// the 48 KB of static shared memory: 2 x 8 x 258 x 4 bytes do not (the
// default there is 0).
func.func @cluster_exchange_too_large(%q: tensor<?x8x256xf16>, %kc: memref<?x16x1x256xf16>, %vc: memref<?x16x1x256xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> tensor<?x8x256xf16> {
  // expected-error @+1 {{'fusion.kernel' op attention schedule: cluster_splits 2 needs 16512 bytes of exchange buffer beside the merge buffer's 33056, more than 49152}}
  %o = fusion.kernel @attn (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : (tensor<?x8x256xf16>, memref<?x16x1x256xf16>, memref<?x16x1x256xf16>, tensor<?x?xi32>, tensor<?xi32>)
      -> tensor<?x8x256xf16> attributes {schedule = #fusion.split_kv_attention_schedule<threads = 128, max_splits = 64, heads_per_cta = 8, head_blocks = 1, vector_width = 8, lanes_per_row = 32, kv_unroll = 2, chunk_multiple = 16, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 2>} {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x8x256xf16>, memref<?x16x1x256xf16>, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : tensor<?x8x256xf16>
  }
  return %o : tensor<?x8x256xf16>
}

// -----

// The o_proj partials must come one per CTA's heads (here the 2 KV groups),
// not one per head.
func.func @partials_per_head(%q: tensor<?x4x16xf16>, %kc: memref<?x4x2x16xf16>, %vc: memref<?x4x2x16xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>, %w: tensor<64x64xf16>) -> tensor<?x4x64xf32> {
  // expected-error @+1 {{'fusion.kernel' op attention emitter: fusion.linear_partials must have one block per CTA's heads (2 = KV heads x head blocks), got 4}}
  %o = fusion.kernel @attn (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl, %f = %w)
      : (tensor<?x4x16xf16>, memref<?x4x2x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>, tensor<64x64xf16>)
      -> tensor<?x4x64xf32> {
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : tensor<?x4x16xf16>, memref<?x4x2x16xf16>, tensor<?x?xi32>, tensor<?xi32>
    %1 = fusion.linear_partials %0, %f : tensor<?x4x16xf16>, tensor<64x64xf16> -> tensor<?x4x64xf32>
    fusion.yield %1 : tensor<?x4x64xf32>
  }
  return %o : tensor<?x4x64xf32>
}
