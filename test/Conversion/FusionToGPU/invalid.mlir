// RUN: fusion-opt %s -split-input-file --fusion-form-kernels=strategy=none --convert-fusion-to-gpu -verify-diagnostics

// Option values the grids cannot be sized for, or targets the kernels are
// not built for, are errors before anything is emitted.
// RUN: not fusion-opt %s -split-input-file --convert-fusion-to-gpu=sm-count=0 2>&1 | FileCheck %s --check-prefix=SMCOUNT0
// SMCOUNT0: error: convert-fusion-to-gpu option sm-count: 0 is outside [1, 1024] (the number of streaming multiprocessors the grids fill)
// RUN: not fusion-opt %s -split-input-file --convert-fusion-to-gpu=sm-count=-9223372036854775808 2>&1 | FileCheck %s --check-prefix=SMCOUNTMIN
// SMCOUNTMIN: error: convert-fusion-to-gpu option sm-count: -9223372036854775808 is outside [1, 1024]
// RUN: not fusion-opt %s -split-input-file --convert-fusion-to-gpu=attention-ring-stages=2 2>&1 | FileCheck %s --check-prefix=STAGES -DN=2
// RUN: not fusion-opt %s -split-input-file --convert-fusion-to-gpu=attention-ring-stages=5 2>&1 | FileCheck %s --check-prefix=STAGES -DN=5
// RUN: not fusion-opt %s -split-input-file --convert-fusion-to-gpu=attention-ring-stages=28 2>&1 | FileCheck %s --check-prefix=STAGES -DN=28
// STAGES: error: convert-fusion-to-gpu option attention-ring-stages: [[N]] is not a multiple of 4 in [4, 24] (the CTA-wide attention ring's stages
// RUN: not fusion-opt %s -split-input-file --convert-fusion-to-gpu=target-sm=100 2>&1 | FileCheck %s --check-prefix=TARGETSM
// TARGETSM: error: convert-fusion-to-gpu option target-sm: 100 is not the compute capability x 10 of a supported chip (75, 80, 86, 87, 89, 90)

// Shapes the emitters do not support are reported on the kernel (located at
// its first op), naming the offending size.

func.func @hidden_not_multiple_of_8(%x: tensor<?x100xf16>, %w: tensor<768x100xf16>)
    -> (tensor<?x4x64xf16>, tensor<?x4x64xf16>, tensor<?x4x64xf16>) {
  // expected-error @+1 {{hidden size 100 is not a multiple of 8 (the projection reads 16-byte vectors of 8 elements)}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 4 : i64, num_kv_heads = 4 : i64, head_dim = 64 : i64}
      : tensor<?x100xf16>, tensor<768x100xf16> -> tensor<?x4x64xf16>, tensor<?x4x64xf16>, tensor<?x4x64xf16>
  return %q, %k, %v : tensor<?x4x64xf16>, tensor<?x4x64xf16>, tensor<?x4x64xf16>
}

// -----

func.func @odd_head_dim(%x: tensor<?x64xf16>, %w: tensor<90x64xf16>)
    -> (tensor<?x2x15xf16>, tensor<?x2x15xf16>, tensor<?x2x15xf16>) {
  // expected-error @+1 {{head_dim 15 is odd; the projection computes rows in pairs}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 2 : i64, num_kv_heads = 2 : i64, head_dim = 15 : i64}
      : tensor<?x64xf16>, tensor<90x64xf16> -> tensor<?x2x15xf16>, tensor<?x2x15xf16>, tensor<?x2x15xf16>
  return %q, %k, %v : tensor<?x2x15xf16>, tensor<?x2x15xf16>, tensor<?x2x15xf16>
}

// -----

func.func @hidden_too_large(%x: tensor<?x32768xf16>, %w: tensor<6x32768xf16>)
    -> (tensor<?x1x2xf16>, tensor<?x1x2xf16>, tensor<?x1x2xf16>) {
  // expected-error @+1 {{hidden size 32768 needs more shared memory per token row than the 47104 bytes available (2 bytes per element)}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 1 : i64, num_kv_heads = 1 : i64, head_dim = 2 : i64}
      : tensor<?x32768xf16>, tensor<6x32768xf16> -> tensor<?x1x2xf16>, tensor<?x1x2xf16>, tensor<?x1x2xf16>
  return %q, %k, %v : tensor<?x1x2xf16>, tensor<?x1x2xf16>, tensor<?x1x2xf16>
}

// -----

func.func @norm_hidden_not_multiple_of_8(%x: tensor<?x100xbf16>, %w: tensor<100xbf16>) -> tensor<?x100xbf16> {
  // expected-error @+1 {{hidden size 100 is not a multiple of 8 (the norm reads 16-byte vectors of 8 elements)}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x100xbf16>, tensor<100xbf16> -> tensor<?x100xbf16>
  return %y : tensor<?x100xbf16>
}

// -----

func.func @rope_odd_head_dim(%q: tensor<?x2x15xf16>, %k: tensor<?x1x15xf16>, %pos: tensor<?xi32>)
    -> (tensor<?x2x15xf16>, tensor<?x1x15xf16>) {
  // expected-error @+1 {{head_dim 15 is odd; elements are processed in pairs}}
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64, rotary_dim = 14 : i64}
      : tensor<?x2x15xf16>, tensor<?x1x15xf16>, tensor<?xi32>
  return %qr, %kr : tensor<?x2x15xf16>, tensor<?x1x15xf16>
}

// -----

// Launches past CUDA's limits are errors, not manifests a driver rejects:
// one CTA per head slot (2^31 query heads + 1 key head) ...
func.func @rope_grid_too_large(%q: tensor<?x2147483648x64xf16>, %k: tensor<?x1x64xf16>, %pos: tensor<?xi32>)
    -> (tensor<?x2147483648x64xf16>, tensor<?x1x64xf16>) {
  // expected-error @+1 {{'fusion.kernel' op entry rope_grid_too_large_k0_rope needs a grid of 2147483649 CTAs in x; CUDA allows 1 to 2147483647}}
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x2147483648x64xf16>, tensor<?x1x64xf16>, tensor<?xi32>
  return %qr, %kr : tensor<?x2147483648x64xf16>, tensor<?x1x64xf16>
}

// -----

// ... and one thread per element pair (head_dim 2050: 1025 threads, 1056
// rounded to warps): the kernel's schedule fails its own verifier.
func.func @rope_block_too_large(%q: tensor<?x2x2050xf16>, %k: tensor<?x1x2050xf16>, %pos: tensor<?xi32>)
    -> (tensor<?x2x2050xf16>, tensor<?x1x2050xf16>) {
  // expected-error @+1 {{'fusion.kernel' op has no valid schedule: head_schedule threads must be a multiple of 32 in [32, 1024], got 1056}}
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x2x2050xf16>, tensor<?x1x2050xf16>, tensor<?xi32>
  return %qr, %kr : tensor<?x2x2050xf16>, tensor<?x1x2050xf16>
}

// -----

// Two different kernels with one name would be two PTX entries of that name
// (the verifier does not check names module-wide; this pass does). Kernels
// with the same name and the same body share one entry.
func.func @kernel_duplicate_name(%x: tensor<?x64xf16>, %w: tensor<64xf16>) -> (tensor<?x64xf16>, tensor<?x64xf16>) {
  %0 = fusion.kernel @k (%a = %x, %b = %w) : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16> {
    %y = fusion.rmsnorm %a, %b {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
    fusion.yield %y : tensor<?x64xf16>
  }
  %1 = fusion.kernel @k (%a = %x, %b = %w) : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16> {
    %y = fusion.rmsnorm %a, %b {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
    fusion.yield %y : tensor<?x64xf16>
  }
  // expected-error @below {{'fusion.kernel' op kernel 'k' is already in the gpu.module}}
  %2 = fusion.kernel @k (%a = %x, %b = %w) : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16> {
    %y = fusion.rmsnorm %a, %b {epsilon = 1.0e-06 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
    fusion.yield %y : tensor<?x64xf16>
  }
  return %0, %2 : tensor<?x64xf16>, tensor<?x64xf16>
}

// -----

// The embedding kernel copies rows in 16-byte vectors.
func.func @embedding_hidden(%t: tensor<?xi32>, %e: tensor<256x60xf16>) -> tensor<?x60xf16> {
  // expected-error @+1 {{'fusion.kernel' op embedding: hidden size 60 is not a multiple of 8 (rows are copied in 16-byte vectors of 8 elements)}}
  %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<256x60xf16> -> tensor<?x60xf16>
  return %x : tensor<?x60xf16>
}

// -----

// argmax and silu_mul are kernels of their own, and so is an embedding
// unless it makes the input of a projection kernel's norm: with a norm
// alone no emitter builds it.
func.func @embedding_with_norm(%t: tensor<?xi32>, %e: tensor<256x64xf16>, %w: tensor<64xf16>) -> tensor<?x64xf16> {
  // expected-error @+1 {{'fusion.kernel' op no emitter for a kernel of 2 op(s) containing 'fusion.embedding'; supported: one rmsnorm, layernorm, embedding, argmax or silu_mul, rope, kv_append, rope -> kv_append, or kernels with qkv_proj / linear / decode_attention}}
  %0 = fusion.kernel @embed_norm (%a = %t, %b = %e, %c = %w)
      : (tensor<?xi32>, tensor<256x64xf16>, tensor<64xf16>) -> tensor<?x64xf16> {
    %x = fusion.embedding %a, %b : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
    %y = fusion.rmsnorm %x, %c {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
    fusion.yield %y : tensor<?x64xf16>
  }
  return %0 : tensor<?x64xf16>
}

// -----

// In a projection kernel the embedding must make the norm's input alone
// (the norm gathers its x rows from the table), not its residual.
func.func @embedding_as_residual(%t: tensor<?xi32>, %e: tensor<256x64xf16>, %h: tensor<?x64xf16>,
    %w: tensor<64xf16>, %pw: tensor<128x64xf16>) -> tensor<?x128xf16> {
  // expected-error @+1 {{'fusion.kernel' op unsupported projection kernel: embedding must take kernel operands and feed the input of the norm alone (its result may be yielded)}}
  %0 = fusion.kernel @embed_residual (%a = %t, %b = %e, %c = %h, %d = %w, %f = %pw)
      : (tensor<?xi32>, tensor<256x64xf16>, tensor<?x64xf16>, tensor<64xf16>, tensor<128x64xf16>)
      -> tensor<?x128xf16> {
    %x = fusion.embedding %a, %b : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
    %y, %r = fusion.rmsnorm %c, %d residual(%x : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
        : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
    %p = fusion.linear %y, %f : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x128xf16>
    fusion.yield %p : tensor<?x128xf16>
  }
  return %0 : tensor<?x128xf16>
}

// -----

func.func @argmax_twice(%l: tensor<?x256xf16>) -> (tensor<?xi32>, tensor<?xi32>) {
  // expected-error @+1 {{'fusion.kernel' op no emitter for a kernel of 2 op(s) containing 'fusion.argmax'}}
  %0:2 = fusion.kernel @two_argmax (%a = %l) : (tensor<?x256xf16>) -> (tensor<?xi32>, tensor<?xi32>) {
    %x = fusion.argmax %a : tensor<?x256xf16> -> tensor<?xi32>
    %y = fusion.argmax %a : tensor<?x256xf16> -> tensor<?xi32>
    fusion.yield %x, %y : tensor<?xi32>, tensor<?xi32>
  }
  return %0#0, %0#1 : tensor<?xi32>, tensor<?xi32>
}

// -----

// Each kernel writes its op's result: a silu_mul whose result the kernel does
// not yield has nowhere to go.
func.func @silu_mul_not_yielded(%gu: tensor<?x256xbf16>) {
  // expected-error @+1 {{'fusion.kernel' op silu_mul: the input must be a kernel operand and the result a kernel result}}
  fusion.kernel @dead_silu (%a = %gu) : (tensor<?x256xbf16>) -> () {
    %m = fusion.silu_mul %a : tensor<?x256xbf16> -> tensor<?x128xbf16>
    fusion.yield
  }
  return
}

// -----

func.func @embedding_not_yielded(%t: tensor<?xi32>, %e: tensor<256x64xf16>) {
  // expected-error @+1 {{'fusion.kernel' op embedding: the tokens and the table must be kernel operands and the result a kernel result}}
  fusion.kernel @dead_embedding (%a = %t, %b = %e) : (tensor<?xi32>, tensor<256x64xf16>) -> () {
    %x = fusion.embedding %a, %b : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
    fusion.yield
  }
  return
}

// -----

func.func @argmax_not_yielded(%l: tensor<?x256xf16>) {
  // expected-error @+1 {{'fusion.kernel' op argmax: the logits must be a kernel operand and the result a kernel result}}
  fusion.kernel @dead_argmax (%a = %l) : (tensor<?x256xf16>) -> () {
    %x = fusion.argmax %a : tensor<?x256xf16> -> tensor<?xi32>
    fusion.yield
  }
  return
}

// -----

// A projection kernel holds one projection: qkv_proj or linear.
func.func @projection_with_linear(%x: tensor<?x64xf16>, %w: tensor<128x64xf16>, %o_w: tensor<64x64xf16>)
    -> tensor<?x64xf16> {
  // expected-error @+1 {{'fusion.kernel' op projection kernel must hold at most one norm, one qkv_proj or linear, and one rope, kv_append, silu_mul and argmax (in this order)}}
  %0 = fusion.kernel @mixed (%a = %x, %b = %w, %c = %o_w)
      : (tensor<?x64xf16>, tensor<128x64xf16>, tensor<64x64xf16>) -> tensor<?x64xf16> {
    %q, %k, %v = fusion.qkv_proj %a, %b {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
        : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
    %o = fusion.linear %q, %c : tensor<?x4x16xf16>, tensor<64x64xf16> -> tensor<?x64xf16>
    fusion.yield %o : tensor<?x64xf16>
  }
  return %0 : tensor<?x64xf16>
}

// -----

// A linear layer is computed in row pairs.
func.func @linear_odd_rows(%x: tensor<?x64xf16>, %w: tensor<63x64xf16>) -> tensor<?x63xf16> {
  // expected-error @+1 {{'fusion.kernel' op linear output size 63 is odd; the projection computes rows in pairs}}
  %0 = fusion.kernel @odd (%a = %x, %b = %w) : (tensor<?x64xf16>, tensor<63x64xf16>) -> tensor<?x63xf16> {
    %y = fusion.linear %a, %b : tensor<?x64xf16>, tensor<63x64xf16> -> tensor<?x63xf16>
    fusion.yield %y : tensor<?x63xf16>
  }
  return %0 : tensor<?x63xf16>
}

// -----

// The fused SwiGLU epilogue writes only the activation: a kernel that also
// yields the [gate | up] rows is not one it builds (form-kernels never forms
// it: the outside use cuts the group before silu_mul).
func.func @gate_up_also_yielded(%x: tensor<?x64xf16>, %w: tensor<256x64xf16>) -> (tensor<?x256xf16>, tensor<?x128xf16>) {
  // expected-error @+1 {{'fusion.kernel' op unsupported projection kernel: the result of linear must be used by silu_mul alone}}
  %0:2 = fusion.kernel @both (%a = %x, %b = %w) : (tensor<?x64xf16>, tensor<256x64xf16>) -> (tensor<?x256xf16>, tensor<?x128xf16>) {
    %gu = fusion.linear %a, %b : tensor<?x64xf16>, tensor<256x64xf16> -> tensor<?x256xf16>
    %m = fusion.silu_mul %gu : tensor<?x256xf16> -> tensor<?x128xf16>
    fusion.yield %gu, %m : tensor<?x256xf16>, tensor<?x128xf16>
  }
  return %0#0, %0#1 : tensor<?x256xf16>, tensor<?x128xf16>
}
