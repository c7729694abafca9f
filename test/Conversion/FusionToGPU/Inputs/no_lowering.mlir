// A token embedding and greedy sampling, ops without a GPU lowering yet
// (fusion-compile.mlir): fusion-compile reports each at its location and
// writes nothing.
func.func @sample(%tokens: tensor<?xi32>, %table: tensor<256x64xf16>,
                  %logits: tensor<?x256xf16>) -> (tensor<?x64xf16>, tensor<?xi32>) {
  %x = fusion.embedding %tokens, %table : tensor<?xi32>, tensor<256x64xf16> -> tensor<?x64xf16>
  %t = fusion.argmax %logits : tensor<?x256xf16> -> tensor<?xi32>
  return %x, %t : tensor<?x64xf16>, tensor<?xi32>
}
