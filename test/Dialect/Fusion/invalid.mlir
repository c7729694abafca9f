// RUN: fusion-opt %s -split-input-file -verify-diagnostics

// One case per diagnostic of the fusion dialect (FusionOps.cpp,
// FusionDialect.cpp, LaunchAttrs.cpp, ScheduleAttrs.cpp, the fusion.kernel
// parser) and a few of the ODS constraint errors. Each case is valid except for the one thing it names.

//===----------------------------------------------------------------------===//
// fusion.rmsnorm
//===----------------------------------------------------------------------===//

func.func @rmsnorm_input_rank(%x: tensor<4096xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op input must have rank 2, got 'tensor<4096xf16>'}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<4096xf16>, tensor<4096xf16> -> tensor<4096xf16>
  return
}

// -----

func.func @rmsnorm_dynamic_hidden(%x: tensor<?x?xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op input dimension 1 (hidden size) must be static and positive, got 'tensor<?x?xf16>'}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x?xf16>, tensor<4096xf16> -> tensor<?x?xf16>
  return
}

// -----

func.func @rmsnorm_epsilon_zero(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op epsilon must be a positive normal float32 (the kernels add it in fp32), got 0.000000e+00}}
  %y = fusion.rmsnorm %x, %w {epsilon = 0.0 : f64} : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @rmsnorm_weight_rank(%x: tensor<?x4096xf16>, %w: tensor<1x4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op weight must have rank 1, got 'tensor<1x4096xf16>'}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x4096xf16>, tensor<1x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @rmsnorm_weight_element_type(%x: tensor<?x4096xf16>, %w: tensor<4096xbf16>) {
  // expected-error @below {{'fusion.rmsnorm' op weight element type 'bf16' does not match input element type 'f16'}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x4096xf16>, tensor<4096xbf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @rmsnorm_weight_size(%x: tensor<?x4096xf16>, %w: tensor<2048xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op weight dimension 0 is 2048 but the hidden size of input is 4096}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x4096xf16>, tensor<2048xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @rmsnorm_result_type(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op result type 'tensor<?x4096xbf16>' does not match input type 'tensor<?x4096xf16>'}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xbf16>
  return
}

// -----

func.func @rmsnorm_residual_without_residual_out(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>, %r: tensor<?x4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op has a residual operand but no residual_out result; both or neither}}
  %y = fusion.rmsnorm %x, %w residual(%r : tensor<?x4096xf16>) {epsilon = 1.0e-05 : f64} : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @rmsnorm_residual_out_without_residual(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op has no residual operand but a residual_out result; both or neither}}
  %y, %h = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>, tensor<?x4096xf16>
  return
}

// -----

func.func @rmsnorm_residual_type(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>, %r: tensor<4x4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op residual type 'tensor<4x4096xf16>' does not match input type 'tensor<?x4096xf16>'}}
  %y, %h = fusion.rmsnorm %x, %w residual(%r : tensor<4x4096xf16>) {epsilon = 1.0e-05 : f64} : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>, tensor<?x4096xf16>
  return
}

// -----

func.func @rmsnorm_residual_out_type(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>, %r: tensor<?x4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op residual_out type 'tensor<?x4096xbf16>' does not match input type 'tensor<?x4096xf16>'}}
  %y, %h = fusion.rmsnorm %x, %w residual(%r : tensor<?x4096xf16>) {epsilon = 1.0e-05 : f64} : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>, tensor<?x4096xbf16>
  return
}

// -----

// ODS: activations are f16 or bf16 only.
func.func @rmsnorm_f32(%x: tensor<?x4096xf32>, %w: tensor<4096xf32>) {
  // expected-error @below {{'fusion.rmsnorm' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type values, but got 'tensor<?x4096xf32>'}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x4096xf32>, tensor<4096xf32> -> tensor<?x4096xf32>
  return
}

// -----

// ODS: epsilon is required.
func.func @rmsnorm_no_epsilon(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op requires attribute 'epsilon'}}
  %y = fusion.rmsnorm %x, %w : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fusion.layernorm
//===----------------------------------------------------------------------===//

func.func @layernorm_input_rank(%x: tensor<?x1x2048xf16>, %w: tensor<2048xf16>, %b: tensor<2048xf16>) {
  // expected-error @below {{'fusion.layernorm' op input must have rank 2, got 'tensor<?x1x2048xf16>'}}
  %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64} : tensor<?x1x2048xf16>, tensor<2048xf16>, tensor<2048xf16> -> tensor<?x1x2048xf16>
  return
}

// -----

func.func @layernorm_epsilon_negative(%x: tensor<?x2048xf16>, %w: tensor<2048xf16>, %b: tensor<2048xf16>) {
  // expected-error @below {{'fusion.layernorm' op epsilon must be a positive normal float32 (the kernels add it in fp32), got -1.000000e-05}}
  %y = fusion.layernorm %x, %w, %b {epsilon = -1.0e-05 : f64} : tensor<?x2048xf16>, tensor<2048xf16>, tensor<2048xf16> -> tensor<?x2048xf16>
  return
}

// -----

func.func @layernorm_weight_size(%x: tensor<?x2048xf16>, %w: tensor<4096xf16>, %b: tensor<2048xf16>) {
  // expected-error @below {{'fusion.layernorm' op weight dimension 0 is 4096 but the hidden size of input is 2048}}
  %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64} : tensor<?x2048xf16>, tensor<4096xf16>, tensor<2048xf16> -> tensor<?x2048xf16>
  return
}

// -----

func.func @layernorm_bias_rank(%x: tensor<?x2048xf16>, %w: tensor<2048xf16>, %b: tensor<1x2048xf16>) {
  // expected-error @below {{'fusion.layernorm' op bias must have rank 1, got 'tensor<1x2048xf16>'}}
  %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64} : tensor<?x2048xf16>, tensor<2048xf16>, tensor<1x2048xf16> -> tensor<?x2048xf16>
  return
}

// -----

func.func @layernorm_bias_element_type(%x: tensor<?x2048xbf16>, %w: tensor<2048xbf16>, %b: tensor<2048xf16>) {
  // expected-error @below {{'fusion.layernorm' op bias element type 'f16' does not match input element type 'bf16'}}
  %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64} : tensor<?x2048xbf16>, tensor<2048xbf16>, tensor<2048xf16> -> tensor<?x2048xbf16>
  return
}

// -----

func.func @layernorm_bias_size(%x: tensor<?x2048xf16>, %w: tensor<2048xf16>, %b: tensor<1024xf16>) {
  // expected-error @below {{'fusion.layernorm' op bias dimension 0 is 1024 but the hidden size of input is 2048}}
  %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64} : tensor<?x2048xf16>, tensor<2048xf16>, tensor<1024xf16> -> tensor<?x2048xf16>
  return
}

// -----

func.func @layernorm_result_type(%x: tensor<?x2048xf16>, %w: tensor<2048xf16>, %b: tensor<2048xf16>) {
  // expected-error @below {{'fusion.layernorm' op result type 'tensor<8x2048xf16>' does not match input type 'tensor<?x2048xf16>'}}
  %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64} : tensor<?x2048xf16>, tensor<2048xf16>, tensor<2048xf16> -> tensor<8x2048xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fusion.qkv_proj (Llama-3-8B shapes unless noted: 32/8 heads, head_dim 128,
// hidden 4096, 6144 packed rows)
//===----------------------------------------------------------------------===//

func.func @qkv_heads_not_multiple(%x: tensor<?x4096xf16>, %w: tensor<5376x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op num_heads (32) must be a multiple of num_kv_heads (5)}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 5 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<5376x4096xf16> -> tensor<?x32x128xf16>, tensor<?x5x128xf16>, tensor<?x5x128xf16>
  return
}

// -----

// ODS: head counts are positive.
func.func @qkv_zero_heads(%x: tensor<?x4096xf16>, %w: tensor<2048x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op attribute 'num_heads' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 0 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<2048x4096xf16> -> tensor<?x0x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_input_rank(%x: tensor<4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op input must have rank 2, got 'tensor<4096xf16>'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_dynamic_hidden(%x: tensor<?x?xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op input dimension 1 (hidden size) must be static and positive, got 'tensor<?x?xf16>'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x?xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_weight_rank(%x: tensor<?x4096xf16>, %w: tensor<6144x32x128xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op weight must have rank 2, got 'tensor<6144x32x128xf16>'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x32x128xf16> -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_weight_element_type(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xbf16>) {
  // expected-error @below {{'fusion.qkv_proj' op weight element type 'bf16' does not match input element type 'f16'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xbf16> -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  return
}

// -----

// The q_proj weight alone (4096 rows) instead of the packed [6144, 4096].
func.func @qkv_weight_shape(%x: tensor<?x4096xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op weight shape must be [(num_heads + 2 * num_kv_heads) * head_dim, hidden] = [(32 + 2 * 8) * 128, 4096] = [6144, 4096], got 'tensor<4096x4096xf16>'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<4096x4096xf16> -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  return
}

// -----

// Transposed packed weight ([hidden, rows] instead of [rows, hidden]).
func.func @qkv_weight_transposed(%x: tensor<?x4096xf16>, %w: tensor<4096x6144xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op weight shape must be [(num_heads + 2 * num_kv_heads) * head_dim, hidden] = [(32 + 2 * 8) * 128, 4096] = [6144, 4096], got 'tensor<4096x6144xf16>'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<4096x6144xf16> -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_bias_rank(%x: tensor<?x3584xbf16>, %w: tensor<4608x3584xbf16>, %b: tensor<36x128xbf16>) {
  // expected-error @below {{'fusion.qkv_proj' op bias must have rank 1, got 'tensor<36x128xbf16>'}}
  %q, %k, %v = fusion.qkv_proj %x, %w bias(%b : tensor<36x128xbf16>) {num_heads = 28 : i64, num_kv_heads = 4 : i64, head_dim = 128 : i64}
      : tensor<?x3584xbf16>, tensor<4608x3584xbf16> -> tensor<?x28x128xbf16>, tensor<?x4x128xbf16>, tensor<?x4x128xbf16>
  return
}

// -----

func.func @qkv_bias_element_type(%x: tensor<?x3584xbf16>, %w: tensor<4608x3584xbf16>, %b: tensor<4608xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op bias element type 'f16' does not match input element type 'bf16'}}
  %q, %k, %v = fusion.qkv_proj %x, %w bias(%b : tensor<4608xf16>) {num_heads = 28 : i64, num_kv_heads = 4 : i64, head_dim = 128 : i64}
      : tensor<?x3584xbf16>, tensor<4608x3584xbf16> -> tensor<?x28x128xbf16>, tensor<?x4x128xbf16>, tensor<?x4x128xbf16>
  return
}

// -----

// Qwen2-7B: the q bias alone (28 * 128 = 3584) instead of q|k|v (4608).
func.func @qkv_bias_size(%x: tensor<?x3584xbf16>, %w: tensor<4608x3584xbf16>, %b: tensor<3584xbf16>) {
  // expected-error @below {{'fusion.qkv_proj' op bias dimension 0 is 3584 but (num_heads + 2 * num_kv_heads) * head_dim is 4608}}
  %q, %k, %v = fusion.qkv_proj %x, %w bias(%b : tensor<3584xbf16>) {num_heads = 28 : i64, num_kv_heads = 4 : i64, head_dim = 128 : i64}
      : tensor<?x3584xbf16>, tensor<4608x3584xbf16> -> tensor<?x28x128xbf16>, tensor<?x4x128xbf16>, tensor<?x4x128xbf16>
  return
}

// -----

func.func @qkv_query_rank(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op query must have rank 3, got 'tensor<?x4096xf16>'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x4096xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_query_batch(%x: tensor<4x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op query dimension 0 is 3 but the batch size of input is 4}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<4x4096xf16>, tensor<6144x4096xf16> -> tensor<3x32x128xf16>, tensor<4x8x128xf16>, tensor<4x8x128xf16>
  return
}

// -----

func.func @qkv_query_heads(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op query dimension 1 is 16 but num_heads is 32}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x16x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_query_head_dim(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op query dimension 2 is 64 but head_dim is 128}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x64xf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_query_element_type(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op query element type 'bf16' does not match input element type 'f16'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xbf16>, tensor<?x8x128xf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_key_rank(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op key must have rank 3, got 'tensor<?x1024xf16>'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xf16>, tensor<?x1024xf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_key_batch(%x: tensor<4x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op key dimension 0 is 1 but the batch size of input is 4}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<4x4096xf16>, tensor<6144x4096xf16> -> tensor<4x32x128xf16>, tensor<1x8x128xf16>, tensor<4x8x128xf16>
  return
}

// -----

// K gets the query head count.
func.func @qkv_key_heads(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op key dimension 1 is 32 but num_kv_heads is 8}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xf16>, tensor<?x32x128xf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_key_head_dim(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op key dimension 2 is 256 but head_dim is 128}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xf16>, tensor<?x8x256xf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_key_element_type(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op key element type 'bf16' does not match input element type 'f16'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xf16>, tensor<?x8x128xbf16>, tensor<?x8x128xf16>
  return
}

// -----

func.func @qkv_value_rank(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op value must have rank 3, got 'tensor<?x8x1x128xf16>'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x1x128xf16>
  return
}

// -----

func.func @qkv_value_batch(%x: tensor<2x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op value dimension 0 is 8 but the batch size of input is 2}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<2x4096xf16>, tensor<6144x4096xf16> -> tensor<2x32x128xf16>, tensor<2x8x128xf16>, tensor<8x8x128xf16>
  return
}

// -----

func.func @qkv_value_heads(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op value dimension 1 is 4 but num_kv_heads is 8}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x4x128xf16>
  return
}

// -----

func.func @qkv_value_head_dim(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op value dimension 2 is 64 but head_dim is 128}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x64xf16>
  return
}

// -----

func.func @qkv_value_element_type(%x: tensor<?x4096xf16>, %w: tensor<6144x4096xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op value element type 'bf16' does not match input element type 'f16'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 32 : i64, num_kv_heads = 8 : i64, head_dim = 128 : i64}
      : tensor<?x4096xf16>, tensor<6144x4096xf16> -> tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x8x128xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fusion.rope (32 query heads, 8 KV heads, head_dim 128 unless noted)
//===----------------------------------------------------------------------===//

func.func @rope_query_rank(%q: tensor<?x4096xf16>, %k: tensor<?x8x128xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op query must have rank 3, got 'tensor<?x4096xf16>'}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4096xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_dynamic_heads(%q: tensor<?x?x128xf16>, %k: tensor<?x8x128xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op query dimension 1 (num_heads) must be static and positive, got 'tensor<?x?x128xf16>'}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x?x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_dynamic_head_dim(%q: tensor<?x32x?xf16>, %k: tensor<?x8x128xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op query dimension 2 (head_dim) must be static and positive, got 'tensor<?x32x?xf16>'}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x32x?xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_key_rank(%q: tensor<?x32x128xf16>, %k: tensor<?x1024xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op key must have rank 3, got 'tensor<?x1024xf16>'}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x32x128xf16>, tensor<?x1024xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_key_batch(%q: tensor<4x32x128xf16>, %k: tensor<3x8x128xf16>, %p: tensor<4xi32>) {
  // expected-error @below {{'fusion.rope' op key dimension 0 is 3 but the batch size of query is 4}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<4x32x128xf16>, tensor<3x8x128xf16>, tensor<4xi32>
  return
}

// -----

func.func @rope_key_head_dim(%q: tensor<?x32x128xf16>, %k: tensor<?x8x64xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op key dimension 2 is 64 but the head_dim of query is 128}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x32x128xf16>, tensor<?x8x64xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_key_element_type(%q: tensor<?x32x128xf16>, %k: tensor<?x8x128xbf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op key element type 'bf16' does not match query element type 'f16'}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x32x128xf16>, tensor<?x8x128xbf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_key_dynamic_heads(%q: tensor<?x32x128xf16>, %k: tensor<?x?x128xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op key dimension 1 (num_kv_heads) must be static and positive, got 'tensor<?x?x128xf16>'}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x32x128xf16>, tensor<?x?x128xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_positions_rank(%q: tensor<?x32x128xf16>, %k: tensor<?x8x128xf16>, %p: tensor<?x1xi32>) {
  // expected-error @below {{'fusion.rope' op positions must have rank 1, got 'tensor<?x1xi32>'}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?x1xi32>
  return
}

// -----

func.func @rope_positions_batch(%q: tensor<4x32x128xf16>, %k: tensor<4x8x128xf16>, %p: tensor<3xi32>) {
  // expected-error @below {{'fusion.rope' op positions dimension 0 is 3 but the batch size of query is 4}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<4x32x128xf16>, tensor<4x8x128xf16>, tensor<3xi32>
  return
}

// -----

// ODS: positions are i32.
func.func @rope_positions_i64(%q: tensor<?x32x128xf16>, %k: tensor<?x8x128xf16>, %p: tensor<?xi64>) {
  // expected-error @below {{'fusion.rope' op operand #2 must be ranked tensor of 32-bit signless integer values, but got 'tensor<?xi64>'}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi64>
  return
}

// -----

func.func @rope_rotary_dim_odd(%q: tensor<?x32x128xf16>, %k: tensor<?x8x128xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op rotary_dim (63) must be even and <= head_dim (128)}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64, rotary_dim = 63 : i64}
      : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_rotary_dim_too_large(%q: tensor<?x32x128xf16>, %k: tensor<?x8x128xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op rotary_dim (256) must be even and <= head_dim (128)}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<gptj>, theta = 1.0e+04 : f64, rotary_dim = 256 : i64}
      : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  return
}

// -----

// Without rotary_dim the whole head rotates, so an odd head_dim is rejected.
func.func @rope_odd_head_dim(%q: tensor<?x4x65xf16>, %k: tensor<?x4x65xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op rotary_dim (65) must be even and <= head_dim (65)}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x65xf16>, tensor<?x4x65xf16>, tensor<?xi32>
  return
}

// -----

// ODS: rotary_dim is positive.
func.func @rope_rotary_dim_zero(%q: tensor<?x32x128xf16>, %k: tensor<?x8x128xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op attribute 'rotary_dim' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64, rotary_dim = 0 : i64}
      : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_theta(%q: tensor<?x32x128xf16>, %k: tensor<?x8x128xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op theta must be > 1 and finite in float32 (the frequencies are computed in fp32), got 1.000000e+00}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 1.0 : f64}
      : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  return
}

// -----

// ODS (AllTypesMatch), reachable in the generic form only.
func.func @rope_key_out_type(%q: tensor<?x32x128xf16>, %k: tensor<?x8x128xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op failed to verify that all of {key, key_out} have same type}}
  %qr, %kr = "fusion.rope"(%q, %k, %p) <{pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}>
      : (tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>) -> (tensor<?x32x128xf16>, tensor<?x32x128xf16>)
  return
}

// -----

func.func @rope_pairing_unknown(%q: tensor<?x32x128xf16>, %k: tensor<?x8x128xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{expected ::mlir::fusion::RopePairing to be one of: neox, gptj}}
  // expected-error @below {{failed to parse Fusion_RopePairingAttr parameter 'value' which is to be a `::mlir::fusion::RopePairing`}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<rotate_half>, theta = 1.0e+04 : f64}
      : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// #fusion.llama3_scaling
//===----------------------------------------------------------------------===//

// expected-error @below {{llama3_scaling factor must be a positive normal float32 (the scaling is computed in fp32), got 0.000000e+00}}
func.func @llama3_factor() attributes {s = #fusion.llama3_scaling<factor = 0.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>} {
  return
}

// -----

// expected-error @below {{llama3_scaling low_freq_factor must be a positive normal float32 (the scaling is computed in fp32), got -1.000000e+00}}
func.func @llama3_low_freq_factor() attributes {s = #fusion.llama3_scaling<factor = 8.0, low_freq_factor = -1.0, high_freq_factor = 4.0, original_max_position = 8192>} {
  return
}

// -----

// low and high swapped.
// expected-error @below {{llama3_scaling high_freq_factor (1.000000e+00) must be greater than low_freq_factor (4.000000e+00)}}
func.func @llama3_high_not_above_low() attributes {s = #fusion.llama3_scaling<factor = 8.0, low_freq_factor = 4.0, high_freq_factor = 1.0, original_max_position = 8192>} {
  return
}

// -----

// expected-error @below {{llama3_scaling high_freq_factor must be a positive normal float32 (the scaling is computed in fp32), got INF}}
func.func @llama3_infinite_high_freq_factor() attributes {s = #fusion.llama3_scaling<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 0x7FF0000000000000, original_max_position = 8192>} {
  return
}

// -----

// expected-error @below {{llama3_scaling original_max_position must be in [1, 2147483647], got 9223372036854775807}}
func.func @llama3_original_max_position_past_i32() attributes {s = #fusion.llama3_scaling<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 9223372036854775807>} {
  return
}

// -----

// expected-error @below {{llama3_scaling original_max_position must be in [1, 2147483647], got 0}}
func.func @llama3_original_max_position() attributes {s = #fusion.llama3_scaling<factor = 8.0, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 0>} {
  return
}

// -----

// The float fields need float literals.
// expected-error @below {{unexpected decimal integer literal for a floating point value}}
// expected-note @below {{add a trailing dot to make the literal a float}}
// expected-error @below {{failed to parse Fusion_Llama3RopeScalingAttr parameter 'factor' which is to be a `::llvm::APFloat`}}
func.func @llama3_integer_factor() attributes {s = #fusion.llama3_scaling<factor = 8, low_freq_factor = 1.0, high_freq_factor = 4.0, original_max_position = 8192>} {
  return
}

// -----

// The attribute verifier also runs when the attribute sits on fusion.rope.
func.func @rope_llama3_scaling_invalid(%q: tensor<?x32x128xf16>, %k: tensor<?x8x128xf16>, %p: tensor<?xi32>) {
  // expected-error @below {{llama3_scaling high_freq_factor (2.000000e+00) must be greater than low_freq_factor (2.000000e+00)}}
  %qr, %kr = fusion.rope %q, %k, %p {pairing = #fusion.rope_pairing<neox>, theta = 5.0e+05 : f64, scaling = #fusion.llama3_scaling<factor = 8.0, low_freq_factor = 2.0, high_freq_factor = 2.0, original_max_position = 8192>}
      : tensor<?x32x128xf16>, tensor<?x8x128xf16>, tensor<?xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fusion.kv_append (8 KV heads, head_dim 128, page size 16 unless noted)
//===----------------------------------------------------------------------===//

func.func @kv_append_key_rank(%k: tensor<?x1024xf16>, %v: tensor<?x1024xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key must have rank 3, got 'tensor<?x1024xf16>'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x1024xf16> into memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

// A static page count is a run-time size too.
func.func @kv_append_zero_pages(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<0x16x8x128xf16>, %vc: memref<0x16x8x128xf16>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key_cache dimension 0 (num_pages) is a run-time size the kernels take as an i32: it must be dynamic or in [1, 2147483647], got 'memref<0x16x8x128xf16>'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x8x128xf16> into memref<0x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_cache_rank(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x16x1024xf16>, %vc: memref<?x16x1024xf16>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key_cache must have rank 4, got 'memref<?x16x1024xf16>'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x8x128xf16> into memref<?x16x1024xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_dynamic_page_size(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x?x8x128xf16>, %vc: memref<?x?x8x128xf16>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key_cache dimension 1 (page size) must be static and positive, got 'memref<?x?x8x128xf16>'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x8x128xf16> into memref<?x?x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_dynamic_kv_heads(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x16x?x128xf16>, %vc: memref<?x16x?x128xf16>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key_cache dimension 2 (num_kv_heads) must be static and positive, got 'memref<?x16x?x128xf16>'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x8x128xf16> into memref<?x16x?x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_dynamic_head_dim(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x16x8x?xf16>, %vc: memref<?x16x8x?xf16>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key_cache dimension 3 (head_dim) must be static and positive, got 'memref<?x16x8x?xf16>'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x8x128xf16> into memref<?x16x8x?xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_page_size_zero(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x0x8x128xf16>, %vc: memref<?x0x8x128xf16>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key_cache dimension 1 (page size) must be static and positive, got 'memref<?x0x8x128xf16>'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x8x128xf16> into memref<?x0x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_cache_element_type(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x16x8x128xbf16>, %vc: memref<?x16x8x128xbf16>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key_cache element type 'bf16' does not match key element type 'f16'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x8x128xf16> into memref<?x16x8x128xbf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_cache_head_dim(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x16x8x64xf16>, %vc: memref<?x16x8x64xf16>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key_cache dimension 3 is 64 but the head_dim of key is 128}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x8x128xf16> into memref<?x16x8x64xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_block_table_rank(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op block_table must have rank 2, got 'tensor<?xi32>'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x8x128xf16> into memref<?x16x8x128xf16>, tensor<?xi32>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_block_table_batch(%k: tensor<4x8x128xf16>, %v: tensor<4x8x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<3x?xi32>, %p: tensor<4xi32>) {
  // expected-error @below {{'fusion.kv_append' op block_table dimension 0 is 3 but the batch size of key is 4}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<4x8x128xf16> into memref<?x16x8x128xf16>, tensor<3x?xi32>, tensor<4xi32>
  return
}

// -----

func.func @kv_append_cache_kv_heads(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x16x4x128xf16>, %vc: memref<?x16x4x128xf16>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key_cache dimension 2 is 4 but the num_kv_heads of key is 8}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x8x128xf16> into memref<?x16x4x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_positions_rank(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<?x?xi32>, %p: tensor<?x?xi32>) {
  // expected-error @below {{'fusion.kv_append' op positions must have rank 1, got 'tensor<?x?xi32>'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x8x128xf16> into memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?x?xi32>
  return
}

// -----

func.func @kv_append_positions_batch(%k: tensor<4x8x128xf16>, %v: tensor<4x8x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<4x?xi32>, %p: tensor<2xi32>) {
  // expected-error @below {{'fusion.kv_append' op positions dimension 0 is 2 but the batch size of key is 4}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<4x8x128xf16> into memref<?x16x8x128xf16>, tensor<4x?xi32>, tensor<2xi32>
  return
}

// -----

// ODS: cache pages are f16 or bf16.
func.func @kv_append_f32_cache(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x16x8x128xf32>, %vc: memref<?x16x8x128xf32>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op operand #2 must be memref of 16-bit float or bfloat16 type values, but got 'memref<?x16x8x128xf32>'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %p] : tensor<?x8x128xf16> into memref<?x16x8x128xf32>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

// ODS (AllTypesMatch), reachable in the generic form only.
func.func @kv_append_value_cache_type(%k: tensor<?x8x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x32x8x128xf16>, %bt: tensor<?x?xi32>, %p: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op failed to verify that all of {key_cache, value_cache} have same type}}
  "fusion.kv_append"(%k, %k, %kc, %vc, %bt, %p)
      : (tensor<?x8x128xf16>, tensor<?x8x128xf16>, memref<?x16x8x128xf16>, memref<?x32x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>) -> ()
  return
}

// -----

//===----------------------------------------------------------------------===//
// fusion.decode_attention (32 query heads, 8 KV heads, head_dim 128, page
// size 16 unless noted)
//===----------------------------------------------------------------------===//

func.func @attention_query_rank(%q: tensor<?x4096xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op query must have rank 3, got 'tensor<?x4096xf16>'}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x4096xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_dynamic_heads(%q: tensor<?x?x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op query dimension 1 (num_heads) must be static and positive, got 'tensor<?x?x128xf16>'}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x?x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_dynamic_head_dim(%q: tensor<?x32x?xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op query dimension 2 (head_dim) must be static and positive, got 'tensor<?x32x?xf16>'}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x32x?xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_cache_rank(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128x1xf16>, %vc: memref<?x16x8x128x1xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op key_cache must have rank 4, got 'memref<?x16x8x128x1xf16>'}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x32x128xf16>, memref<?x16x8x128x1xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_dynamic_page_size(%q: tensor<?x32x128xf16>, %kc: memref<?x?x8x128xf16>, %vc: memref<?x?x8x128xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op key_cache dimension 1 (page size) must be static and positive, got 'memref<?x?x8x128xf16>'}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x32x128xf16>, memref<?x?x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_dynamic_kv_heads(%q: tensor<?x32x128xf16>, %kc: memref<?x16x?x128xf16>, %vc: memref<?x16x?x128xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op key_cache dimension 2 (num_kv_heads) must be static and positive, got 'memref<?x16x?x128xf16>'}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x32x128xf16>, memref<?x16x?x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_dynamic_cache_head_dim(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x?xf16>, %vc: memref<?x16x8x?xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op key_cache dimension 3 (head_dim) must be static and positive, got 'memref<?x16x8x?xf16>'}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x32x128xf16>, memref<?x16x8x?xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_page_size_zero(%q: tensor<?x32x128xf16>, %kc: memref<?x0x8x128xf16>, %vc: memref<?x0x8x128xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op key_cache dimension 1 (page size) must be static and positive, got 'memref<?x0x8x128xf16>'}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x32x128xf16>, memref<?x0x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_cache_element_type(%q: tensor<?x32x128xbf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op key_cache element type 'f16' does not match query element type 'bf16'}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x32x128xbf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_cache_head_dim(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x256xf16>, %vc: memref<?x16x8x256xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op key_cache dimension 3 is 256 but the head_dim of query is 128}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x32x128xf16>, memref<?x16x8x256xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_block_table_rank(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<?x?x1xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op block_table must have rank 2, got 'tensor<?x?x1xi32>'}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?x1xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_block_table_batch(%q: tensor<2x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<1x?xi32>, %l: tensor<2xi32>) {
  // expected-error @below {{'fusion.decode_attention' op block_table dimension 0 is 1 but the batch size of query is 2}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<2x32x128xf16>, memref<?x16x8x128xf16>, tensor<1x?xi32>, tensor<2xi32>
  return
}

// -----

func.func @attention_seq_lens_rank(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<?x?xi32>, %l: tensor<i32>) {
  // expected-error @below {{'fusion.decode_attention' op seq_lens must have rank 1, got 'tensor<i32>'}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<i32>
  return
}

// -----

func.func @attention_seq_lens_batch(%q: tensor<2x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<2x?xi32>, %l: tensor<5xi32>) {
  // expected-error @below {{'fusion.decode_attention' op seq_lens dimension 0 is 5 but the batch size of query is 2}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<2x32x128xf16>, memref<?x16x8x128xf16>, tensor<2x?xi32>, tensor<5xi32>
  return
}

// -----

func.func @attention_heads_not_multiple(%q: tensor<?x32x128xf16>, %kc: memref<?x16x5x128xf16>, %vc: memref<?x16x5x128xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op num_heads of query (32) must be a multiple of num_kv_heads of key_cache (5)}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] : tensor<?x32x128xf16>, memref<?x16x5x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_scale(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op scale must be a positive normal float32 (the kernels apply it in fp32), got -8.838835e-02}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %l] {scale = -0.08838834764831845 : f64} : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

// ODS (AllTypesMatch), reachable in the generic form only.
func.func @attention_result_type(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>, %bt: tensor<?x?xi32>, %l: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op failed to verify that all of {query, result} have same type}}
  %o = "fusion.decode_attention"(%q, %kc, %vc, %bt, %l)
      : (tensor<?x32x128xf16>, memref<?x16x8x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>) -> tensor<?x4096xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fusion.linear (Llama-3-8B o_proj / gate-up shapes unless noted)
//===----------------------------------------------------------------------===//

func.func @linear_input_rank(%x: tensor<4096xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.linear' op input must have rank 2 ([B, K]) or 3 ([B, heads, head_dim], read as [B, heads * head_dim]), got 'tensor<4096xf16>'}}
  %y = fusion.linear %x, %w : tensor<4096xf16>, tensor<4096x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @linear_input_rank_4(%x: tensor<?x1x32x128xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.linear' op input must have rank 2 ([B, K]) or 3 ([B, heads, head_dim], read as [B, heads * head_dim]), got 'tensor<?x1x32x128xf16>'}}
  %y = fusion.linear %x, %w : tensor<?x1x32x128xf16>, tensor<4096x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @linear_input_batch_zero(%x: tensor<0x4096xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.linear' op input dimension 0 (batch) is a run-time size the kernels take as an i32: it must be dynamic or in [1, 2147483647], got 'tensor<0x4096xf16>'}}
  %y = fusion.linear %x, %w : tensor<0x4096xf16>, tensor<4096x4096xf16> -> tensor<0x4096xf16>
  return
}

// -----

func.func @linear_dynamic_in_features(%x: tensor<?x?xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.linear' op input dimension 1 (in features) must be static and positive, got 'tensor<?x?xf16>'}}
  %y = fusion.linear %x, %w : tensor<?x?xf16>, tensor<4096x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @linear_dynamic_heads(%x: tensor<?x?x128xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.linear' op input dimension 1 (heads) must be static and positive, got 'tensor<?x?x128xf16>'}}
  %y = fusion.linear %x, %w : tensor<?x?x128xf16>, tensor<4096x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @linear_zero_head_dim(%x: tensor<?x32x0xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.linear' op input dimension 2 (head_dim) must be static and positive, got 'tensor<?x32x0xf16>'}}
  %y = fusion.linear %x, %w : tensor<?x32x0xf16>, tensor<4096x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @linear_features_overflow(%x: tensor<?x4294967296x4294967296xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.linear' op input features heads * head_dim = 4294967296 * 4294967296 overflow a 64-bit size}}
  %y = fusion.linear %x, %w : tensor<?x4294967296x4294967296xf16>, tensor<4096x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @linear_weight_rank(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{'fusion.linear' op weight must have rank 2, got 'tensor<4096xf16>'}}
  %y = fusion.linear %x, %w : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @linear_weight_dynamic_out(%x: tensor<?x4096xf16>, %w: tensor<?x4096xf16>) {
  // expected-error @below {{'fusion.linear' op weight dimension 0 (out features) must be static and positive, got 'tensor<?x4096xf16>'}}
  %y = fusion.linear %x, %w : tensor<?x4096xf16>, tensor<?x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @linear_weight_dynamic_in(%x: tensor<?x4096xf16>, %w: tensor<4096x?xf16>) {
  // expected-error @below {{'fusion.linear' op weight dimension 1 (in features) must be static and positive, got 'tensor<4096x?xf16>'}}
  %y = fusion.linear %x, %w : tensor<?x4096xf16>, tensor<4096x?xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @linear_weight_element_type(%x: tensor<?x4096xf16>, %w: tensor<4096x4096xbf16>) {
  // expected-error @below {{'fusion.linear' op weight element type 'bf16' does not match input element type 'f16'}}
  %y = fusion.linear %x, %w : tensor<?x4096xf16>, tensor<4096x4096xbf16> -> tensor<?x4096xf16>
  return
}

// -----

// K mismatch: down_proj's weight [4096, 14336] applied to the hidden state.
func.func @linear_in_features(%x: tensor<?x4096xf16>, %w: tensor<4096x14336xf16>) {
  // expected-error @below {{'fusion.linear' op weight dimension 1 is 14336 but the in features of input is 4096}}
  %y = fusion.linear %x, %w : tensor<?x4096xf16>, tensor<4096x14336xf16> -> tensor<?x4096xf16>
  return
}

// -----

// K mismatch of a [B, heads, head_dim] input: 8 KV heads of 128 are 1024
// features, not o_proj's 4096.
func.func @linear_in_features_heads(%x: tensor<?x8x128xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.linear' op weight dimension 1 is 4096 but the in features of input (8 * 128) is 1024}}
  %y = fusion.linear %x, %w : tensor<?x8x128xf16>, tensor<4096x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @linear_result_rank(%x: tensor<?x32x128xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.linear' op result must have rank 2, got 'tensor<?x32x128xf16>'}}
  %y = fusion.linear %x, %w : tensor<?x32x128xf16>, tensor<4096x4096xf16> -> tensor<?x32x128xf16>
  return
}

// -----

func.func @linear_result_dynamic_out(%x: tensor<?x4096xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.linear' op result dimension 1 (out features) must be static and positive, got 'tensor<?x?xf16>'}}
  %y = fusion.linear %x, %w : tensor<?x4096xf16>, tensor<4096x4096xf16> -> tensor<?x?xf16>
  return
}

// -----

func.func @linear_result_element_type(%x: tensor<?x4096xbf16>, %w: tensor<4096x4096xbf16>) {
  // expected-error @below {{'fusion.linear' op result element type 'f16' does not match input element type 'bf16'}}
  %y = fusion.linear %x, %w : tensor<?x4096xbf16>, tensor<4096x4096xbf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @linear_out_features(%x: tensor<?x4096xf16>, %w: tensor<28672x4096xf16>) {
  // expected-error @below {{'fusion.linear' op result dimension 1 is 14336 but the out features of weight is 28672}}
  %y = fusion.linear %x, %w : tensor<?x4096xf16>, tensor<28672x4096xf16> -> tensor<?x14336xf16>
  return
}

// -----

func.func @linear_batch(%x: tensor<2x4096xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.linear' op result dimension 0 is 4 but the batch size of input is 2}}
  %y = fusion.linear %x, %w : tensor<2x4096xf16>, tensor<4096x4096xf16> -> tensor<4x4096xf16>
  return
}

// -----

func.func @linear_result_batch_zero(%x: tensor<?x4096xf16>, %w: tensor<4096x4096xf16>) {
  // expected-error @below {{'fusion.linear' op result dimension 0 (batch) is a run-time size the kernels take as an i32: it must be dynamic or in [1, 2147483647], got 'tensor<0x4096xf16>'}}
  %y = fusion.linear %x, %w : tensor<?x4096xf16>, tensor<4096x4096xf16> -> tensor<0x4096xf16>
  return
}

// -----

// ODS: activations and weights are f16 or bf16.
func.func @linear_f32(%x: tensor<?x4096xf32>, %w: tensor<4096x4096xf32>) {
  // expected-error @below {{'fusion.linear' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type values, but got 'tensor<?x4096xf32>'}}
  %y = fusion.linear %x, %w : tensor<?x4096xf32>, tensor<4096x4096xf32> -> tensor<?x4096xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fusion.silu_mul (Llama-3-8B: intermediate 14336 unless noted)
//===----------------------------------------------------------------------===//

func.func @silu_mul_input_rank(%gu: tensor<?x2x14336xf16>) {
  // expected-error @below {{'fusion.silu_mul' op input must have rank 2, got 'tensor<?x2x14336xf16>'}}
  %m = fusion.silu_mul %gu : tensor<?x2x14336xf16> -> tensor<?x14336xf16>
  return
}

// -----

func.func @silu_mul_input_batch_zero(%gu: tensor<0x28672xf16>) {
  // expected-error @below {{'fusion.silu_mul' op input dimension 0 (batch) is a run-time size the kernels take as an i32: it must be dynamic or in [1, 2147483647], got 'tensor<0x28672xf16>'}}
  %m = fusion.silu_mul %gu : tensor<0x28672xf16> -> tensor<0x14336xf16>
  return
}

// -----

func.func @silu_mul_dynamic_features(%gu: tensor<?x?xf16>) {
  // expected-error @below {{'fusion.silu_mul' op input dimension 1 (2 * intermediate size) must be static and positive, got 'tensor<?x?xf16>'}}
  %m = fusion.silu_mul %gu : tensor<?x?xf16> -> tensor<?x14336xf16>
  return
}

// -----

func.func @silu_mul_odd(%gu: tensor<?x28671xf16>) {
  // expected-error @below {{'fusion.silu_mul' op input dimension 1 (2 * intermediate size) must be even, each row being [gate | up] with halves of one size, got 'tensor<?x28671xf16>'}}
  %m = fusion.silu_mul %gu : tensor<?x28671xf16> -> tensor<?x14335xf16>
  return
}

// -----

func.func @silu_mul_result_rank(%gu: tensor<?x28672xf16>) {
  // expected-error @below {{'fusion.silu_mul' op result must have rank 2, got 'tensor<?x1x14336xf16>'}}
  %m = fusion.silu_mul %gu : tensor<?x28672xf16> -> tensor<?x1x14336xf16>
  return
}

// -----

func.func @silu_mul_result_dynamic(%gu: tensor<?x28672xf16>) {
  // expected-error @below {{'fusion.silu_mul' op result dimension 1 (intermediate size) must be static and positive, got 'tensor<?x?xf16>'}}
  %m = fusion.silu_mul %gu : tensor<?x28672xf16> -> tensor<?x?xf16>
  return
}

// -----

func.func @silu_mul_result_element_type(%gu: tensor<?x28672xf16>) {
  // expected-error @below {{'fusion.silu_mul' op result element type 'bf16' does not match input element type 'f16'}}
  %m = fusion.silu_mul %gu : tensor<?x28672xf16> -> tensor<?x14336xbf16>
  return
}

// -----

// The result is half the packed row, not the whole of it.
func.func @silu_mul_result_size(%gu: tensor<?x28672xf16>) {
  // expected-error @below {{'fusion.silu_mul' op result dimension 1 is 28672 but half the features of input ([gate | up]) is 14336}}
  %m = fusion.silu_mul %gu : tensor<?x28672xf16> -> tensor<?x28672xf16>
  return
}

// -----

func.func @silu_mul_batch(%gu: tensor<3x28672xf16>) {
  // expected-error @below {{'fusion.silu_mul' op result dimension 0 is 1 but the batch size of input is 3}}
  %m = fusion.silu_mul %gu : tensor<3x28672xf16> -> tensor<1x14336xf16>
  return
}

// -----

// ODS: f16 or bf16.
func.func @silu_mul_f32(%gu: tensor<?x28672xf32>) {
  // expected-error @below {{'fusion.silu_mul' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type values, but got 'tensor<?x28672xf32>'}}
  %m = fusion.silu_mul %gu : tensor<?x28672xf32> -> tensor<?x14336xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fusion.embedding (Llama-3-8B: vocabulary 128256, hidden 4096)
//===----------------------------------------------------------------------===//

func.func @embedding_tokens_rank(%t: tensor<?x1xi32>, %e: tensor<128256x4096xf16>) {
  // expected-error @below {{'fusion.embedding' op tokens must have rank 1, got 'tensor<?x1xi32>'}}
  %x = fusion.embedding %t, %e : tensor<?x1xi32>, tensor<128256x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

// ODS: token ids are i32.
func.func @embedding_tokens_i64(%t: tensor<?xi64>, %e: tensor<128256x4096xf16>) {
  // expected-error @below {{'fusion.embedding' op operand #0 must be ranked tensor of 32-bit signless integer values, but got 'tensor<?xi64>'}}
  %x = fusion.embedding %t, %e : tensor<?xi64>, tensor<128256x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @embedding_table_rank(%t: tensor<?xi32>, %e: tensor<4096xf16>) {
  // expected-error @below {{'fusion.embedding' op table must have rank 2, got 'tensor<4096xf16>'}}
  %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @embedding_dynamic_vocab(%t: tensor<?xi32>, %e: tensor<?x4096xf16>) {
  // expected-error @below {{'fusion.embedding' op table dimension 0 (vocab size) must be static and positive, got 'tensor<?x4096xf16>'}}
  %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<?x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

// V >= 1: an empty table has no row to copy.
func.func @embedding_empty_vocab(%t: tensor<?xi32>, %e: tensor<0x4096xf16>) {
  // expected-error @below {{'fusion.embedding' op table dimension 0 (vocab size) must be static and positive, got 'tensor<0x4096xf16>'}}
  %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<0x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

// An i32 token id reaches rows [0, 2^31) only.
func.func @embedding_vocab_too_large(%t: tensor<?xi32>, %e: tensor<2147483649x8xf16>) {
  // expected-error @below {{'fusion.embedding' op table dimension 0 (vocab size) must be at most 2147483648 (token ids are i32), got 'tensor<2147483649x8xf16>'}}
  %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<2147483649x8xf16> -> tensor<?x8xf16>
  return
}

// -----

func.func @embedding_dynamic_hidden(%t: tensor<?xi32>, %e: tensor<128256x?xf16>) {
  // expected-error @below {{'fusion.embedding' op table dimension 1 (hidden size) must be static and positive, got 'tensor<128256x?xf16>'}}
  %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<128256x?xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @embedding_result_rank(%t: tensor<?xi32>, %e: tensor<128256x4096xf16>) {
  // expected-error @below {{'fusion.embedding' op result must have rank 2, got 'tensor<?x1x4096xf16>'}}
  %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<128256x4096xf16> -> tensor<?x1x4096xf16>
  return
}

// -----

func.func @embedding_result_element_type(%t: tensor<?xi32>, %e: tensor<128256x4096xbf16>) {
  // expected-error @below {{'fusion.embedding' op result element type 'f16' does not match table element type 'bf16'}}
  %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<128256x4096xbf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @embedding_result_hidden(%t: tensor<?xi32>, %e: tensor<128256x4096xf16>) {
  // expected-error @below {{'fusion.embedding' op result dimension 1 is 2048 but the hidden size of table is 4096}}
  %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<128256x4096xf16> -> tensor<?x2048xf16>
  return
}

// -----

func.func @embedding_batch(%t: tensor<4xi32>, %e: tensor<128256x4096xf16>) {
  // expected-error @below {{'fusion.embedding' op result dimension 0 is 2 but the batch size of tokens is 4}}
  %x = fusion.embedding %t, %e : tensor<4xi32>, tensor<128256x4096xf16> -> tensor<2x4096xf16>
  return
}

// -----

func.func @embedding_tokens_batch_zero(%t: tensor<0xi32>, %e: tensor<128256x4096xf16>) {
  // expected-error @below {{'fusion.embedding' op tokens dimension 0 (batch) is a run-time size the kernels take as an i32: it must be dynamic or in [1, 2147483647], got 'tensor<0xi32>'}}
  %x = fusion.embedding %t, %e : tensor<0xi32>, tensor<128256x4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

// ODS: the table is f16 or bf16.
func.func @embedding_table_f32(%t: tensor<?xi32>, %e: tensor<128256x4096xf32>) {
  // expected-error @below {{'fusion.embedding' op operand #1 must be ranked tensor of 16-bit float or bfloat16 type values, but got 'tensor<128256x4096xf32>'}}
  %x = fusion.embedding %t, %e : tensor<?xi32>, tensor<128256x4096xf32> -> tensor<?x4096xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fusion.argmax (Llama-3-8B: vocabulary 128256)
//===----------------------------------------------------------------------===//

func.func @argmax_logits_rank(%l: tensor<128256xbf16>) {
  // expected-error @below {{'fusion.argmax' op logits must have rank 2, got 'tensor<128256xbf16>'}}
  %t = fusion.argmax %l : tensor<128256xbf16> -> tensor<?xi32>
  return
}

// -----

func.func @argmax_logits_batch_zero(%l: tensor<0x128256xbf16>) {
  // expected-error @below {{'fusion.argmax' op logits dimension 0 (batch) is a run-time size the kernels take as an i32: it must be dynamic or in [1, 2147483647], got 'tensor<0x128256xbf16>'}}
  %t = fusion.argmax %l : tensor<0x128256xbf16> -> tensor<?xi32>
  return
}

// -----

func.func @argmax_dynamic_vocab(%l: tensor<?x?xbf16>) {
  // expected-error @below {{'fusion.argmax' op logits dimension 1 (vocab size) must be static and positive, got 'tensor<?x?xbf16>'}}
  %t = fusion.argmax %l : tensor<?x?xbf16> -> tensor<?xi32>
  return
}

// -----

// V >= 1: an empty row has no index to return.
func.func @argmax_empty_vocab(%l: tensor<?x0xbf16>) {
  // expected-error @below {{'fusion.argmax' op logits dimension 1 (vocab size) must be static and positive, got 'tensor<?x0xbf16>'}}
  %t = fusion.argmax %l : tensor<?x0xbf16> -> tensor<?xi32>
  return
}

// -----

// Index 2^31 does not fit in the i32 result.
func.func @argmax_vocab_too_large(%l: tensor<?x2147483649xbf16>) {
  // expected-error @below {{'fusion.argmax' op logits dimension 1 (vocab size) must be at most 2147483648 (token ids are i32), got 'tensor<?x2147483649xbf16>'}}
  %t = fusion.argmax %l : tensor<?x2147483649xbf16> -> tensor<?xi32>
  return
}

// -----

func.func @argmax_result_rank(%l: tensor<?x128256xbf16>) {
  // expected-error @below {{'fusion.argmax' op result must have rank 1, got 'tensor<?x1xi32>'}}
  %t = fusion.argmax %l : tensor<?x128256xbf16> -> tensor<?x1xi32>
  return
}

// -----

func.func @argmax_batch(%l: tensor<8x128256xbf16>) {
  // expected-error @below {{'fusion.argmax' op result dimension 0 is 4 but the batch size of logits is 8}}
  %t = fusion.argmax %l : tensor<8x128256xbf16> -> tensor<4xi32>
  return
}

// -----

// ODS: the result holds i32 token ids ...
func.func @argmax_result_i64(%l: tensor<?x128256xbf16>) {
  // expected-error @below {{'fusion.argmax' op result #0 must be ranked tensor of 32-bit signless integer values, but got 'tensor<?xi64>'}}
  %t = fusion.argmax %l : tensor<?x128256xbf16> -> tensor<?xi64>
  return
}

// -----

// ... of f16 or bf16 logits.
func.func @argmax_f32(%l: tensor<?x128256xf32>) {
  // expected-error @below {{'fusion.argmax' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type values, but got 'tensor<?x128256xf32>'}}
  %t = fusion.argmax %l : tensor<?x128256xf32> -> tensor<?xi32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fusion.kernel / fusion.yield
//===----------------------------------------------------------------------===//

func.func @kernel_binding_count(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{kernel binds 2 inputs but its type has 1}}
  fusion.kernel @k (%a = %x, %b = %w) : (tensor<?x4096xf16>) -> () {
    fusion.yield
  }
  return
}

// -----

func.func @kernel_body_argument_count(%x: tensor<?x4096xf16>) {
  // expected-error @below {{'fusion.kernel' op body has 0 arguments but the kernel has 1 inputs}}
  "fusion.kernel"(%x) <{sym_name = "k"}> ({
    "fusion.yield"() : () -> ()
  }) : (tensor<?x4096xf16>) -> ()
  return
}

// -----

func.func @kernel_body_argument_type(%x: tensor<?x4096xf16>) {
  // expected-error @below {{'fusion.kernel' op body argument #0 has type 'tensor<?x4096xbf16>' but input #0 has type 'tensor<?x4096xf16>'}}
  "fusion.kernel"(%x) <{sym_name = "k"}> ({
  ^bb0(%a: tensor<?x4096xbf16>):
    "fusion.yield"() : () -> ()
  }) : (tensor<?x4096xf16>) -> ()
  return
}

// -----

func.func @kernel_no_yield(%x: tensor<?x4096xf16>) {
  // expected-error @below {{'fusion.kernel' op body must end with fusion.yield}}
  fusion.kernel @k (%a = %x) : (tensor<?x4096xf16>) -> () {
    llvm.unreachable
  }
  return
}

// -----

func.func @kernel_yield_type(%x: tensor<?x4096xf16>) -> tensor<?x4096xbf16> {
  // expected-error @below {{'fusion.kernel' op yields 1 values of types ('tensor<?x4096xf16>') but the kernel has results ('tensor<?x4096xbf16>')}}
  %r = fusion.kernel @k (%a = %x) : (tensor<?x4096xf16>) -> tensor<?x4096xbf16> {
    fusion.yield %a : tensor<?x4096xf16>
  }
  return %r : tensor<?x4096xbf16>
}

// -----

func.func @kernel_yield_count(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>) -> (tensor<?x4096xf16>, tensor<?x4096xf16>) {
  // expected-error @below {{'fusion.kernel' op yields 1 values of types ('tensor<?x4096xf16>') but the kernel has results ('tensor<?x4096xf16>', 'tensor<?x4096xf16>')}}
  %y, %h = fusion.kernel @k (%a = %x, %b = %w) : (tensor<?x4096xf16>, tensor<4096xf16>) -> (tensor<?x4096xf16>, tensor<?x4096xf16>) {
    %0 = fusion.rmsnorm %a, %b {epsilon = 1.0e-05 : f64} : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
    fusion.yield %0 : tensor<?x4096xf16>
  }
  return %y, %h : tensor<?x4096xf16>, tensor<?x4096xf16>
}

// -----

// IsolatedFromAbove: the weight must enter as a kernel input.
func.func @kernel_captures_value(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>) -> tensor<?x4096xf16> {
  // expected-note @below {{required by region isolation constraints}}
  %r = fusion.kernel @k (%a = %x) : (tensor<?x4096xf16>) -> tensor<?x4096xf16> {
    // expected-error @below {{'fusion.rmsnorm' op using value defined outside the region}}
    %0 = fusion.rmsnorm %a, %w {epsilon = 1.0e-05 : f64} : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
    fusion.yield %0 : tensor<?x4096xf16>
  }
  return %r : tensor<?x4096xf16>
}

// -----

func.func @yield_outside_kernel() {
  // expected-error @below {{'fusion.yield' op expects parent op 'fusion.kernel'}}
  fusion.yield
}

//===----------------------------------------------------------------------===//
// Model dimensions, batch agreement, overflow, cache buffers, kernel nesting
//===----------------------------------------------------------------------===//

// -----

func.func @rmsnorm_zero_hidden(%x: tensor<?x0xf16>, %w: tensor<0xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op input dimension 1 (hidden size) must be static and positive, got 'tensor<?x0xf16>'}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x0xf16>, tensor<0xf16> -> tensor<?x0xf16>
  return
}

// -----

func.func @rmsnorm_dynamic_weight(%x: tensor<?x4096xf16>, %w: tensor<?xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op weight dimension 0 (hidden size) must be static and positive, got 'tensor<?xf16>'}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x4096xf16>, tensor<?xf16> -> tensor<?x4096xf16>
  return
}

// -----

// Finite in f64, but not a normal float32 where the kernels use it.
func.func @rmsnorm_epsilon_past_f32(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op epsilon must be a positive normal float32 (the kernels add it in fp32), got 1.000000e+300}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e+300 : f64} : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @rmsnorm_epsilon_below_f32(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op epsilon must be a positive normal float32 (the kernels add it in fp32), got 4.940656e-324}}
  %y = fusion.rmsnorm %x, %w {epsilon = 4.9e-324 : f64} : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

// A static batch is a run-time size the kernels take as an i32.
func.func @rmsnorm_static_batch_zero(%x: tensor<0x4096xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op input dimension 0 (batch) is a run-time size the kernels take as an i32: it must be dynamic or in [1, 2147483647], got 'tensor<0x4096xf16>'}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<0x4096xf16>, tensor<4096xf16> -> tensor<0x4096xf16>
  return
}

// -----

func.func @rmsnorm_static_batch_past_i32(%x: tensor<2147483648x4096xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op input dimension 0 (batch) is a run-time size the kernels take as an i32: it must be dynamic or in [1, 2147483647], got 'tensor<2147483648x4096xf16>'}}
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<2147483648x4096xf16>, tensor<4096xf16> -> tensor<2147483648x4096xf16>
  return
}

// -----

func.func @rmsnorm_infinite_epsilon(%x: tensor<?x4096xf16>, %w: tensor<4096xf16>) {
  // expected-error @below {{'fusion.rmsnorm' op epsilon must be a positive normal float32 (the kernels add it in fp32), got INF}}
  %y = fusion.rmsnorm %x, %w {epsilon = 0x7FF0000000000000 : f64} : tensor<?x4096xf16>, tensor<4096xf16> -> tensor<?x4096xf16>
  return
}

// -----

func.func @layernorm_dynamic_bias(%x: tensor<?x2048xf16>, %w: tensor<2048xf16>, %b: tensor<?xf16>) {
  // expected-error @below {{'fusion.layernorm' op bias dimension 0 (hidden size) must be static and positive, got 'tensor<?xf16>'}}
  %y = fusion.layernorm %x, %w, %b {epsilon = 1.0e-05 : f64} : tensor<?x2048xf16>, tensor<2048xf16>, tensor<?xf16> -> tensor<?x2048xf16>
  return
}

// -----

// With a dynamic input batch the results must still agree with each other.
func.func @qkv_proj_result_batches_disagree(%x: tensor<?x64xf16>, %w: tensor<128x64xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op key dimension 0 is 4 but the batch size of query is 3}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<3x4x16xf16>, tensor<4x2x16xf16>, tensor<5x2x16xf16>
  return
}

// -----

func.func @qkv_proj_dynamic_heads(%x: tensor<?x64xf16>, %w: tensor<128x64xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op query dimension 1 (num_heads) must be static and positive, got 'tensor<?x?x?xf16>'}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x?x?xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  return
}

// -----

func.func @qkv_proj_dynamic_bias(%x: tensor<?x64xf16>, %w: tensor<128x64xf16>, %b: tensor<?xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op bias dimension 0 (packed rows) must be static and positive, got 'tensor<?xf16>'}}
  %q, %k, %v = fusion.qkv_proj %x, %w bias(%b : tensor<?xf16>) {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x2x16xf16>, tensor<?x2x16xf16>
  return
}

// -----

func.func @qkv_proj_rows_overflow(%x: tensor<?x64xf16>, %w: tensor<2x64xf16>) {
  // expected-error @below {{'fusion.qkv_proj' op (num_heads + 2 * num_kv_heads) * head_dim = (1 + 2 * 1) * 6148914691236517206 overflows a 64-bit size}}
  %q, %k, %v = fusion.qkv_proj %x, %w {num_heads = 1 : i64, num_kv_heads = 1 : i64, head_dim = 6148914691236517206 : i64}
      : tensor<?x64xf16>, tensor<2x64xf16> -> tensor<?x1x16xf16>, tensor<?x1x16xf16>, tensor<?x1x16xf16>
  return
}

// -----

func.func @rope_batches_disagree(%q: tensor<?x32x128xf16>, %k: tensor<3x8x128xf16>, %pos: tensor<5xi32>) {
  // expected-error @below {{'fusion.rope' op positions dimension 0 is 5 but the batch size of key is 3}}
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x32x128xf16>, tensor<3x8x128xf16>, tensor<5xi32>
  return
}

// -----

func.func @rope_dynamic_key_head_dim(%q: tensor<?x32x128xf16>, %k: tensor<?x8x?xf16>, %pos: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op key dimension 2 (head_dim) must be static and positive, got 'tensor<?x8x?xf16>'}}
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x32x128xf16>, tensor<?x8x?xf16>, tensor<?xi32>
  return
}

// -----

func.func @rope_heads_not_multiple(%q: tensor<?x32x128xf16>, %k: tensor<?x6x128xf16>, %pos: tensor<?xi32>) {
  // expected-error @below {{'fusion.rope' op num_heads of query (32) must be a multiple of num_kv_heads of key (6)}}
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x32x128xf16>, tensor<?x6x128xf16>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_same_cache(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x16x8x128xf16>,
    %bt: tensor<?x?xi32>, %pos: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key_cache and value_cache must be distinct buffers}}
  fusion.kv_append %k, %v into %kc, %kc[%bt, %pos]
      : tensor<?x8x128xf16> into memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_batches_disagree(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>, %kc: memref<?x16x8x128xf16>,
    %vc: memref<?x16x8x128xf16>, %bt: tensor<3x?xi32>, %pos: tensor<5xi32>) {
  // expected-error @below {{'fusion.kv_append' op positions dimension 0 is 5 but the batch size of block_table is 3}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %pos]
      : tensor<?x8x128xf16> into memref<?x16x8x128xf16>, tensor<3x?xi32>, tensor<5xi32>
  return
}

// -----

func.func @kv_append_dynamic_key(%k: tensor<?x?x?xf16>, %v: tensor<?x?x?xf16>, %kc: memref<?x16x8x128xf16>,
    %vc: memref<?x16x8x128xf16>, %bt: tensor<?x?xi32>, %pos: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key dimension 1 (num_kv_heads) must be static and positive, got 'tensor<?x?x?xf16>'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %pos]
      : tensor<?x?x?xf16> into memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @kv_append_strided_cache(%k: tensor<?x8x128xf16>, %v: tensor<?x8x128xf16>,
    %kc: memref<?x16x8x128xf16, strided<[?, ?, ?, 1]>>, %vc: memref<?x16x8x128xf16, strided<[?, ?, ?, 1]>>,
    %bt: tensor<?x?xi32>, %pos: tensor<?xi32>) {
  // expected-error @below {{'fusion.kv_append' op key_cache must have the identity layout in the default memory space, got 'memref<?x16x8x128xf16, strided<[?, ?, ?, 1]>>'}}
  fusion.kv_append %k, %v into %kc, %vc[%bt, %pos]
      : tensor<?x8x128xf16> into memref<?x16x8x128xf16, strided<[?, ?, ?, 1]>>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_zero_kv_heads(%q: tensor<?x32x128xf16>, %kc: memref<?x16x0x128xf16>, %vc: memref<?x16x0x128xf16>,
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op key_cache dimension 2 (num_kv_heads) must be static and positive, got 'memref<?x16x0x128xf16>'}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %sl]
      : tensor<?x32x128xf16>, memref<?x16x0x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_same_cache(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128xf16>, %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) {
  // expected-error @below {{'fusion.decode_attention' op key_cache and value_cache must be distinct buffers}}
  %o = fusion.decode_attention %q, %kc, %kc[%bt, %sl]
      : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<?x?xi32>, tensor<?xi32>
  return
}

// -----

func.func @attention_batches_disagree(%q: tensor<?x32x128xf16>, %kc: memref<?x16x8x128xf16>, %vc: memref<?x16x8x128xf16>,
    %bt: tensor<3x?xi32>, %sl: tensor<5xi32>) {
  // expected-error @below {{'fusion.decode_attention' op seq_lens dimension 0 is 5 but the batch size of block_table is 3}}
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %sl]
      : tensor<?x32x128xf16>, memref<?x16x8x128xf16>, tensor<3x?xi32>, tensor<5xi32>
  return
}

// -----

func.func @kernel_nested(%x: tensor<?x64xf16>) {
  fusion.kernel @outer (%a = %x) : (tensor<?x64xf16>) -> () {
    // expected-error @below {{'fusion.kernel' op cannot be nested in another fusion.kernel}}
    fusion.kernel @inner (%b = %a) : (tensor<?x64xf16>) -> () {
      fusion.yield
    }
    fusion.yield
  }
  return
}

// -----

// Kernel names become PTX entry names: PTX identifiers only.
func.func @kernel_name_space(%x: tensor<?x64xf16>) {
  // expected-error @below {{'fusion.kernel' op name "a b" is not a valid PTX entry name: expected a PTX identifier [a-zA-Z_][a-zA-Z0-9_$]* of at most 255 characters}}
  fusion.kernel @"a b" (%a = %x) : (tensor<?x64xf16>) -> () {
    fusion.yield
  }
  return
}

// -----

func.func @kernel_name_dot(%x: tensor<?x64xf16>) {
  // expected-error @below {{'fusion.kernel' op name "a.b" is not a valid PTX entry name}}
  fusion.kernel @"a.b" (%a = %x) : (tensor<?x64xf16>) -> () {
    fusion.yield
  }
  return
}

// -----

func.func @kernel_name_digit(%x: tensor<?x64xf16>) {
  // expected-error @below {{'fusion.kernel' op name "1x" is not a valid PTX entry name}}
  fusion.kernel @"1x" (%a = %x) : (tensor<?x64xf16>) -> () {
    fusion.yield
  }
  return
}

// -----

func.func @kernel_name_unicode(%x: tensor<?x64xf16>) {
  // expected-error @below {{'fusion.kernel' op name "ü" is not a valid PTX entry name}}
  fusion.kernel @"ü" (%a = %x) : (tensor<?x64xf16>) -> () {
    fusion.yield
  }
  return
}

// -----

func.func @kernel_name_too_long(%x: tensor<?x64xf16>) {
  // expected-error @below {{'fusion.kernel' op name "kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk" is not a valid PTX entry name}}
  fusion.kernel @kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk (%a = %x) : (tensor<?x64xf16>) -> () {
    fusion.yield
  }
  return
}

// -----

// The launch contract attributes check their vocabulary against the contract
// header (docs/abi.md): roles per kind, dtypes, run-time dimension names, ABI
// order, variant batches.
// expected-error @+1 {{'partial_out' is not a role of input parameters (docs/abi.md section 3.3)}}
func.func private @param_role() attributes {p = #fusion.param<kind = input, role = "partial_out", dtype = f32, shape = [batch]>}

// -----

// expected-error @+2 {{expected a parameter kind (input, output, workspace or scalar), got 'buffer'}}
// expected-error @+1 {{failed to parse Fusion_KernelParamAttr parameter 'kind'}}
func.func private @param_kind() attributes {p = #fusion.param<kind = buffer, role = "input", dtype = f16, shape = [batch]>}

// -----

// expected-error @+1 {{shape dimension 0 must be an integer or a run-time dimension (batch, max_pages, num_pages, num_splits)}}
func.func private @param_dim_name() attributes {p = #fusion.param<kind = input, role = "input", dtype = f16, shape = [tokens, 64]>}

// -----

// expected-error @+1 {{shape dimension 1 is 0; expected at least 1}}
func.func private @param_dim_zero() attributes {p = #fusion.param<kind = input, role = "input", dtype = f16, shape = [batch, 0]>}

// -----

// expected-error @+1 {{a scalar has no shape}}
func.func private @scalar_shape() attributes {p = #fusion.param<kind = scalar, role = "batch", dtype = i32, shape = [1]>}

// -----

// expected-error @+1 {{dtype 'f64' is not f16, bf16, f32 or i32}}
func.func private @param_dtype() attributes {p = #fusion.param<kind = input, role = "input", dtype = f64, shape = [batch]>}

// -----

// expected-error @+1 {{only a workspace can be zero_init}}
func.func private @zero_init_input() attributes {p = #fusion.param<kind = input, role = "input", dtype = f16, shape = [batch], zero_init = true>}

// -----

// expected-error @+1 {{params[1] is out of ABI order (inputs, outputs, workspaces, tensor maps, scalars)}}
func.func private @launch_order() attributes {l = #fusion.launch<entry = "k", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0, params = [#fusion.param<kind = output, role = "normed", dtype = f16, shape = [batch, 64]>, #fusion.param<kind = input, role = "input", dtype = f16, shape = [batch, 64]>]>}

// -----

// expected-error @+1 {{params[2] is out of ABI order (inputs, outputs, workspaces, tensor maps, scalars)}}
func.func private @tensor_map_after_scalar() attributes {l = #fusion.launch<entry = "k", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0, params = [#fusion.param<kind = input, role = "weight", dtype = f16, shape = [256, 64]>, #fusion.param<kind = scalar, role = "batch", dtype = i32>, #fusion.param<kind = tensor_map, role = "weight_map", dtype = f16, shape = [256, 64], of = 0, box = [128, 64]>]>}

// -----

// expected-error @+1 {{'of' and 'box' are given exactly on tensor_map parameters}}
func.func private @tensor_map_without_box() attributes {p = #fusion.param<kind = tensor_map, role = "weight_map", dtype = f16, shape = [256, 64], of = 0>}

// -----

// expected-error @+1 {{'of' and 'box' are given exactly on tensor_map parameters}}
func.func private @box_on_input() attributes {p = #fusion.param<kind = input, role = "weight", dtype = f16, shape = [256, 64], of = 0, box = [128, 64]>}

// -----

// expected-error @+1 {{a tensor_map maps an f16 or bf16 tensor}}
func.func private @tensor_map_f32() attributes {p = #fusion.param<kind = tensor_map, role = "weight_map", dtype = f32, shape = [256, 64], of = 0, box = [128, 32]>}

// -----

// expected-error @+1 {{weight_map shape must be 2-D: constant rows, constant columns}}
func.func private @tensor_map_dynamic() attributes {p = #fusion.param<kind = tensor_map, role = "weight_map", dtype = f16, shape = [batch, 64], of = 0, box = [128, 64]>}

// -----

// An activation's map covers the batch rows its buffer has.
// expected-error @+1 {{input_map shape must be 2-D: "batch" rows, constant columns}}
func.func private @tensor_map_activation_constant() attributes {p = #fusion.param<kind = tensor_map, role = "input_map", dtype = f16, shape = [16, 64], of = 0, box = [16, 64]>}

// -----

// A box row must be the 128-byte swizzle span: 64 f16 columns.
// expected-error @+1 {{a tensor_map's box is [1 to 256 rows, 64 columns] (128-byte swizzle)}}
func.func private @tensor_map_box_columns() attributes {p = #fusion.param<kind = tensor_map, role = "weight_map", dtype = f16, shape = [256, 64], of = 0, box = [128, 32]>}

// -----

// expected-error @+1 {{a tensor_map's box is [1 to 256 rows, 64 columns] (128-byte swizzle)}}
func.func private @tensor_map_box_rows() attributes {p = #fusion.param<kind = tensor_map, role = "weight_map", dtype = f16, shape = [512, 64], of = 0, box = [512, 64]>}

// -----

// expected-error @+1 {{'input' is not a role of tensor_map parameters (docs/abi.md section 3.3)}}
func.func private @tensor_map_role() attributes {p = #fusion.param<kind = tensor_map, role = "input", dtype = f16, shape = [256, 64], of = 0, box = [128, 64]>}

// -----

// expected-error @+1 {{params[1] (weight_map) maps params[0], which is not an input it describes}}
func.func private @tensor_map_of_activation() attributes {l = #fusion.launch<entry = "k", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0, params = [#fusion.param<kind = input, role = "input", dtype = f16, shape = [256, 64]>, #fusion.param<kind = tensor_map, role = "weight_map", dtype = f16, shape = [256, 64], of = 0, box = [128, 64]>]>}

// -----

// expected-error @+1 {{params[1] (weight_map) maps params[5], which is not an input it describes}}
func.func private @tensor_map_of_missing() attributes {l = #fusion.launch<entry = "k", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0, params = [#fusion.param<kind = input, role = "weight", dtype = f16, shape = [256, 64]>, #fusion.param<kind = tensor_map, role = "weight_map", dtype = f16, shape = [256, 64], of = 5, box = [128, 64]>]>}

// -----

// expected-error @+1 {{params[1] (input_map) maps params[0], which is not an input it describes}}
func.func private @tensor_map_input_of_weight() attributes {l = #fusion.launch<entry = "k", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0, params = [#fusion.param<kind = input, role = "weight", dtype = f16, shape = [batch, 64]>, #fusion.param<kind = tensor_map, role = "input_map", dtype = f16, shape = [batch, 64], of = 0, box = [16, 64]>]>}

// -----

// expected-error @+1 {{params[1] (residual_map) maps params[0], which is not an input it describes}}
func.func private @tensor_map_residual_of_input() attributes {l = #fusion.launch<entry = "k", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0, params = [#fusion.param<kind = input, role = "input", dtype = f16, shape = [batch, 64]>, #fusion.param<kind = tensor_map, role = "residual_map", dtype = f16, shape = [batch, 64], of = 0, box = [16, 64]>]>}

// -----

// expected-error @+1 {{params[1] maps params[0] with another dtype or shape}}
func.func private @tensor_map_shape() attributes {l = #fusion.launch<entry = "k", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0, params = [#fusion.param<kind = input, role = "weight", dtype = f16, shape = [256, 64]>, #fusion.param<kind = tensor_map, role = "weight_map", dtype = f16, shape = [128, 64], of = 0, box = [128, 64]>]>}

// -----

// expected-error @+1 {{key_cache_map shape must be a KV cache ["num_pages", P, Hkv, D] of constants after num_pages}}
func.func private @cache_map_2d() attributes {p = #fusion.param<kind = tensor_map, role = "key_cache_map", dtype = f16, shape = [256, 1024], of = 0, box = [16, 64]>}

// -----

// expected-error @+1 {{value_cache_map shape must be a KV cache ["num_pages", P, Hkv, D] of constants after num_pages}}
func.func private @cache_map_batch_pages() attributes {p = #fusion.param<kind = tensor_map, role = "value_cache_map", dtype = f16, shape = [batch, 16, 8, 128], of = 0, box = [16, 64]>}

// -----

// expected-error @+1 {{params[2] (key_cache_map) maps params[1], which is not an input it describes}}
func.func private @cache_map_of_other_cache() attributes {l = #fusion.launch<entry = "k", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0, params = [#fusion.param<kind = input, role = "key_cache", dtype = f16, shape = [num_pages, 16, 8, 128]>, #fusion.param<kind = input, role = "value_cache", dtype = f16, shape = [num_pages, 16, 8, 128]>, #fusion.param<kind = tensor_map, role = "key_cache_map", dtype = f16, shape = [num_pages, 16, 8, 128], of = 1, box = [16, 64]>]>}

// -----

// expected-error @+1 {{block of 2048 threads; expected 1 to 1024}}
func.func private @launch_block() attributes {l = #fusion.launch<entry = "k", grid = [batch, 1, 1], block = 2048, smem = 0, static_smem = 0, params = []>}

// -----

// expected-error @+1 {{grid has 2 dimensions; expected 3 (x, y, z)}}
func.func private @launch_grid() attributes {l = #fusion.launch<entry = "k", grid = [batch, 1], block = 32, smem = 0, static_smem = 0, params = []>}

// -----

// expected-error @+1 {{min_batch 1; a variant replaces its kernel from batch 2 on}}
func.func private @variant_batch() attributes {v = #fusion.variant<min_batch = 1, entry = "k_mma", grid = [8, 1, 1], block = 256, smem = 0, static_smem = 0, schedule = #fusion.projection_mma_schedule<threads = 256, warps = 8, grid = 8, rows_per_warp = 16, tile_tokens = 32, k_vectors = 2, k_split = 8>>}

// -----

// expected-error @+1 {{variants must have ascending min_batch}}
func.func private @variant_order() attributes {l = #fusion.launch<entry = "k", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0, params = [], variants = [#fusion.variant<min_batch = 4, entry = "a", grid = [8, 1, 1], block = 256, smem = 0, static_smem = 0, schedule = #fusion.projection_mma_schedule<threads = 256, warps = 8, grid = 8, rows_per_warp = 16, tile_tokens = 32, k_vectors = 2, k_split = 8>>, #fusion.variant<min_batch = 2, entry = "b", grid = [8, 1, 1], block = 256, smem = 0, static_smem = 0, schedule = #fusion.projection_mma_schedule<threads = 256, warps = 8, grid = 8, rows_per_warp = 16, tile_tokens = 32, k_vectors = 2, k_split = 8>>]>}

// -----

//===----------------------------------------------------------------------===//
// Kernel schedules (#fusion.*_schedule, ScheduleAttrs.cpp)
//===----------------------------------------------------------------------===//

// expected-error @+1 {{projection_schedule threads must be a multiple of 32 in [32, 1024], got 100}}
func.func private @schedule_threads_warp() attributes {s = #fusion.projection_schedule<threads = 100, warps = 2, grid = 8, rows_per_warp = 2, pairs_per_warp = 1, vector_width = 8, k_unroll = 2, batch_tile = 1, min_ctas_per_sm = 1, preload_chunks = 0>}

// -----

// expected-error @+1 {{norm_row_schedule threads must be a multiple of 32 in [32, 1024], got 2048}}
func.func private @schedule_threads_max() attributes {s = #fusion.norm_row_schedule<threads = 2048, vector_width = 8, tokens_per_cta = 1>}

// -----

// expected-error @+1 {{projection_schedule preload_chunks (3) must be 0, or positive with a batch tile of one token}}
func.func private @schedule_preload_tile() attributes {s = #fusion.projection_schedule<threads = 64, warps = 2, grid = 8, rows_per_warp = 2, pairs_per_warp = 2, vector_width = 8, k_unroll = 2, batch_tile = 4, min_ctas_per_sm = 3, preload_chunks = 3>}

// -----

// expected-error @+1 {{projection_schedule preload_chunks (-1) must be 0, or positive with a batch tile of one token}}
func.func private @schedule_preload_negative() attributes {s = #fusion.projection_schedule<threads = 64, warps = 2, grid = 8, rows_per_warp = 2, pairs_per_warp = 1, vector_width = 8, k_unroll = 2, batch_tile = 1, min_ctas_per_sm = 3, preload_chunks = -1>}

// -----

// expected-error @+1 {{projection_schedule threads (256) must be 32 x warps (4)}}
func.func private @schedule_warps() attributes {s = #fusion.projection_schedule<threads = 256, warps = 4, grid = 8, rows_per_warp = 2, pairs_per_warp = 1, vector_width = 8, k_unroll = 2, batch_tile = 1, min_ctas_per_sm = 1, preload_chunks = 0>}

// -----

// expected-error @+1 {{projection_mma_schedule threads (128) must be 32 x warps (8)}}
func.func private @schedule_mma_warps() attributes {s = #fusion.projection_mma_schedule<threads = 128, warps = 8, grid = 8, rows_per_warp = 16, tile_tokens = 32, k_vectors = 2, k_split = 8>}

// -----

// expected-error @+1 {{projection_mma_schedule tile_tokens (12) must be a multiple of 8 (the mma n-tile)}}
func.func private @schedule_tile_tokens() attributes {s = #fusion.projection_mma_schedule<threads = 256, warps = 8, grid = 8, rows_per_warp = 16, tile_tokens = 12, k_vectors = 2, k_split = 8>}

// -----

// expected-error @+1 {{projection_mma_schedule k_split (3) must divide warps (8)}}
func.func private @schedule_k_split() attributes {s = #fusion.projection_mma_schedule<threads = 256, warps = 8, grid = 8, rows_per_warp = 16, tile_tokens = 32, k_vectors = 2, k_split = 3>}

// -----

// expected-error @+1 {{projection_gemm_schedule threads (256) must be 32 x warps (4)}}
func.func private @schedule_gemm_warps() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 4, grid = 192, tile_rows = 64, tile_tokens = 16, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2>}

// -----

// expected-error @+1 {{projection_gemm_schedule min_ctas_per_sm must be positive, got 0}}
func.func private @schedule_gemm_min_ctas() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 128, tile_tokens = 16, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 0>}

// -----

// expected-error @+1 {{projection_gemm_schedule tile_rows (64) must be 16 x warps (8): one mma row block per warp}}
func.func private @schedule_gemm_tile_rows() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 64, tile_tokens = 16, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2>}

// -----

// expected-error @+1 {{projection_gemm_schedule tile_tokens (24) must be a multiple of 16 (pairs of mma n-tiles)}}
func.func private @schedule_gemm_tile_tokens() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 128, tile_tokens = 24, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2>}

// -----

// expected-error @+1 {{projection_gemm_schedule warpgroup_mma needs tile_rows a multiple of 64 (whole warpgroups), stage_k 64 (128-byte rows) and tile_tokens at most 256 (wgmma's n), got 32, 64 and 16}}
func.func private @schedule_gemm_warpgroup_rows() attributes {s = #fusion.projection_gemm_schedule<threads = 64, warps = 2, grid = 192, tile_rows = 32, tile_tokens = 16, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2, warpgroup_mma = true>}

// -----

// expected-error @+1 {{projection_gemm_schedule warpgroup_mma needs tile_rows a multiple of 64 (whole warpgroups), stage_k 64 (128-byte rows) and tile_tokens at most 256 (wgmma's n), got 128, 64 and 272}}
func.func private @schedule_gemm_warpgroup_tokens() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 128, tile_tokens = 272, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2, warpgroup_mma = true>}

// -----

// expected-error @+1 {{projection_gemm_schedule cluster_k_split needs k_split in [2, 8] dividing the tile's row pairs (64), got k_split 16}}
func.func private @schedule_gemm_cluster_past_portable() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 768, tile_rows = 128, tile_tokens = 16, k_split = 16, stage_k = 64, stages = 3, min_ctas_per_sm = 2, cluster_k_split = true>}

// -----

// expected-error @+1 {{projection_gemm_schedule cluster_k_split needs k_split in [2, 8] dividing the tile's row pairs (64), got k_split 1}}
func.func private @schedule_gemm_cluster_one() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 48, tile_rows = 128, tile_tokens = 16, k_split = 1, stage_k = 64, stages = 3, min_ctas_per_sm = 2, cluster_k_split = true>}

// -----

// expected-error @+1 {{projection_gemm_schedule cluster_k_split needs k_split in [2, 8] dividing the tile's row pairs (8), got k_split 3}}
func.func private @schedule_gemm_cluster_uneven() attributes {s = #fusion.projection_gemm_schedule<threads = 32, warps = 1, grid = 48, tile_rows = 16, tile_tokens = 16, k_split = 3, stage_k = 64, stages = 3, min_ctas_per_sm = 2, cluster_k_split = true>}

// -----


// expected-error @+1 {{smem 8000 cannot hold the cluster_k_split exchange of 8512 bytes}}
func.func private @variant_cluster_exchange() attributes {v = #fusion.variant<min_batch = 2, entry = "k_gemm16", grid = [192, 1, 1], block = 256, smem = 8000, static_smem = 0, schedule = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 128, tile_tokens = 16, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2, cluster_k_split = true>>}

// -----

// expected-error @+1 {{projection_gemm_schedule warp_specialized needs warpgroup_mma}}
func.func private @schedule_gemm_warp_specialized_mma() attributes {s = #fusion.projection_gemm_schedule<threads = 352, warps = 8, grid = 96, tile_rows = 128, tile_tokens = 16, k_split = 2, stage_k = 64, stages = 8, min_ctas_per_sm = 1, warp_specialized = true>}

// -----

// expected-error @+1 {{projection_gemm_schedule threads (256) must be 32 x (warps + 3) with warp_specialized (warps 8)}}
func.func private @schedule_gemm_warp_specialized_threads() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 96, tile_rows = 128, tile_tokens = 16, k_split = 2, stage_k = 64, stages = 8, min_ctas_per_sm = 1, warpgroup_mma = true, warp_specialized = true>}

// -----

// expected-error @+1 {{projection_gemm_schedule stage_k (40) must be a multiple of 16 (the mma k-step)}}
func.func private @schedule_gemm_stage_k() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 128, tile_tokens = 16, k_split = 4, stage_k = 40, stages = 3, min_ctas_per_sm = 2>}

// -----

// expected-error @+1 {{projection_gemm_schedule grid (190) must be a multiple of k_split (4): k_split CTAs per row tile}}
func.func private @schedule_gemm_grid() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 190, tile_rows = 128, tile_tokens = 16, k_split = 4, stage_k = 64, stages = 3, min_ctas_per_sm = 2>}

// -----

// expected-error @+1 {{projection_gemm_schedule stages (1) must be at least 2}}
func.func private @schedule_gemm_stages() attributes {s = #fusion.projection_gemm_schedule<threads = 256, warps = 8, grid = 192, tile_rows = 128, tile_tokens = 16, k_split = 4, stage_k = 64, stages = 1, min_ctas_per_sm = 2>}

// -----

// expected-error @+1 {{split_kv_attention_schedule max_splits must be positive, got 0}}
func.func private @schedule_max_splits() attributes {s = #fusion.split_kv_attention_schedule<threads = 256, max_splits = 0, heads_per_cta = 4, head_blocks = 1, vector_width = 8, lanes_per_row = 16, kv_unroll = 4, chunk_multiple = 64, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>}

// -----

// expected-error @+1 {{split_kv_attention_schedule lanes_per_row (12) must be a power of two up to 32}}
func.func private @schedule_lanes() attributes {s = #fusion.split_kv_attention_schedule<threads = 256, max_splits = 64, heads_per_cta = 4, head_blocks = 1, vector_width = 8, lanes_per_row = 12, kv_unroll = 4, chunk_multiple = 64, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>}

// -----

// expected-error @+1 {{split_kv_attention_mma_schedule stages (1) must be at least 2}}
func.func private @schedule_mma_stages() attributes {s = #fusion.split_kv_attention_mma_schedule<threads = 128, max_splits = 64, heads_per_cta = 4, head_blocks = 1, chunk_multiple = 64, stages = 1, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 8>}

// -----

// expected-error @+1 {{split_kv_attention_mma_schedule cta_ring needs a consumer warp besides the producer and stages (6) a multiple of the consumer warps (4)}}
func.func private @schedule_cta_ring_stages() attributes {s = #fusion.split_kv_attention_mma_schedule<threads = 160, max_splits = 64, heads_per_cta = 4, head_blocks = 1, chunk_multiple = 64, stages = 6, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 0, cta_ring = true>}

// -----

// expected-error @+1 {{split_kv_attention_mma_schedule cta_ring needs a consumer warp besides the producer and stages (4) a multiple of the consumer warps (0)}}
func.func private @schedule_cta_ring_one_warp() attributes {s = #fusion.split_kv_attention_mma_schedule<threads = 32, max_splits = 64, heads_per_cta = 4, head_blocks = 1, chunk_multiple = 64, stages = 4, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 0, cta_ring = true>}

// -----

// expected-error @+1 {{split_kv_attention_schedule cluster_splits must be 0 or in [2, 8], got 1}}
func.func private @schedule_cluster_one() attributes {s = #fusion.split_kv_attention_schedule<threads = 256, max_splits = 64, heads_per_cta = 4, head_blocks = 1, vector_width = 8, lanes_per_row = 16, kv_unroll = 4, chunk_multiple = 64, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 1>}

// -----

// expected-error @+1 {{split_kv_attention_mma_schedule cluster_splits must be 0 or in [2, 8], got 9}}
func.func private @schedule_cluster_nine() attributes {s = #fusion.split_kv_attention_mma_schedule<threads = 128, max_splits = 64, heads_per_cta = 4, head_blocks = 1, chunk_multiple = 64, stages = 3, target_ctas = 264, min_chunk_tokens = 64, cluster_splits = 9>}

// -----

// expected-error @+1 {{head_schedule head_slots must be positive, got -1}}
func.func private @schedule_head_slots() attributes {s = #fusion.head_schedule<kind = rope_kv_append, threads = 64, head_slots = -1, elements_per_thread = 2>}

// -----

// expected-error @+1 {{row_schedule threads must be a multiple of 32 in [32, 1024], got 48}}
func.func private @schedule_row_threads() attributes {s = #fusion.row_schedule<kind = silu_mul, threads = 48, chunks = 1, vector_width = 8, unroll = 1>}

// -----

// expected-error @+1 {{row_schedule unroll must be positive, got 0}}
func.func private @schedule_row_unroll() attributes {s = #fusion.row_schedule<kind = argmax, threads = 256, chunks = 1, vector_width = 8, unroll = 0>}

// -----

// expected-error @+1 {{row_schedule vector_width (16) must be 1, 2, 4 or 8 (at most 16 bytes of f16/bf16)}}
func.func private @schedule_row_vector_width() attributes {s = #fusion.row_schedule<kind = embedding, threads = 256, chunks = 2, vector_width = 16, unroll = 1>}

// -----

// expected-error @+1 {{row_schedule vector_width (6) must be 1, 2, 4 or 8}}
func.func private @schedule_row_vector_width_odd() attributes {s = #fusion.row_schedule<kind = silu_mul, threads = 256, chunks = 2, vector_width = 6, unroll = 1>}

// -----

// expected-error @+1 {{row_schedule chunks (2) must be 1 for argmax: one CTA reduces a row}}
func.func private @schedule_row_argmax_chunks() attributes {s = #fusion.row_schedule<kind = argmax, threads = 256, chunks = 2, vector_width = 8, unroll = 4>}

// -----

// expected-error @+2 {{expected ::mlir::fusion::RowKind to be one of: embedding, argmax, silu_mul}}
// expected-error @+1 {{failed to parse Fusion_RowScheduleAttr parameter 'kind'}}
func.func private @schedule_row_kind() attributes {s = #fusion.row_schedule<kind = linear, threads = 256, chunks = 1, vector_width = 8, unroll = 1>}

// -----

// A kernel's schedule is a #fusion.*_schedule, not a dictionary.
func.func @schedule_dictionary(%x: tensor<?x64xf16>, %w: tensor<64xf16>) -> tensor<?x64xf16> {
  // expected-error @+2 {{'fusion.kernel' op attribute 'schedule' failed to satisfy constraint: ScheduleAttrInterface instance}}
  %y = fusion.kernel @k (%a = %x, %b = %w) : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16>
      attributes {schedule = {threads = 32 : i64}} {
    %0 = fusion.rmsnorm %a, %b {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
    fusion.yield %0 : tensor<?x64xf16>
  }
  return %y : tensor<?x64xf16>
}

// -----

func.func @linear_partials_rank2(%x: tensor<?x576xf16>, %w: tensor<576x576xf16>) -> tensor<?x3x576xf32> {
  // expected-error @+1 {{'fusion.linear_partials' op input must have rank 3 ([B, heads, head_dim]), got 'tensor<?x576xf16>'}}
  %p = fusion.linear_partials %x, %w : tensor<?x576xf16>, tensor<576x576xf16> -> tensor<?x3x576xf32>
  return %p : tensor<?x3x576xf32>
}

// -----

func.func @linear_partials_blocks(%x: tensor<?x9x64xf16>, %w: tensor<576x576xf16>) -> tensor<?x2x576xf32> {
  // expected-error @+1 {{'fusion.linear_partials' op result dimension 1 (head blocks) must divide the 9 heads of input, got 2}}
  %p = fusion.linear_partials %x, %w : tensor<?x9x64xf16>, tensor<576x576xf16> -> tensor<?x2x576xf32>
  return %p : tensor<?x2x576xf32>
}

// -----

func.func @linear_partials_features(%x: tensor<?x9x64xf16>, %w: tensor<576x576xf16>) -> tensor<?x3x512xf32> {
  // expected-error @+1 {{'fusion.linear_partials' op result dimension 2 is 512 but the out features of weight is 576}}
  %p = fusion.linear_partials %x, %w : tensor<?x9x64xf16>, tensor<576x576xf16> -> tensor<?x3x512xf32>
  return %p : tensor<?x3x512xf32>
}

// -----

func.func @linear_partials_in_features(%x: tensor<?x9x64xf16>, %w: tensor<576x512xf16>) -> tensor<?x3x576xf32> {
  // expected-error @+1 {{'fusion.linear_partials' op weight dimension 1 is 512 but the in features of input (9 * 64) is 576}}
  %p = fusion.linear_partials %x, %w : tensor<?x9x64xf16>, tensor<576x512xf16> -> tensor<?x3x576xf32>
  return %p : tensor<?x3x576xf32>
}

// -----

func.func @sum_partials_features(%p: tensor<?x3x576xf32>) -> tensor<?x512xf16> {
  // expected-error @+1 {{'fusion.sum_partials' op result dimension 1 is 512 but the features of input is 576}}
  %o = fusion.sum_partials %p : tensor<?x3x576xf32> -> tensor<?x512xf16>
  return %o : tensor<?x512xf16>
}

// -----

func.func @sum_partials_batch(%p: tensor<2x3x576xf32>) -> tensor<3x576xf16> {
  // expected-error @+1 {{'fusion.sum_partials' op result dimension 0 is 3 but the batch size of input is 2}}
  %o = fusion.sum_partials %p : tensor<2x3x576xf32> -> tensor<3x576xf16>
  return %o : tensor<3x576xf16>
}

// -----

func.func @sum_partials_f16_input(%p: tensor<?x3x576xf16>) -> tensor<?x576xf16> {
  // expected-error @+1 {{'fusion.sum_partials' op operand #0 must be ranked tensor of 32-bit float values}}
  %o = fusion.sum_partials %p : tensor<?x3x576xf16> -> tensor<?x576xf16>
  return %o : tensor<?x576xf16>
}
