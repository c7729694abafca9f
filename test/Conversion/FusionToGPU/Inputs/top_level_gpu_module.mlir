// A module with a gpu.module of its own beside the function (fusion-compile.mlir):
// it would be compiled into the PTX next to the kernels.
func.func @norm(%x: tensor<?x64xf16>, %w: tensor<64xf16>) -> tensor<?x64xf16> {
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  return %y : tensor<?x64xf16>
}
gpu.module @norm_k0_rmsnorm {
}
