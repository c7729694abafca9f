// The gated MLP of a decoder layer, whose linear ops have no GPU lowering
// yet (fusion-compile.mlir): fusion-compile reports each at its location and
// writes nothing.
func.func @mlp(%x: tensor<?x64xf16>, %gate_up_w: tensor<256x64xf16>,
               %down_w: tensor<64x128xf16>) -> tensor<?x64xf16> {
  %gu = fusion.linear %x, %gate_up_w : tensor<?x64xf16>, tensor<256x64xf16> -> tensor<?x256xf16>
  %m = fusion.silu_mul %gu : tensor<?x256xf16> -> tensor<?x128xf16>
  %d = fusion.linear %m, %down_w : tensor<?x128xf16>, tensor<64x128xf16> -> tensor<?x64xf16>
  return %d : tensor<?x64xf16>
}
