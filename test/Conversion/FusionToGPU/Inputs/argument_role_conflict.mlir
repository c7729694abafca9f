// %x is the input of the first norm and the residual of the second: the
// manifest cannot give the argument one role (fusion-compile.mlir).
func.func @conflict(%x: tensor<?x64xf16>, %x2: tensor<?x64xf16>, %w: tensor<64xf16>)
    -> (tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x64xf16>) {
  %y = fusion.rmsnorm %x, %w {epsilon = 1.0e-05 : f64} : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>
  %z, %h = fusion.rmsnorm %x2, %w residual(%x : tensor<?x64xf16>) {epsilon = 1.0e-05 : f64}
      : tensor<?x64xf16>, tensor<64xf16> -> tensor<?x64xf16>, tensor<?x64xf16>
  return %y, %z, %h : tensor<?x64xf16>, tensor<?x64xf16>, tensor<?x64xf16>
}
