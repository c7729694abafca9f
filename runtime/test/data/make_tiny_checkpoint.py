#!/usr/bin/env python3
"""Writes tiny_checkpoint/: a two-layer Hugging Face style checkpoint whose
shapes and config match tiny_decode.mlir and so its compiled manifest
tiny_decode.manifest.json (Llama, hidden 64, 4 query heads, 2 KV heads,
head_dim 16, rms_norm_eps 1e-5, rope_theta 500000 with Llama-3.1 scaling),
bf16 tensors with deterministic pseudo-random values.
Only the front-half tensors of each layer are written. No dependencies.

  python3 runtime/test/data/make_tiny_checkpoint.py
"""
import json
import os
import struct

HIDDEN, HQ, HKV, D, LAYERS = 64, 4, 2, 16, 2
HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "tiny_checkpoint")


def bf16_bits(x):
    """float -> bf16 bits, round to nearest even."""
    u = struct.unpack("<I", struct.pack("<f", x))[0]
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF


class Lcg:
    def __init__(self, seed):
        self.state = seed

    def uniform(self, lo, hi):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return lo + (hi - lo) * ((self.state >> 11) / float(1 << 53))


def main():
    rng = Lcg(2026)
    tensors = {}
    a = (3.0 / HIDDEN) ** 0.5
    for layer in range(LAYERS):
        p = "model.layers.%d." % layer
        tensors[p + "input_layernorm.weight"] = ([HIDDEN], 0.5, 1.5)
        tensors[p + "self_attn.q_proj.weight"] = ([HQ * D, HIDDEN], -a, a)
        tensors[p + "self_attn.k_proj.weight"] = ([HKV * D, HIDDEN], -a, a)
        tensors[p + "self_attn.v_proj.weight"] = ([HKV * D, HIDDEN], -a, a)
    header, data = {"__metadata__": {"format": "pt"}}, bytearray()
    for name in sorted(tensors):
        shape, lo, hi = tensors[name]
        n = 1
        for d in shape:
            n *= d
        begin = len(data)
        for _ in range(n):
            data += struct.pack("<H", bf16_bits(rng.uniform(lo, hi)))
        header[name] = {"dtype": "BF16", "shape": shape,
                        "data_offsets": [begin, len(data)]}
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + bytes(data))
    config = {
        "architectures": ["LlamaForCausalLM"],
        "attention_bias": False,
        "hidden_size": HIDDEN,
        "model_type": "llama",
        "num_attention_heads": HQ,
        "num_hidden_layers": LAYERS,
        "num_key_value_heads": HKV,
        "rms_norm_eps": 1e-05,
        "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0,
                         "original_max_position_embeddings": 8192,
                         "rope_type": "llama3"},
        "rope_theta": 500000.0,
        "torch_dtype": "bfloat16",
    }
    with open(os.path.join(OUT, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
