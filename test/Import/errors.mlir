// fusion-import errors name the config and the field; warnings name what is
// not modelled. Each config below is a separate file (split-file).

// RUN: rm -rf %t && split-file %s %t

// RUN: not fusion-import %t/missing_hidden.json 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: fusion-import: error: {{.*}}missing_hidden.json: missing field "hidden_size" (required)

// RUN: not fusion-import %t/missing_model_type.json 2>&1 | FileCheck %s --check-prefix=MODELTYPE
// MODELTYPE: error: {{.*}}missing_model_type.json: missing field "model_type" (required)

// RUN: not fusion-import %t/gemma.json 2>&1 | FileCheck %s --check-prefix=GEMMA
// GEMMA: error: {{.*}}gemma.json: field "model_type": "gemma" is not supported (supported: llama, mistral, mixtral, qwen2, qwen2_moe)

// Unsupported RoPE types, in both layouts.
// RUN: not fusion-import %t/yarn_v4.json 2>&1 | FileCheck %s --check-prefix=YARN
// YARN: error: {{.*}}yarn_v4.json: field "rope_scaling.type": RoPE type "yarn" is not supported (fusion.rope implements "default" and "llama3")
// RUN: not fusion-import %t/dynamic_v5.json 2>&1 | FileCheck %s --check-prefix=DYNAMIC
// DYNAMIC: error: {{.*}}dynamic_v5.json: field "rope_parameters.rope_type": RoPE type "dynamic" is not supported (fusion.rope implements "default" and "llama3")
// RUN: not fusion-import %t/linear_v4.json 2>&1 | FileCheck %s --check-prefix=LINEAR
// LINEAR: error: {{.*}}linear_v4.json: field "rope_scaling.rope_type": RoPE type "linear" is not supported
// RUN: not fusion-import %t/per_layer_rope.json 2>&1 | FileCheck %s --check-prefix=PERLAYER
// PERLAYER: error: {{.*}}per_layer_rope.json: field "rope_parameters": per-layer-type RoPE parameters ("full_attention", "sliding_attention") are not supported
// RUN: not fusion-import %t/llama3_no_factor.json 2>&1 | FileCheck %s --check-prefix=NOFACTOR
// NOFACTOR: error: {{.*}}llama3_no_factor.json: missing field "rope_parameters.factor" (required)
// RUN: not fusion-import %t/llama3_bad_freq.json 2>&1 | FileCheck %s --check-prefix=BADFREQ
// BADFREQ: error: {{.*}}llama3_bad_freq.json: field "rope_scaling.high_freq_factor": must be greater than low_freq_factor 4, got 1

// Shapes and types.
// RUN: not fusion-import %t/heads.json 2>&1 | FileCheck %s --check-prefix=HEADS
// HEADS: error: {{.*}}heads.json: field "num_key_value_heads": num_attention_heads 8 is not a multiple of num_key_value_heads 3
// RUN: not fusion-import %t/head_dim.json 2>&1 | FileCheck %s --check-prefix=HEADDIM
// HEADDIM: error: {{.*}}head_dim.json: field "head_dim": absent, and hidden_size 250 is not a multiple of num_attention_heads 8
// RUN: not fusion-import %t/string_hidden.json 2>&1 | FileCheck %s --check-prefix=TYPE
// TYPE: error: {{.*}}string_hidden.json: field "hidden_size": expected an integer, got the string "256"
// RUN: not fusion-import %t/negative_eps.json 2>&1 | FileCheck %s --check-prefix=EPS
// EPS: error: {{.*}}negative_eps.json: field "rms_norm_eps": must be > 0, got -1

// Values the fusion ops would reject are reported on their config field,
// never by the verifier on an op.
// RUN: not fusion-import %t/zero_eps.json 2>&1 | FileCheck %s --check-prefix=ZEROEPS
// ZEROEPS: fusion-import: error: {{.*}}zero_eps.json: field "rms_norm_eps": must be > 0, got 0
// RUN: not fusion-import %t/theta_half.json 2>&1 | FileCheck %s --check-prefix=THETA
// THETA: fusion-import: error: {{.*}}theta_half.json: field "rope_theta": must be > 1, got 0.5
// RUN: not fusion-import %t/theta_half_v5.json 2>&1 | FileCheck %s --check-prefix=THETA5
// THETA5: fusion-import: error: {{.*}}theta_half_v5.json: field "rope_parameters.rope_theta": must be > 1, got 0.5
// RUN: not fusion-import %t/odd_head_dim.json 2>&1 | FileCheck %s --check-prefix=ODDHD
// ODDHD: fusion-import: error: {{.*}}odd_head_dim.json: field "head_dim": 63 is odd, and RoPE rotates pairs of elements (without partial_rotary_factor the whole head is rotated)
// RUN: not fusion-import %t/odd_derived_head_dim.json 2>&1 | FileCheck %s --check-prefix=ODDDERIVED
// ODDDERIVED: fusion-import: error: {{.*}}odd_derived_head_dim.json: field "head_dim": 63 (hidden_size 504 / num_attention_heads 8) is odd, and RoPE rotates pairs of elements
// RUN: not fusion-import %t/rows_overflow.json 2>&1 | FileCheck %s --check-prefix=ROWS
// ROWS: fusion-import: error: {{.*}}rows_overflow.json: field "head_dim": (num_attention_heads 2147483647 + 2 * num_key_value_heads 2147483647) * head_dim 2147483646, the rows of the q/k/v weight, overflows a 64-bit size
// RUN: not fusion-import %t/weight_overflow.json 2>&1 | FileCheck %s --check-prefix=WEIGHT
// WEIGHT: fusion-import: error: {{.*}}weight_overflow.json: field "hidden_size": the q/k/v weight of 6442450938 x 2147483647 elements overflows a 64-bit size

// Nesting too deep is rejected while parsing.
// RUN: %python -c "print('{\"x\": ' + '[' * 40000)" > %t/deep.json
// RUN: not fusion-import %t/deep.json 2>&1 | FileCheck %s --check-prefix=DEEP
// DEEP: fusion-import: error: {{.*}}deep.json: invalid {{J}}SON: arrays and objects nested more than 64 levels deep
// Brackets inside strings do not count.
// RUN: %python -c "print('{\"model_type\": \"' + '[' * 100 + '\"}')" > %t/brackets_in_string.json
// RUN: not fusion-import %t/brackets_in_string.json 2>&1 | FileCheck %s --check-prefix=INSTRING
// INSTRING: field "model_type": "{{\[+}}" is not supported
// RUN: not fusion-import %t/invalid.json 2>&1 | FileCheck %s --check-prefix=JSON
// JSON: error: {{.*}}invalid.json: invalid JSON: {{.*}}parse error at line 2, column 21

// dtype: float32 needs --dtype, and so does a config without one.
// RUN: not fusion-import %t/float32.json 2>&1 | FileCheck %s --check-prefix=F32
// F32: fusion-import: error: {{.*}}float32.json: field "torch_dtype": "float32" is not float16 or bfloat16; pass --dtype f16 or --dtype bf16
// RUN: fusion-import %t/float32.json --dtype=f16 | FileCheck %s --check-prefix=F32OK
// F32OK: func.func @decode_layer(%x: tensor<?x256xf16>
// RUN: not fusion-import %t/no_dtype.json 2>&1 | FileCheck %s --check-prefix=NODTYPE
// NODTYPE: error: {{.*}}no_dtype.json: no field "torch_dtype" or "dtype"; pass --dtype f16 or --dtype bf16

// Valid: partial_rotary_factor inside rope_parameters (transformers 5) gives
// rotary_dim; a null head_dim means hidden / heads.
// RUN: fusion-import %t/partial.json | FileCheck %s --check-prefix=PARTIAL
// PARTIAL: fusion.rope {{.*}} {pairing = #fusion.rope_pairing<neox>, rotary_dim = 16 : i64, theta = 1.000000e+04 : f64} : tensor<?x8x32xf16>

// Warnings: an active sliding window, attention_bias false on Qwen2.
// RUN: fusion-import %t/sliding.json -o /dev/null 2>&1 | FileCheck %s --check-prefix=SLIDING
// SLIDING: fusion-import: warning: {{.*}}sliding.json: sliding_window 4096 is ignored: fusion.decode_attention attends to the whole sequence (exact only for sequences of at most 4096 tokens)
// RUN: fusion-import %t/qwen2_no_bias.json 2>&1 | FileCheck %s --check-prefix=QWENBIAS
// QWENBIAS: warning: {{.*}}qwen2_no_bias.json: attention_bias false is ignored: qwen2 always has q/k/v biases
// QWENBIAS: fusion.qkv_proj {{.*}} bias(

// Where fusion-import and the runtime's reader used to disagree, the one
// reader (fusion::runtime::ModelConfig) follows transformers:
// qwen2_moe's bias is qkv_bias (default true), never attention_bias.
// RUN: fusion-import %t/qwen2_moe.json 2>&1 | FileCheck %s --check-prefix=MOE
// MOE-NOT: warning
// MOE: fusion.qkv_proj {{.*}} bias(
// RUN: fusion-import %t/qwen2_moe_no_qkv_bias.json 2>&1 | FileCheck %s --check-prefix=MOEOFF
// MOEOFF: warning: {{.*}}qwen2_moe_no_qkv_bias.json: attention_bias true is ignored: qwen2_moe reads qkv_bias (default true)
// MOEOFF-NOT: %qkv_b
// Mistral and Mixtral never have q/k/v biases.
// RUN: fusion-import %t/mistral_bias.json 2>&1 | FileCheck %s --check-prefix=MISTRALBIAS
// MISTRALBIAS: warning: {{.*}}mistral_bias.json: attention_bias true is ignored: mistral never has q/k/v biases
// MISTRALBIAS-NOT: %qkv_b
// partial_rotary_factor in rope_parameters wins over a top-level one
// (head_dim 32 * 0.25 = 8, not 32 * 0.5).
// RUN: fusion-import %t/partial_both.json | FileCheck %s --check-prefix=PARTIALBOTH
// PARTIALBOTH: fusion.rope {{.*}} {pairing = #fusion.rope_pairing<neox>, rotary_dim = 8 : i64, theta = 1.000000e+04 : f64}

//--- missing_hidden.json
{"model_type": "llama", "num_attention_heads": 8, "torch_dtype": "float16"}
//--- missing_model_type.json
{"hidden_size": 256, "num_attention_heads": 8, "torch_dtype": "float16"}
//--- gemma.json
{"model_type": "gemma", "hidden_size": 256, "num_attention_heads": 8}
//--- yarn_v4.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
 "rope_theta": 10000.0, "rope_scaling": {"type": "yarn", "factor": 4.0},
 "torch_dtype": "float16"}
//--- dynamic_v5.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
 "rope_parameters": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 2.0},
 "dtype": "float16"}
//--- linear_v4.json
{"model_type": "mistral", "hidden_size": 256, "num_attention_heads": 8,
 "rope_scaling": {"rope_type": "linear", "factor": 2.0}, "torch_dtype": "float16"}
//--- per_layer_rope.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
 "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                     "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
 "dtype": "float16"}
//--- llama3_no_factor.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
 "rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0, "low_freq_factor": 1.0,
                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
 "dtype": "float16"}
//--- llama3_bad_freq.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8, "rope_theta": 500000.0,
 "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
                  "high_freq_factor": 1.0, "original_max_position_embeddings": 8192},
 "torch_dtype": "float16"}
//--- heads.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
 "num_key_value_heads": 3, "torch_dtype": "float16"}
//--- head_dim.json
{"model_type": "llama", "hidden_size": 250, "num_attention_heads": 8,
 "torch_dtype": "float16"}
//--- string_hidden.json
{"model_type": "llama", "hidden_size": "256", "num_attention_heads": 8}
//--- negative_eps.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
 "rms_norm_eps": -1, "torch_dtype": "float16"}
//--- zero_eps.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
 "rms_norm_eps": 0, "torch_dtype": "float16"}
//--- theta_half.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
 "rope_theta": 0.5, "torch_dtype": "float16"}
//--- theta_half_v5.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
 "rope_parameters": {"rope_type": "default", "rope_theta": 0.5}, "dtype": "float16"}
//--- odd_head_dim.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
 "head_dim": 63, "torch_dtype": "float16"}
//--- odd_derived_head_dim.json
{"model_type": "llama", "hidden_size": 504, "num_attention_heads": 8,
 "torch_dtype": "float16"}
//--- rows_overflow.json
{"model_type": "llama", "hidden_size": 2147483647, "num_attention_heads": 2147483647,
 "num_key_value_heads": 2147483647, "head_dim": 2147483646, "torch_dtype": "float16"}
//--- weight_overflow.json
{"model_type": "llama", "hidden_size": 2147483647, "num_attention_heads": 1,
 "head_dim": 2147483646, "torch_dtype": "float16"}
//--- invalid.json
{"model_type": "llama", "hidden_size": 256
"num_attention_heads": 8}
//--- float32.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
 "torch_dtype": "float32"}
//--- no_dtype.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8}
//--- partial.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8, "head_dim": null,
 "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                     "partial_rotary_factor": 0.5},
 "dtype": "float16"}
//--- sliding.json
{"model_type": "mistral", "hidden_size": 256, "num_attention_heads": 8,
 "num_key_value_heads": 2, "sliding_window": 4096, "torch_dtype": "bfloat16"}
//--- qwen2_moe.json
{"model_type": "qwen2_moe", "hidden_size": 256, "num_attention_heads": 8,
 "torch_dtype": "bfloat16"}
//--- qwen2_moe_no_qkv_bias.json
{"model_type": "qwen2_moe", "hidden_size": 256, "num_attention_heads": 8,
 "qkv_bias": false, "attention_bias": true, "torch_dtype": "bfloat16"}
//--- mistral_bias.json
{"model_type": "mistral", "hidden_size": 256, "num_attention_heads": 8,
 "attention_bias": true, "torch_dtype": "bfloat16"}
//--- partial_both.json
{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 8,
 "partial_rotary_factor": 0.5,
 "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.25},
 "dtype": "float16"}
//--- qwen2_no_bias.json
{"model_type": "qwen2", "hidden_size": 256, "num_attention_heads": 8,
 "attention_bias": false, "use_sliding_window": false, "sliding_window": 4096,
 "torch_dtype": "bfloat16"}
