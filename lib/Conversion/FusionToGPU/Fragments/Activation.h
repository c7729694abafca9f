//===- Activation.h - the MLP activation fragment ---------------*- C++ -*-===//
//
// The gated activation of a SwiGLU MLP (fusion.silu_mul; Shazeer 2020,
// Hugging Face LlamaMLP), the one definition the standalone silu_mul kernel
// and the linear -> silu_mul epilogue of the projection kernels share.
//
//===----------------------------------------------------------------------===//

#ifndef FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ACTIVATION_H
#define FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ACTIVATION_H

#include "../KernelBuilder.h"

namespace mlir::fusion {

/// silu(gate) * up of two f32 scalars or two vectors of f32 (elementwise),
/// in fp32, with
/// silu(g) = g / (1 + 2^(-g * log2(e))): exp through `ex2.approx.ftz.f32`
/// (relative error about 2^-22, far below the one rounding to f16/bf16 that
/// follows; no libdevice call) and a correctly rounded division. The CPU
/// reference is ref::siluMul (std::exp). Large negative g gives -0 (2^+inf
/// = inf), large positive g gives g.
Value emitSiluMul(ImplicitLocOpBuilder &b, Value gate, Value up);

} // namespace mlir::fusion

#endif // FUSION_LIB_CONVERSION_FUSIONTOGPU_FRAGMENTS_ACTIVATION_H
