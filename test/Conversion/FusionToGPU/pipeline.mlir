// The fusion-to-ptx pipeline ends in PTX text with no libdevice calls, also
// when no CUDA toolkit is visible (CUDA_HOME etc. unset: libdevice cannot
// even be found then).
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT fusion-opt %s --fusion-form-kernels --fusion-to-ptx | FileCheck %s
// RUN: env -u CUDA_HOME -u CUDA_PATH -u CUDA_ROOT fusion-opt %s --fusion-form-kernels --fusion-to-ptx | FileCheck %s --check-prefix=NOLIBDEVICE
// RUN: fusion-opt %s --fusion-form-kernels=strategy=none --fusion-to-ptx='chip=sm_80' | FileCheck %s --check-prefix=SM80
// RUN: fusion-opt %s --fusion-form-kernels=strategy=none --fusion-to-ptx='chip=sm_80' | FileCheck %s --check-prefix=NOPDL
// RUN: fusion-opt %s --fusion-form-kernels --fusion-to-ptx='chip=sm_75' | FileCheck %s --check-prefix=SM75

// Options are checked before anything runs: only the chips the kernels are
// built for (exact spelling), a PTX ISA version the chip has, an SM count the
// grids can be sized for, a known output format.
// RUN: not fusion-opt %s --fusion-to-ptx='chip=sm_1000' 2>&1 | FileCheck %s --check-prefix=CHIP -DCHIP=sm_1000
// RUN: not fusion-opt %s --fusion-to-ptx='chip=SM_90' 2>&1 | FileCheck %s --check-prefix=CHIP -DCHIP=SM_90
// RUN: not fusion-opt %s --fusion-to-ptx='chip=sm_-1' 2>&1 | FileCheck %s --check-prefix=CHIP -DCHIP=sm_-1
// RUN: not fusion-opt %s --fusion-to-ptx='chip=garbage' 2>&1 | FileCheck %s --check-prefix=CHIP -DCHIP=garbage
// RUN: not fusion-opt %s --fusion-to-ptx='chip=' 2>&1 | FileCheck %s --check-prefix=CHIP -DCHIP=
// CHIP: fusion-to-ptx option chip: "[[CHIP]]" is not a supported target (sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_90a)
// RUN: not fusion-opt %s --fusion-to-ptx='features=garbage' 2>&1 | FileCheck %s --check-prefix=FEATURES
// FEATURES: fusion-to-ptx option features: "garbage" is not a PTX ISA version LLVM can emit for the supported chips; expected +ptxNN from +ptx63 to +ptx90 (e.g. +ptx80)
// RUN: not fusion-opt %s --fusion-to-ptx='chip=sm_90a features=+ptx78' 2>&1 | FileCheck %s --check-prefix=OLDPTX
// OLDPTX: fusion-to-ptx option features: "+ptx78" is older than sm_90a (which needs +ptx80 or newer)
// RUN: not fusion-opt %s --fusion-to-ptx='sm-count=0' 2>&1 | FileCheck %s --check-prefix=SMCOUNT
// SMCOUNT: fusion-to-ptx option sm-count: 0 is outside [1, 1024]
// RUN: not fusion-opt %s --fusion-to-ptx='attention-ring-stages=0' 2>&1 | FileCheck %s --check-prefix=STAGES
// STAGES: fusion-to-ptx option attention-ring-stages: 0 is not a multiple of 4 in [4, 24]
// RUN: not fusion-opt %s --fusion-to-ptx='format=garbage' 2>&1 | FileCheck %s --check-prefix=FORMAT
// FORMAT: fusion-to-ptx option format: "garbage" is not isa (PTX text), bin or fatbin

// CHECK: fusion.kernel @layer_k0_fused
// CHECK-SAME: launch = #fusion.launch<entry = "layer_k0_fused"
// CHECK: gpu.binary @fusion_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">
// CHECK-SAME: .target sm_90
// CHECK-SAME: .extern .shared .align 16 .b8 __fusion_dynamic_shared[]
// CHECK-SAME: .entry layer_k0_fused(
// CHECK-SAME: .param .u64 .ptr .align 1 layer_k0_fused_param_0,
// CHECK-SAME: .param .u32 layer_k0_fused_param_14
// CHECK-SAME: .maxntid 64, 1, 1
// CHECK-SAME: .minnctapersm 3
// CHECK-SAME: .shared .align 16 .b8
// Programmatic dependent launch (sm_90): the next kernel may be scheduled,
// this one waits for the previous kernel's writes.
// CHECK-SAME: griddepcontrol.launch_dependents;
// Before the wait, each lane loads its weight vectors into registers (one
// pair of rows per warp; the wait's memory clobber keeps them there), after
// it the activations.
// CHECK-NOT: cp.async.bulk.prefetch.L2.global
// CHECK-SAME: ld.global.v4.b32
// CHECK-NOT: cp.async.bulk.prefetch.L2.global
// CHECK-SAME: griddepcontrol.wait;
// CHECK-SAME: ld.global.v4.b32
// CHECK-SAME: shfl.sync.bfly.b32
// CHECK-SAME: bar.sync
// CHECK-SAME: sqrt.rn.f32
// CHECK-SAME: fma.rn.f64
// The GEMM-shaped variants of the projection (sm_80+ only).
// CHECK-SAME: .entry layer_k0_fused_gemm16(
// CHECK-SAME: .minnctapersm 2
// CHECK-SAME: cp.async.cg.shared.global
// CHECK-SAME: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// CHECK-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// NOLIBDEVICE-NOT: __nv_
// NOLIBDEVICE-NOT: .extern .func

// SM80: gpu.binary @fusion_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">
// SM80-SAME: .target sm_80
// SM80-SAME: .entry layer_k0_rmsnorm(
// SM80-SAME: .entry layer_k1_qkv_proj(
// SM80-SAME: .entry layer_k1_qkv_proj_gemm16(
// SM80-SAME: .entry layer_k2_rope(
// SM80-SAME: .entry layer_k3_kv_append(

// griddepcontrol needs sm_90.
// NOPDL-NOT: griddepcontrol
// NOPDL-NOT: cp.async.bulk.prefetch
// NOPDL-NOT: programmatic_dependent_launch

// Before sm_80 there are no f16 mma.m16n8k16: no tensor-core variant.
// SM75: fusion.kernel @layer_k0_fused
// SM75-NOT: variants
// SM75: .target sm_75
// SM75-NOT: mma.sync
func.func @layer(%x: tensor<?x512xf16>, %res: tensor<?x512xf16>, %norm_w: tensor<512xf16>,
    %qkv_w: tensor<512x512xf16>, %pos: tensor<?xi32>,
    %block_table: tensor<?x?xi32>, %kc: memref<?x16x2x64xf16>, %vc: memref<?x16x2x64xf16>)
    -> (tensor<?x4x64xf16>, tensor<?x512xf16>) {
  %y, %h = fusion.rmsnorm %x, %norm_w residual(%res : tensor<?x512xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x512xf16>, tensor<512xf16> -> tensor<?x512xf16>, tensor<?x512xf16>
  %q, %k, %v = fusion.qkv_proj %y, %qkv_w {num_heads = 4 : i64, num_kv_heads = 2 : i64, head_dim = 64 : i64}
      : tensor<?x512xf16>, tensor<512x512xf16> -> tensor<?x4x64xf16>, tensor<?x2x64xf16>, tensor<?x2x64xf16>
  %qr, %kr = fusion.rope %q, %k, %pos {pairing = #fusion.rope_pairing<neox>, theta = 1.0e+04 : f64}
      : tensor<?x4x64xf16>, tensor<?x2x64xf16>, tensor<?xi32>
  fusion.kv_append %kr, %v into %kc, %vc[%block_table, %pos]
      : tensor<?x2x64xf16> into memref<?x16x2x64xf16>, tensor<?x?xi32>, tensor<?xi32>
  return %qr, %h : tensor<?x4x64xf16>, tensor<?x512xf16>
}
