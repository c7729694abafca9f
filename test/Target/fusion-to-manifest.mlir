// fusion-translate --fusion-to-manifest: the manifest of a compiled module.
//
// 1. It is the manifest fusion-compile writes: compile an example, dump the
//    compiled module, translate the dump, and compare.
// RUN: rm -rf %t && mkdir -p %t
// RUN: fusion-compile %fusion_src_root/examples/llama3_8b.mlir -o %t/m --dump-mlir=%t/m.mlir
// RUN: fusion-translate --fusion-to-manifest --fusion-ptx-name=m.ptx %t/m.mlir -o %t/translated.json
// RUN: diff %t/m.manifest.json %t/translated.json
// The same for the embedding, argmax and silu_mul kernels (their
// #fusion.row_schedule).
// RUN: fusion-compile %fusion_src_root/test/Conversion/FusionToGPU/Inputs/embed_argmax_swiglu.mlir -o %t/r --dump-mlir=%t/r.mlir
// RUN: fusion-translate --fusion-to-manifest --fusion-ptx-name=r.ptx %t/r.mlir -o %t/r.json
// RUN: diff %t/r.manifest.json %t/r.json
//
// 2. Hand-written compiled modules: what each manifest field is read from,
//    and the modules the exporter refuses.
// RUN: fusion-translate --fusion-to-manifest --fusion-ptx-name=norm.ptx %s -split-input-file -verify-diagnostics | FileCheck %s

// The chip and features come from the gpu.binary's #nvvm.target, the strategy
// recorded on the kernels (also written into each kernel's schedule, with
// `kind` and the members of its #fusion.*_schedule), argument names from the source's SSA names
// (%hidden) or a NameLoc (weight), and ptx_fnv1a64 is the FNV-1a hash of the
// assembly (computed independently: a72cd7aebfe84229).
// CHECK-LABEL: "chip": "sm_80",
//       CHECK: "features": "+ptx75",
//       CHECK: "arguments": [
//       CHECK:   "name": "hidden",
//  CHECK-NEXT:   "role": "input",
//       CHECK:   "name": "weight",
//  CHECK-NEXT:   "role": "norm_weight",
//       CHECK: "name": "norm",
//       CHECK: "schedule": {
//  CHECK-NEXT:   "kind": "norm_row",
//  CHECK-NEXT:   "strategy": "none",
//  CHECK-NEXT:   "threads": 32,
//  CHECK-NEXT:   "tokens_per_cta": 1,
//  CHECK-NEXT:   "vector_width": 8
//  CHECK-NEXT: },
//       CHECK: "ptx": "norm.ptx",
//  CHECK-NEXT: "ptx_fnv1a64": "a72cd7aebfe84229",
//  CHECK-NEXT: "strategy": "none",
module attributes {gpu.container_module} {
  func.func @norm(%hidden: tensor<?x64xf16>, %arg1: tensor<64xf16> loc("weight")) -> tensor<?x64xf16> {
    %0 = fusion.kernel @norm_k0_rmsnorm (%h = %hidden, %w = %arg1) : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16> attributes {launch = #fusion.launch<entry = "norm_k0_rmsnorm", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0, params = [#fusion.param<kind = input, role = "input", dtype = f16, shape = [batch, 64]>, #fusion.param<kind = input, role = "norm_weight", dtype = f16, shape = [64]>, #fusion.param<kind = output, role = "normed", dtype = f16, shape = [batch, 64]>, #fusion.param<kind = scalar, role = "batch", dtype = i32>]>, schedule = #fusion.norm_row_schedule<threads = 32, vector_width = 8, tokens_per_cta = 1>, strategy = #fusion.strategy<none>} {
      %r = fusion.rmsnorm %h, %w {epsilon = 1.000000e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
      fusion.yield %r : tensor<?x64xf16>
    }
    return %0 : tensor<?x64xf16>
  }
  gpu.binary @fusion_kernels [#gpu.object<#nvvm.target<chip = "sm_80", features = "+ptx75">, assembly = ".visible .entry norm_k0_rmsnorm()\0A">]
}

// -----

// expected-error @below {{the module has no kernels (no PTX)}}
module {
  func.func @empty(%x: tensor<?x64xf16>) -> tensor<?x64xf16> {
    return %x : tensor<?x64xf16>
  }
}

// -----

// expected-error @below {{the PTX calls libdevice (__nv_*), which the CUDA driver cannot resolve}}
module attributes {gpu.container_module} {
  gpu.binary @fusion_kernels [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = "call __nv_expf;">]
}

// -----

module attributes {gpu.container_module} {
  func.func @norm(%hidden: tensor<?x64xf16>, %weight: tensor<64xf16>) -> tensor<?x64xf16> {
    // expected-error @below {{has no launch (not compiled)}}
    %0 = fusion.kernel @norm_k0_rmsnorm (%h = %hidden, %w = %weight) : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16> attributes {strategy = #fusion.strategy<none>} {
      %r = fusion.rmsnorm %h, %w {epsilon = 1.000000e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
      fusion.yield %r : tensor<?x64xf16>
    }
    return %0 : tensor<?x64xf16>
  }
  gpu.binary @fusion_kernels [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = ".visible .entry norm_k0_rmsnorm()\0A">]
}

// -----

// expected-error @below {{the manifest needs every fusion.kernel to record the same strategy}}
module attributes {gpu.container_module} {
  func.func @norm(%hidden: tensor<?x64xf16>, %weight: tensor<64xf16>) -> tensor<?x64xf16> {
    %0 = fusion.kernel @a (%h = %hidden, %w = %weight) : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16> attributes {launch = #fusion.launch<entry = "a", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0, params = [#fusion.param<kind = input, role = "input", dtype = f16, shape = [batch, 64]>, #fusion.param<kind = input, role = "norm_weight", dtype = f16, shape = [64]>, #fusion.param<kind = output, role = "normed", dtype = f16, shape = [batch, 64]>, #fusion.param<kind = scalar, role = "batch", dtype = i32>]>, strategy = #fusion.strategy<none>} {
      %r = fusion.rmsnorm %h, %w {epsilon = 1.000000e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
      fusion.yield %r : tensor<?x64xf16>
    }
    %1 = fusion.kernel @b (%h = %0, %w = %weight) : (tensor<?x64xf16>, tensor<64xf16>) -> tensor<?x64xf16> attributes {launch = #fusion.launch<entry = "b", grid = [batch, 1, 1], block = 32, smem = 0, static_smem = 0, params = [#fusion.param<kind = input, role = "input", dtype = f16, shape = [batch, 64]>, #fusion.param<kind = input, role = "norm_weight", dtype = f16, shape = [64]>, #fusion.param<kind = output, role = "normed", dtype = f16, shape = [batch, 64]>, #fusion.param<kind = scalar, role = "batch", dtype = i32>]>, strategy = #fusion.strategy<decode>} {
      %r = fusion.rmsnorm %h, %w {epsilon = 1.000000e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
      fusion.yield %r : tensor<?x64xf16>
    }
    return %1 : tensor<?x64xf16>
  }
  gpu.binary @fusion_kernels [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = ".visible .entry a()\0A.visible .entry b()\0A">]
}

// -----

// expected-error @below {{the manifest needs a gpu.binary whose objects all have the same #nvvm.target (chip and features)}}
module attributes {gpu.container_module} {
  gpu.binary @k90 [#gpu.object<#nvvm.target<chip = "sm_90">, assembly = ".visible .entry a()\0A">]
  gpu.binary @k80 [#gpu.object<#nvvm.target<chip = "sm_80">, assembly = ".visible .entry b()\0A">]
}
