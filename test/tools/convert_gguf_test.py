#!/usr/bin/env python3
"""Tests tools/convert-gguf/convert_gguf.py on tiny GGUF files written here.

The expected weights are the Hugging Face tensors the test starts from; the
GGUF side is made the way llama.cpp's convert_hf_to_gguf.py makes it (its
q/k row permutation, written out below from llama.cpp rather than taken from
the converter), with float32 tensors and Q8_0/Q4_1 blocks whose values are
exactly representable, so the round trip must be exact.
Needs numpy, gguf, safetensors, tokenizers.
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import gguf
from safetensors.numpy import load_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONVERTER = os.path.join(ROOT, "tools", "convert-gguf", "convert_gguf.py")

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS = 32, 2, 1, 16, 64, 2
TOKENS = ["<|endoftext|>", "<s>", "</s>"] + [chr(c) for c in range(ord("a"), ord("z") + 1)] + [
    "ab", "abc", "Ġ", "Ġa"]
MERGES = ["a b", "ab c", "Ġ a"]


def llama_cpp_permute(w, n_head):
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute (HF -> GGUF rows)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def exact_q8_0(rng, shape):
    """Values Q8_0 stores exactly: k * 0.5 with one +-63.5 per 32-block."""
    k = rng.integers(-126, 127, size=shape).astype(np.float32)
    k.reshape(-1, 32)[:, 0] = 127
    return k * 0.5


def exact_q4_1(rng, shape):
    """Values Q4_1 stores exactly: -1 + k/8, k in 0..15, both ends per block."""
    k = rng.integers(0, 16, size=shape).astype(np.float32)
    k.reshape(-1, 32)[:, 0] = 0
    k.reshape(-1, 32)[:, 1] = 15
    return -1.0 + k * 0.125


def hf_weights(rng, tied=True):
    """The Hugging Face tensors and their GGUF storage type."""
    q, kv = HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM
    f32 = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    w = {"model.embed_tokens.weight": (exact_q8_0(rng, (len(TOKENS), HIDDEN)), "Q8_0"),
         "model.norm.weight": (f32(HIDDEN), "F32")}
    if not tied:
        w["lm_head.weight"] = (f32(len(TOKENS), HIDDEN), "F32")
    for n in range(LAYERS):
        p = f"model.layers.{n}."
        w.update({p + "input_layernorm.weight": (f32(HIDDEN), "F32"),
                  p + "self_attn.q_proj.weight": (f32(q, HIDDEN), "F32"),
                  p + "self_attn.k_proj.weight": (exact_q4_1(rng, (kv, HIDDEN)), "Q4_1"),
                  p + "self_attn.v_proj.weight": (f32(kv, HIDDEN), "F32"),
                  p + "self_attn.o_proj.weight": (f32(HIDDEN, q), "F32"),
                  p + "post_attention_layernorm.weight": (f32(HIDDEN), "F32"),
                  p + "mlp.gate_proj.weight": (exact_q4_1(rng, (FFN, HIDDEN)), "Q4_1"),
                  p + "mlp.up_proj.weight": (f32(FFN, HIDDEN), "F32"),
                  p + "mlp.down_proj.weight": (f32(HIDDEN, FFN), "F32")})
    return w


GGUF_NAMES = {"model.embed_tokens": "token_embd", "model.norm": "output_norm",
              "lm_head": "output", "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
              "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
              "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
              "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def gguf_name(hf):
    base = hf[: -len(".weight")]
    if base.startswith("model.layers."):
        n, rest = base[len("model.layers."):].split(".", 1)
        return f"blk.{n}.{GGUF_NAMES[rest]}.weight"
    return GGUF_NAMES[base] + ".weight"


def write_gguf(path, weights, arch="llama", skip=()):
    wr = gguf.GGUFWriter(path, arch)
    wr.add_block_count(LAYERS)
    wr.add_context_length(256)
    wr.add_embedding_length(HIDDEN)
    wr.add_feed_forward_length(FFN)
    wr.add_head_count(HEADS)
    wr.add_head_count_kv(KV_HEADS)
    wr.add_rope_dimension_count(HEAD_DIM)
    wr.add_rope_freq_base(100000.0)
    wr.add_layer_norm_rms_eps(1e-5)
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("smollm")
    wr.add_token_list(TOKENS)
    wr.add_token_types([3, 3, 3] + [1] * (len(TOKENS) - 3))
    wr.add_token_merges(MERGES)
    wr.add_bos_token_id(1)
    wr.add_eos_token_id(2)
    for name, (w, qtype) in weights.items():
        if name in skip:
            continue
        if name.endswith("q_proj.weight"):
            w = llama_cpp_permute(w, HEADS)
        elif name.endswith("k_proj.weight"):
            w = llama_cpp_permute(w, KV_HEADS)
        t = getattr(gguf.GGMLQuantizationType, qtype)
        data = w if qtype == "F32" else gguf.quants.quantize(w, t)
        wr.add_tensor(gguf_name(name), data, raw_dtype=t)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def read_json(path):
    with open(path) as f:
        return json.load(f)


def run_converter(src, out):
    return subprocess.run([sys.executable, CONVERTER, src, out], capture_output=True, text=True)


class ConvertGGUFTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.rng = np.random.default_rng(7)

    def tearDown(self):
        self.tmp.cleanup()

    def convert(self, weights, **kw):
        src, out = os.path.join(self.dir, "m.gguf"), os.path.join(self.dir, "out")
        write_gguf(src, weights, **kw)
        return run_converter(src, out), out

    def test_tied_model_round_trip_is_exact(self):
        weights = hf_weights(self.rng)
        r, out = self.convert(weights)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = load_file(os.path.join(out, "model.safetensors"))
        self.assertEqual(set(got), set(weights))
        for name, (w, _) in weights.items():
            self.assertEqual(got[name].dtype, np.float32, name)
            np.testing.assert_array_equal(got[name], w, err_msg=name)
        cfg = read_json(os.path.join(out, "config.json"))
        self.assertEqual((cfg["hidden_size"], cfg["num_attention_heads"],
                          cfg["num_key_value_heads"], cfg["head_dim"], cfg["intermediate_size"],
                          cfg["num_hidden_layers"], cfg["vocab_size"]),
                         (HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, LAYERS, len(TOKENS)))
        self.assertTrue(cfg["tie_word_embeddings"])
        self.assertEqual(cfg["rope_theta"], 100000.0)
        self.assertAlmostEqual(cfg["rms_norm_eps"], 1e-5, places=12)

    def test_untied_model_has_lm_head(self):
        weights = hf_weights(self.rng, tied=False)
        r, out = self.convert(weights)
        self.assertEqual(r.returncode, 0, r.stderr)
        got = load_file(os.path.join(out, "model.safetensors"))
        np.testing.assert_array_equal(got["lm_head.weight"], weights["lm_head.weight"][0])
        self.assertFalse(read_json(os.path.join(out, "config.json"))["tie_word_embeddings"])

    def test_tokenizer_applies_merges_and_splits_digits(self):
        from tokenizers import Tokenizer
        r, out = self.convert(hf_weights(self.rng))
        self.assertEqual(r.returncode, 0, r.stderr)
        tok = Tokenizer.from_file(os.path.join(out, "tokenizer.json"))
        enc = tok.encode("<s>abc a")
        # "<s>" is a control token; "abc" merges fully; " a" is byte-level "Ġa".
        self.assertEqual(enc.ids, [1, TOKENS.index("abc"), TOKENS.index("Ġa")])
        self.assertEqual(tok.decode(enc.ids, skip_special_tokens=True), "abc a")

    def test_missing_tensor_is_an_error_and_leaves_nothing(self):
        r, out = self.convert(hf_weights(self.rng), skip=("model.layers.1.mlp.up_proj.weight",))
        self.assertEqual(r.returncode, 1)
        self.assertIn("model.layers.1.mlp.up_proj.weight", r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_other_architecture_is_an_error(self):
        r, out = self.convert(hf_weights(self.rng), arch="gpt2")
        self.assertEqual(r.returncode, 1)
        self.assertIn("architecture 'gpt2' is not supported", r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_not_a_gguf_file_is_an_error(self):
        src = os.path.join(self.dir, "bad.gguf")
        with open(src, "wb") as f:
            f.write(b"GGUF" + b"\x00" * 10)
        r = run_converter(src, os.path.join(self.dir, "out"))
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot read", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "out")))


if __name__ == "__main__":
    unittest.main()
