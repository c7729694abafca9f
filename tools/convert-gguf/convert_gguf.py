#!/usr/bin/env python3
"""Turns a llama-architecture GGUF file into a Hugging Face model directory.

    convert_gguf.py MODEL.gguf OUT_DIR

writes, under OUT_DIR (created; an existing directory must be empty):
  config.json            LlamaForCausalLM config from the GGUF metadata
  model.safetensors      every tensor dequantised to float32 under its
                         transformers name (model.layers.N.self_attn.q_proj.
                         weight, ...); no lm_head.weight when the GGUF has no
                         output.weight (tied embeddings)
  tokenizer.json         the byte-level BPE of the GGUF metadata (model gpt2)
  tokenizer_config.json  bos/eos/pad tokens and the chat template
  generation_config.json bos/eos token ids

Float32 keeps the dequantised values exact, so a consumer that rounds once
to f16/bf16 gets the same weights as transformers' own GGUF loader
(`from_pretrained(..., gguf_file=...)`, which dequantises to float32 too).

The math, from llama.cpp (convert_hf_to_gguf.py, LlamaModel.permute): GGUF
stores q_proj and k_proj with the rows of each head permuted from the Hugging
Face rotate-half (NeoX) layout to interleaved pairs,
    w.reshape(n_head, 2, d / 2, in).swapaxes(1, 2),
which `unpermute_rows` undoes. Quantised blocks (Q4_0, Q4_1, Q8_0, ...) are
dequantised by the `gguf` package (gguf.quants, numpy).

Errors (exit status 1, nothing left in OUT_DIR): not a GGUF file, an
architecture other than llama, a tokenizer model other than gpt2, a tensor
missing or of the wrong shape.

Needs: numpy, gguf, safetensors, tokenizers (all on PyPI; no torch).
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np


class ConvertError(Exception):
    """A GGUF file this converter cannot turn into a model directory."""


def unpermute_rows(w, n_head):
    """Inverse of llama.cpp's q/k permutation; w is [n_head * d, in]."""
    d = w.shape[0] // n_head
    return w.reshape(n_head, d // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def field(reader, key, default=None):
    """The value of metadata `key`, or `default` (error when None) if absent."""
    f = reader.fields.get(key)
    if f is None:
        if default is None:
            raise ConvertError(f"GGUF metadata has no '{key}'")
        return default
    return f.contents()


def llama_config(reader):
    """The Hugging Face LlamaConfig dictionary of a llama GGUF."""
    arch = field(reader, "general.architecture")
    if arch != "llama":
        raise ConvertError(f"architecture '{arch}' is not supported (only llama)")
    p = "llama."
    hidden = int(field(reader, p + "embedding_length"))
    heads = int(field(reader, p + "attention.head_count"))
    names = {t.name for t in reader.tensors}
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": int(field(reader, p + "feed_forward_length")),
        "num_hidden_layers": int(field(reader, p + "block_count")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(field(reader, p + "attention.head_count_kv", heads)),
        "head_dim": int(field(reader, p + "rope.dimension_count", hidden // heads)),
        "rms_norm_eps": float(np.float32(field(reader, p + "attention.layer_norm_rms_epsilon"))),
        "rope_theta": float(field(reader, p + "rope.freq_base", 10000.0)),
        "max_position_embeddings": int(field(reader, p + "context_length")),
        "vocab_size": len(reader.fields["tokenizer.ggml.tokens"].data),
        "tie_word_embeddings": "output.weight" not in names,
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "bos_token_id": int(field(reader, "tokenizer.ggml.bos_token_id")),
        "eos_token_id": int(field(reader, "tokenizer.ggml.eos_token_id")),
        "torch_dtype": "float32",
    }


# GGUF tensor name (after "blk.N.") -> transformers name (after "model.layers.N.").
LAYER_TENSORS = {
    "attn_norm": "input_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
MODEL_TENSORS = {"token_embd": "model.embed_tokens", "output_norm": "model.norm",
                 "output": "lm_head"}


def expected_shapes(cfg):
    """transformers name -> shape, for every tensor of the model `cfg` describes."""
    h, i, d = cfg["hidden_size"], cfg["intermediate_size"], cfg["head_dim"]
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    layer = {"input_layernorm": [h], "self_attn.q_proj": [q, h], "self_attn.k_proj": [kv, h],
             "self_attn.v_proj": [kv, h], "self_attn.o_proj": [h, q],
             "post_attention_layernorm": [h], "mlp.gate_proj": [i, h], "mlp.up_proj": [i, h],
             "mlp.down_proj": [h, i]}
    shapes = {"model.embed_tokens.weight": [cfg["vocab_size"], h], "model.norm.weight": [h]}
    if not cfg["tie_word_embeddings"]:
        shapes["lm_head.weight"] = [cfg["vocab_size"], h]
    for n in range(cfg["num_hidden_layers"]):
        for name, shape in layer.items():
            shapes[f"model.layers.{n}.{name}.weight"] = shape
    return shapes


def hf_name(gguf_name):
    """The transformers name of a GGUF tensor name, or None if unknown."""
    parts = gguf_name.split(".")
    if parts[-1] != "weight":
        return None
    if parts[0] == "blk" and len(parts) == 4 and parts[2] in LAYER_TENSORS:
        return f"model.layers.{parts[1]}.{LAYER_TENSORS[parts[2]]}.weight"
    if len(parts) == 2 and parts[0] in MODEL_TENSORS:
        return MODEL_TENSORS[parts[0]] + ".weight"
    return None


def load_tensors(reader, cfg):
    """Every tensor, dequantised to float32, under its transformers name."""
    from gguf import quants

    shapes = expected_shapes(cfg)
    out = {}
    for t in reader.tensors:
        name = hf_name(t.name)
        if name is None or name not in shapes:
            raise ConvertError(f"unexpected tensor '{t.name}' for this config")
        shape = [int(n) for n in reversed(t.shape)]  # GGUF dims are innermost-first
        if shape != shapes[name]:
            raise ConvertError(f"tensor '{t.name}' has shape {shape}, expected {shapes[name]}")
        w = np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float32)
        w = w.reshape(shape)
        if name.endswith("q_proj.weight"):
            w = unpermute_rows(w, cfg["num_attention_heads"])
        elif name.endswith("k_proj.weight"):
            w = unpermute_rows(w, cfg["num_key_value_heads"])
        out[name] = np.ascontiguousarray(w)
    missing = sorted(set(shapes) - set(out))
    if missing:
        raise ConvertError(f"GGUF has no tensor for '{missing[0]}' ({len(missing)} missing)")
    return out


def tokenizer_json(reader):
    """tokenizer.json text for a GGUF byte-level BPE (tokenizer.ggml.model gpt2)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    kind = field(reader, "tokenizer.ggml.model")
    if kind != "gpt2":
        raise ConvertError(f"tokenizer model '{kind}' is not supported (only gpt2 byte-level BPE)")
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in field(reader, "tokenizer.ggml.merges")]
    bpe = models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges)
    tok = Tokenizer(bpe)
    # SmolLM/StarCoder-style pre-tokenizer (llama.cpp pre type "smollm"):
    # every digit alone, then GPT-2's byte-level split.
    steps = [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)]
    if field(reader, "tokenizer.ggml.pre", "default") in ("smollm", "starcoder", "refact"):
        steps.insert(0, pre_tokenizers.Digits(individual_digits=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence(steps)
    tok.decoder = decoders.ByteLevel()
    control = 3  # llama.cpp LLAMA_TOKEN_TYPE_CONTROL
    tok.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                            for i, ty in enumerate(types) if ty == control])
    return tok.to_str()


def tokenizer_config(reader):
    """tokenizer_config.json dictionary: special tokens and chat template."""
    tokens = field(reader, "tokenizer.ggml.tokens")
    name = lambda key: tokens[int(field(reader, key))]  # noqa: E731
    cfg = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
           "bos_token": name("tokenizer.ggml.bos_token_id"),
           "eos_token": name("tokenizer.ggml.eos_token_id"),
           "add_bos_token": bool(field(reader, "tokenizer.ggml.add_bos_token", False)),
           "model_max_length": int(field(reader, "llama.context_length"))}
    if "tokenizer.ggml.padding_token_id" in reader.fields:
        cfg["pad_token"] = name("tokenizer.ggml.padding_token_id")
    if "tokenizer.chat_template" in reader.fields:
        cfg["chat_template"] = field(reader, "tokenizer.chat_template")
    return cfg


def write_model_dir(reader, out_dir):
    """Writes every file of the model directory into the empty `out_dir`."""
    from safetensors.numpy import save_file

    cfg = llama_config(reader)
    save_file(load_tensors(reader, cfg), os.path.join(out_dir, "model.safetensors"),
              metadata={"format": "pt"})
    dump = lambda obj, name: open(os.path.join(out_dir, name), "w").write(  # noqa: E731
        json.dumps(obj, indent=2) + "\n")
    dump(cfg, "config.json")
    dump(tokenizer_config(reader), "tokenizer_config.json")
    dump({"bos_token_id": cfg["bos_token_id"], "eos_token_id": cfg["eos_token_id"]},
         "generation_config.json")
    with open(os.path.join(out_dir, "tokenizer.json"), "w") as f:
        f.write(tokenizer_json(reader))


def convert(gguf_path, out_dir):
    """Converts; on any error removes what it wrote and re-raises."""
    import gguf

    try:
        reader = gguf.GGUFReader(gguf_path)
    except (ValueError, OSError) as e:
        raise ConvertError(f"cannot read '{gguf_path}' as GGUF: {e}") from e
    if os.path.exists(out_dir) and os.listdir(out_dir):
        raise ConvertError(f"output directory '{out_dir}' is not empty")
    os.makedirs(out_dir, exist_ok=True)
    try:
        write_model_dir(reader, out_dir)
    except BaseException:
        shutil.rmtree(out_dir, ignore_errors=True)
        raise


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("gguf", help="input .gguf file (llama architecture)")
    ap.add_argument("out_dir", help="output model directory (created; must be empty)")
    args = ap.parse_args()
    try:
        convert(args.gguf, args.out_dir)
    except ConvertError as e:
        print(f"convert_gguf: error: {e}", file=sys.stderr)
        return 1
    print(f"convert_gguf: wrote {args.out_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
