// A function whose name is not a PTX identifier (fusion-compile.mlir).
func.func @"a b"(%x: tensor<?x64xf16>, %w: tensor<64xf16>) -> tensor<?x64xf16> {
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  return %y : tensor<?x64xf16>
}
