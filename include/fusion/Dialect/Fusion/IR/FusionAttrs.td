//===- FusionAttrs.td - fusion attributes and enums ---------*- tablegen -*-===//

#ifndef FUSION_ATTRS
#define FUSION_ATTRS

include "fusion/Dialect/Fusion/IR/FusionDialect.td"
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
/// recorded as the `strategy` of each kernel's schedule and of the manifest).
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

#endif // FUSION_ATTRS
