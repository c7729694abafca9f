// The embedding, argmax and silu_mul kernels fed by function arguments, for
// test/gpu/check_kernels.py (scripts/snapshot.sh compiles this file) and
// compile-examples.mlir: SmolLM2-135M's shapes in bf16 (vocab 49152, hidden
// 576, intermediate 1536: 16-byte vectors), Llama-3's vocab and
// intermediate size in f16 (128256, 14336), and sizes no 16-byte vector
// divides (vocab 1001: scalar loads; intermediate 100: 8-byte vectors).
func.func @smollm2(%tokens: tensor<?xi32>, %embed: tensor<49152x576xbf16>,
                   %logits: tensor<?x49152xbf16>, %gate_up: tensor<?x3072xbf16>)
    -> (tensor<?x576xbf16>, tensor<?xi32>, tensor<?x1536xbf16>) {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<49152x576xbf16> -> tensor<?x576xbf16>
  %next = fusion.argmax %logits : tensor<?x49152xbf16> -> tensor<?xi32>
  %act = fusion.silu_mul %gate_up : tensor<?x3072xbf16> -> tensor<?x1536xbf16>
  return %x, %next, %act : tensor<?x576xbf16>, tensor<?xi32>, tensor<?x1536xbf16>
}

func.func @llama3(%logits: tensor<?x128256xf16>, %gate_up: tensor<?x28672xf16>)
    -> (tensor<?xi32>, tensor<?x14336xf16>) {
  %next = fusion.argmax %logits : tensor<?x128256xf16> -> tensor<?xi32>
  %act = fusion.silu_mul %gate_up : tensor<?x28672xf16> -> tensor<?x14336xf16>
  return %next, %act : tensor<?xi32>, tensor<?x14336xf16>
}

func.func @odd_sizes(%tokens: tensor<?xi32>, %embed: tensor<1001x64xbf16>,
                     %logits: tensor<?x1001xbf16>, %gate_up: tensor<?x200xbf16>)
    -> (tensor<?x64xbf16>, tensor<?xi32>, tensor<?x100xbf16>) {
  %x = fusion.embedding %tokens, %embed : tensor<?xi32>, tensor<1001x64xbf16> -> tensor<?x64xbf16>
  %next = fusion.argmax %logits : tensor<?x1001xbf16> -> tensor<?xi32>
  %act = fusion.silu_mul %gate_up : tensor<?x200xbf16> -> tensor<?x100xbf16>
  return %x, %next, %act : tensor<?x64xbf16>, tensor<?xi32>, tensor<?x100xbf16>
}
