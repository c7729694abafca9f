// RUN: not fusion-opt %s -split-input-file --fusion-form-kernels=strategy=megakernel 2>&1 | FileCheck %s --check-prefix=STRATEGY
// RUN: fusion-opt %s -split-input-file -verify-diagnostics --fusion-form-kernels

// An unknown strategy is an error naming it, on valid input (the option is
// an enum: decode or none).
// STRATEGY: for the --strategy option: Cannot find option named 'megakernel'!
func.func @valid(%x: tensor<?x64xf16>, %w: tensor<64xf16>) -> tensor<?x64xf16> {
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  return %y : tensor<?x64xf16>
}

// -----

// Malformed input is rejected by the verifier before the pass runs, with a
// location, and the pass never sees it.
func.func @bad_heads(%y: tensor<?x64xf16>, %w: tensor<128x64xf16>) -> tensor<?x4x16xf16> {
  // expected-error @+1 {{'fusion.qkv_proj' op num_heads (4) must be a multiple of num_kv_heads (3)}}
  %q, %k, %v = fusion.qkv_proj %y, %w {num_heads = 4 : i64, num_kv_heads = 3 : i64, head_dim = 16 : i64}
      : tensor<?x64xf16>, tensor<128x64xf16> -> tensor<?x4x16xf16>, tensor<?x3x16xf16>, tensor<?x3x16xf16>
  return %q : tensor<?x4x16xf16>
}

// -----
// A fusion op inside an existing kernel that does not yield what it declares.
func.func @bad_kernel(%x: tensor<?x64xf16>, %w: tensor<64xf16>) -> tensor<?x64xf16> {
  // expected-error @+1 {{'fusion.kernel' op yields 0 values of types () but the kernel has results ('tensor<?x64xf16>')}}
  %0 = fusion.kernel @k (%a = %x, %b = %w) : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16> {
    %y = fusion.rmsnorm %a, %b {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
    fusion.yield
  }
  return %0 : tensor<?x64xf16>
}

// -----
// Kernels are named after their function: a function name that is not a PTX
// identifier is reported on the function before any kernel is formed.
// expected-error @+1 {{'func.func' op name "a b" cannot prefix the names of its fusion.kernel ops (PTX entries <name>_k<N>_...): expected a PTX identifier [a-zA-Z_][a-zA-Z0-9_$]* of at most 255 characters}}
func.func @"a b"(%x: tensor<?x64xf16>, %w: tensor<64xf16>) -> tensor<?x64xf16> {
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  return %y : tensor<?x64xf16>
}

// -----
// expected-error @+1 {{'func.func' op name "a-b" cannot prefix the names of its fusion.kernel ops}}
func.func @"a-b"(%x: tensor<?x64xf16>, %w: tensor<64xf16>) -> tensor<?x64xf16> {
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  return %y : tensor<?x64xf16>
}

// -----
// expected-error @+1 {{'func.func' op name "1x" cannot prefix the names of its fusion.kernel ops}}
func.func @"1x"(%x: tensor<?x64xf16>, %w: tensor<64xf16>) -> tensor<?x64xf16> {
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  return %y : tensor<?x64xf16>
}
