//===- FusionAttrs.td - fusion attributes and enums ---------*- tablegen -*-===//

#ifndef FUSION_ATTRS
#define FUSION_ATTRS

include "fusion/Dialect/Fusion/IR/FusionDialect.td"
include "fusion/Dialect/Fusion/IR/FusionSchedules.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Fusion_RopePairingNeox : I32EnumAttrCase<"neox", 0>;
def Fusion_RopePairingGptj : I32EnumAttrCase<"gptj", 1>;
def Fusion_RopePairing : I32EnumAttr<"RopePairing",
    "which elements of a head a RoPE rotation pairs",
    [Fusion_RopePairingNeox, Fusion_RopePairingGptj]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::fusion";
}

/// How --fusion-form-kernels groups ops into kernels (its `strategy` option;
/// recorded as the `strategy` of each kernel and of the manifest).
/// `none`: one kernel per op. `decode`: the front half of a decoder layer in
/// one kernel, attention in the next.
def Fusion_StrategyNone : I32EnumAttrCase<"none", 0>;
def Fusion_StrategyDecode : I32EnumAttrCase<"decode", 1>;
def Fusion_Strategy : I32EnumAttr<"FusionStrategy",
    "how fusion.kernel regions are formed",
    [Fusion_StrategyNone, Fusion_StrategyDecode]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mlir::fusion";
}

/// The strategy a fusion.kernel was formed by: `#fusion.strategy<decode>`.
def Fusion_StrategyAttr
    : EnumAttr<Fusion_Dialect, Fusion_Strategy, "strategy"> {
  let assemblyFormat = "`<` $value `>`";
}

/// `neox`: x[i] with x[i + rotary_dim/2] (GPT-NeoX, Hugging Face
/// `rotate_half`; Llama, Mistral, Qwen2). `gptj`: x[2i] with x[2i+1] (GPT-J,
/// interleaved).
def Fusion_RopePairingAttr
    : EnumAttr<Fusion_Dialect, Fusion_RopePairing, "rope_pairing"> {
  let assemblyFormat = "`<` $value `>`";
}

def Fusion_Llama3RopeScalingAttr
    : AttrDef<Fusion_Dialect, "Llama3RopeScaling"> {
  let mnemonic = "llama3_scaling";
  let summary = "Llama-3.1 RoPE frequency scaling";
  let description = [{
    The `rope_type = "llama3"` frequency adjustment of Llama-3.1 (Hugging
    Face `_compute_llama3_parameters`). With
    `wavelen = 2*pi / inv_freq`,
    `low = original_max_position / low_freq_factor` and
    `high = original_max_position / high_freq_factor`:
    - `wavelen > low`: `inv_freq / factor`;
    - `wavelen < high`: `inv_freq` unchanged;
    - otherwise, with `s = (original_max_position / wavelen - low_freq_factor)
      / (high_freq_factor - low_freq_factor)`:
      `(1 - s) * inv_freq / factor + s * inv_freq`.

    Example: `#fusion.llama3_scaling<factor = 8.0, low_freq_factor = 1.0,
    high_freq_factor = 4.0, original_max_position = 8192>`.
  }];
  let parameters = (ins APFloatParameter<"">:$factor,
                        APFloatParameter<"">:$low_freq_factor,
                        APFloatParameter<"">:$high_freq_factor,
                        "int64_t":$original_max_position);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// The launch contract: how to launch the kernel a fusion.kernel becomes
// (written by --convert-fusion-to-gpu, exported to the manifest; docs/abi.md).
// Kinds, roles and dimension names are those of the contract header
// runtime/include/fusion/contract/Contract.h, which the verifiers use.
//===----------------------------------------------------------------------===//

def Fusion_ParamKindParameter
    : AttrParameter<"::fusion::contract::ParamKind",
                    "kernel parameter kind (input, output, workspace, scalar)"> {
  let parser = [{ ::mlir::fusion::parseParamKind($_parser) }];
  let printer = [{ $_printer << ::llvm::StringRef(
      ::fusion::contract::paramKindName($_self)) }];
}

def Fusion_LaunchDimsParameter
    : AttrParameter<"::mlir::ArrayAttr",
                    "sizes: integers or run-time dimension names"> {
  let parser = [{ ::mlir::fusion::parseLaunchDims($_parser) }];
  let printer = [{ ::mlir::fusion::printLaunchDims($_printer, $_self) }];
}

def Fusion_OptionalLaunchDimsParameter
    : OptionalParameter<"::mlir::ArrayAttr",
                        "sizes: integers or run-time dimension names"> {
  let parser = [{ ::mlir::fusion::parseLaunchDims($_parser) }];
  let printer = [{ ::mlir::fusion::printLaunchDims($_printer, $_self) }];
}

def Fusion_KernelParamAttr : AttrDef<Fusion_Dialect, "KernelParam"> {
  let mnemonic = "param";
  let summary = "one parameter of a kernel, in ABI order";
  let description = [{
    `kind` is `input` (a fusion.kernel operand), `output` (a result),
    `workspace` (scratch the launcher allocates) or `scalar` (an i32 by
    value); `role` says what it holds (contract::kInputRoles, ...,
    kScalarRoles); `dtype` is its element type; `shape` its logical row-major
    shape, each size a constant or a run-time name (`batch`, `max_pages`,
    `num_pages`, `num_splits`), absent for scalars; `zero_init` marks a
    workspace that must be zero before the first launch (the kernel leaves it
    zero again). A `tensor_map` (the device address of a TMA descriptor the
    launcher encodes, docs/abi.md section 3.3) names the input it describes,
    `of` (its index; `dtype` and `shape` are that input's), and the `box`
    (rows, columns) the kernel copies; the swizzle is 128 bytes, so a box row
    is 128 bytes.

    ```mlir
    #fusion.param<kind = input, role = "key_cache", dtype = f16,
                  shape = [num_pages, 16, 8, 128]>
    ```
  }];
  let parameters = (ins Fusion_ParamKindParameter:$kind,
                        StringRefParameter<"what the parameter holds">:$role,
                        "::mlir::Type":$dtype,
                        Fusion_OptionalLaunchDimsParameter:$shape,
                        DefaultValuedParameter<"bool", "false">:$zero_init,
                        DefaultValuedParameter<"int64_t", "-1">:$of,
                        OptionalParameter<"::mlir::DenseI64ArrayAttr">:$box);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Fusion_KernelVariantAttr : AttrDef<Fusion_Dialect, "KernelVariant"> {
  let mnemonic = "variant";
  let summary = "a batch-specialised replacement of a kernel";
  let description = [{
    Same parameters and results as the kernel it belongs to, launched instead
    of it when the run-time batch is at least `min_batch` (>= 2); `entry` is
    its PTX entry, `grid`/`block`/`smem`/`static_smem` its launch geometry
    (as in `#fusion.launch`), `schedule` the schedule chosen for it (a
    `#fusion.*_schedule`).
  }];
  let parameters = (ins "int64_t":$min_batch,
                        StringRefParameter<"PTX entry name">:$entry,
                        Fusion_LaunchDimsParameter:$grid,
                        "int64_t":$block, "int64_t":$smem,
                        "int64_t":$static_smem,
                        "::mlir::fusion::ScheduleAttrInterface":$schedule);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

def Fusion_LaunchAttr : AttrDef<Fusion_Dialect, "Launch"> {
  let mnemonic = "launch";
  let summary = "how to launch the kernel a fusion.kernel was compiled to";
  let description = [{
    `entry`: the PTX entry; `grid`: x, y, z, each a constant or `batch` /
    `num_splits`; `block`: threads of the 1-D block; `smem`: dynamic shared
    bytes; `static_smem`: the entry's static shared bytes; `params`: the
    `#fusion.param`s in ABI order (inputs, outputs, workspaces, scalars);
    `variants`: `#fusion.variant`s by ascending `min_batch`;
    `programmatic_dependent_launch`: the kernel may be launched before its
    predecessor finishes (it waits in-kernel; sm_90).
  }];
  let parameters = (ins StringRefParameter<"PTX entry name">:$entry,
                        Fusion_LaunchDimsParameter:$grid,
                        "int64_t":$block, "int64_t":$smem,
                        "int64_t":$static_smem,
                        "::mlir::ArrayAttr":$params,
                        OptionalParameter<"::mlir::ArrayAttr">:$variants,
                        DefaultValuedParameter<"bool", "false">:
                            $programmatic_dependent_launch);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
}

#endif // FUSION_ATTRS
