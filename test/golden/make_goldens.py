#!/usr/bin/env python3
"""Makes the transformers goldens for one decode step of the attention front half.

For each model of MODELS this writes, under test/golden/<name>/:
  config.json, model.safetensors   a one-layer LLaMA-family checkpoint with
                                   random weights (save_pretrained)
  decode_step.safetensors          one decode step of a batch of sequences run
                                   by transformers itself: the layer input,
                                   the positions, the KV history and every
                                   intermediate of RMSNorm -> QKV -> RoPE ->
                                   attention (the input of o_proj)
and then cross-checks every golden against the float64 reference of
check_goldens.py (exit status 1 if one is off by more than 2e-3 relative for
fp16, 1e-2 for bf16). Tensor names and the method: docs/goldens.md.

Runs on CPU in about 15 s; byte-for-byte reproducible for a given seed and
torch/transformers version. Attention runs as transformers' "sdpa" (its
default; fp32 softmax inside) unless --attn-implementation eager.
Needs torch, transformers, safetensors and numpy (not installed in the repo):

    python3 -m venv /tmp/goldenvenv
    /tmp/goldenvenv/bin/pip install torch transformers safetensors numpy
    /tmp/goldenvenv/bin/python test/golden/make_goldens.py
"""

import argparse
import inspect
import json
import os
import struct
import sys
import zlib

import numpy as np
import torch
import transformers
from safetensors.torch import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, HERE)
import check_goldens  # noqa: E402  (the float64 reference)

transformers.utils.logging.disable_progress_bar()

LLAMA3_ROPE = {
    "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192,
}

# Shared by every model: one decoder layer, a tiny vocabulary tied to the LM
# head and a tiny MLP (neither is used by the goldens; they only keep the
# checkpoint loadable and small).
COMMON = dict(vocab_size=64, intermediate_size=32, num_hidden_layers=1,
              max_position_embeddings=131072, tie_word_embeddings=True)

MODELS = {
    # Llama-3.1 style: GQA group 4, llama3 frequency scaling.
    "llama3_gqa": dict(arch="llama", dtype="float16", hidden_size=256, num_attention_heads=8,
                       num_key_value_heads=2, head_dim=32, rope_parameters=LLAMA3_ROPE,
                       rms_norm_eps=1e-5),
    # Qwen2 style: q/k/v bias, GQA group 7 (not a power of two).
    "qwen2_bias_g7": dict(arch="qwen2", dtype="float16", hidden_size=448, num_attention_heads=14,
                          num_key_value_heads=2, head_dim=32,
                          rope_parameters={"rope_type": "default", "rope_theta": 1000000.0},
                          rms_norm_eps=1e-6),
    # head_dim 64, group 1 (multi-head attention). 4 heads at hidden 256, not
    # the 8 heads at hidden 512 first asked for: that checkpoint alone would
    # be 2.2 MB and break the 3 MB budget of test/golden (docs/goldens.md).
    "llama_hd64": dict(arch="llama", dtype="float16", hidden_size=256, num_attention_heads=4,
                       num_key_value_heads=4, head_dim=64,
                       rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                       rms_norm_eps=1e-5),
    # bf16, GQA group 2, llama3 scaling.
    "llama_bf16": dict(arch="llama", dtype="bfloat16", hidden_size=256, num_attention_heads=8,
                       num_key_value_heads=4, head_dim=32, rope_parameters=LLAMA3_ROPE,
                       rms_norm_eps=1e-5),
}

# The batch: KV history length and position of each sequence. Sequence 0 has
# no history (position 0), 5 and 37 are not multiples of 16, and the last
# sequence sits at a large position with a 3-token history whose positions
# are faked (99997..99999): it exercises large-angle RoPE without a 100k cache.
HISTORY_LENS = [0, 5, 37, 3]
POSITIONS = [0, 5, 37, 100000]


def seeded_generator(seed, name, salt):
    g = torch.Generator()
    g.manual_seed((seed * 1000003 + zlib.crc32(f"{name}/{salt}".encode())) % (2 ** 63))
    return g


def build_config(spec):
    cfg_kwargs = {k: v for k, v in spec.items() if k not in ("arch", "dtype")}
    cfg_kwargs.update(COMMON)
    if spec["arch"] == "llama":
        return transformers.LlamaConfig(**cfg_kwargs), transformers.LlamaForCausalLM
    if spec["arch"] == "qwen2":
        cfg_kwargs["use_sliding_window"] = False
        return transformers.Qwen2Config(**cfg_kwargs), transformers.Qwen2ForCausalLM
    raise ValueError(spec["arch"])


@torch.no_grad()
def init_weights(model, gen):
    """Non-trivial random weights so every term of the math shows in the
    result: norm weights 1 + 0.1 randn, biases 0.1 randn, q/k projections
    std 1.5/sqrt(H) (attention scores of std ~2, so the softmax is far from
    uniform), v projection std 1/sqrt(H), everything else std 0.02."""
    hidden = model.config.hidden_size
    for name, param in sorted(model.named_parameters()):
        noise = torch.randn(param.shape, generator=gen, dtype=torch.float32)
        if name.endswith("norm.weight"):
            value = 1.0 + 0.1 * noise
        elif name.endswith(".bias"):
            value = 0.1 * noise
        elif name.endswith(("q_proj.weight", "k_proj.weight")):
            value = noise * (1.5 / hidden ** 0.5)
        elif name.endswith("v_proj.weight"):
            value = noise * (1.0 / hidden ** 0.5)
        else:
            value = 0.02 * noise
        param.copy_(value)


def rotary_modules(model):
    return [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]


def fresh_inv_freq(rot, config):
    """The float32 inv_freq of a freshly built rotary embedding."""
    return type(rot)(config=config).inv_freq.detach().to(torch.float32).clone()


def keep_inv_freq_fp32(model):
    """design.md section 3: model.to(fp16/bf16) casts the rotary inv_freq
    buffers too, and the RoPE angle error then grows with the position.
    Re-create them in float32 and check. Returns the dtype found before."""
    found = []
    for rot in rotary_modules(model):
        found.append(str(rot.inv_freq.dtype))
        inv = fresh_inv_freq(rot, model.config)
        rot.inv_freq = inv.clone()
        if hasattr(rot, "original_inv_freq"):
            rot.original_inv_freq = inv.clone()
        assert rot.inv_freq.dtype == torch.float32
    assert found, "no rotary embedding module found"
    return found


def cache_kv(cache):
    """(keys, values) of layer 0 of a DynamicCache, each [1, Hkv, L, D]."""
    if hasattr(cache, "layers"):
        layer = cache.layers[0]
        return layer.keys, layer.values
    return cache.key_cache[0], cache.value_cache[0]


class Capture:
    """Hooks that record the intermediates of the decode step of layer 0."""

    def __init__(self, model):
        self.model = model
        self.layer = model.model.layers[0]
        self.attn = self.layer.self_attn
        self.record = None
        self.handles = []
        mod = sys.modules[type(self.attn).__module__]
        self.mod, self.orig_rope = mod, mod.apply_rotary_pos_emb

    def __enter__(self):
        rec = self.record = {}

        def norm_hook(_m, args, out):
            rec["hidden_states"], rec["normed"] = args[0].detach().clone(), out.detach().clone()

        def proj_hook(tag):
            def hook(_m, _args, out):
                rec[tag] = out.detach().clone()
            return hook

        def o_proj_pre_hook(_m, args):
            rec["attn_output"] = args[0].detach().clone()

        orig = self.orig_rope

        def rope_capture(q, k, cos, sin, *a, **kw):
            q_embed, k_embed = orig(q, k, cos, sin, *a, **kw)
            rec["q_rot"], rec["k_rot"] = q_embed.detach().clone(), k_embed.detach().clone()
            return q_embed, k_embed

        self.handles = [
            self.layer.input_layernorm.register_forward_hook(norm_hook),
            self.attn.q_proj.register_forward_hook(proj_hook("q")),
            self.attn.k_proj.register_forward_hook(proj_hook("k")),
            self.attn.v_proj.register_forward_hook(proj_hook("v")),
            self.attn.o_proj.register_forward_pre_hook(o_proj_pre_hook),
        ]
        self.mod.apply_rotary_pos_emb = rope_capture
        return rec

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        self.mod.apply_rotary_pos_emb = self.orig_rope


def cache_keyword(model):
    params = inspect.signature(model.model.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


@torch.no_grad()
def run_sequence(model, history_inputs, new_input, position):
    """Transformers at batch 1 (no padding): prefill the history from its
    input embeddings at positions position-L .. position-1 into a
    DynamicCache, then one decode step with new_input at `position`.
    Returns the captured intermediates of the decode step, each for the one
    token, plus the KV history as it was before the step."""
    cfg = model.config
    Hq, Hkv, D = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    L = history_inputs.shape[0]
    kw = cache_keyword(model)
    cache = transformers.DynamicCache(config=cfg)
    if L:
        pos = torch.arange(position - L, position, dtype=torch.long)[None]
        model.model(inputs_embeds=history_inputs[None], position_ids=pos, use_cache=True, **{kw: cache})
        k_hist, v_hist = (t[0].transpose(0, 1).clone() for t in cache_kv(cache))  # [L, Hkv, D]
    else:
        k_hist = torch.zeros(0, Hkv, D, dtype=new_input.dtype)
        v_hist = torch.zeros(0, Hkv, D, dtype=new_input.dtype)
    assert k_hist.shape == (L, Hkv, D), k_hist.shape
    with Capture(model) as rec:
        model.model(inputs_embeds=new_input[None, None], position_ids=torch.tensor([[position]]),
                    use_cache=True, **{kw: cache})
    out = {
        "hidden_states": rec["hidden_states"].reshape(-1),
        "normed": rec["normed"].reshape(-1),
        "q": rec["q"].reshape(Hq, D), "k": rec["k"].reshape(Hkv, D), "v": rec["v"].reshape(Hkv, D),
        "q_rot": rec["q_rot"].reshape(Hq, D), "k_rot": rec["k_rot"].reshape(Hkv, D),
        "attn_output": rec["attn_output"].reshape(Hq, D),
        "k_history": k_hist, "v_history": v_hist,
    }
    # Consistency with the cache: the step appended exactly (k_rot, v).
    keys, values = cache_kv(cache)
    assert keys.shape[2] == L + 1
    assert torch.equal(keys[0, :, :L].transpose(0, 1), k_hist)
    assert torch.equal(keys[0, :, L], out["k_rot"]) and torch.equal(values[0, :, L], out["v"])
    assert torch.equal(out["hidden_states"], new_input)
    return out


_ST_DTYPES = {torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32", torch.int32: "I32"}


def save_safetensors(tensors, path, metadata):
    """safetensors.torch.save_file, but byte-for-byte reproducible: the
    library writes the metadata in hash-map order, so the file changed from
    run to run; here names and metadata are sorted and the header is padded
    to a multiple of 8 bytes like the library does."""
    header, chunks, offset = {"__metadata__": dict(sorted(metadata.items()))}, [], 0
    for name in sorted(tensors):
        t = tensors[name].contiguous()
        raw = t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": _ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    blob = json.dumps(header, separators=(",", ":")).encode("utf-8")
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for raw in chunks:
            f.write(raw)
    back = load_file(path)  # the library must read it back unchanged
    assert set(back) == set(tensors) and all(torch.equal(back[k], tensors[k]) for k in tensors)


def make_model(name, spec, out_dir, seed, attn_impl):
    dtype = getattr(torch, spec["dtype"])
    config, cls = build_config(spec)
    torch.manual_seed(seed)
    model = cls(config)  # float32
    init_weights(model, seeded_generator(seed, name, "weights"))
    model.to(dtype)
    cast = keep_inv_freq_fp32(model)
    print(f"[{name}] inv_freq after model.to({spec['dtype']}): {cast} -> re-created in float32")
    os.makedirs(out_dir, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    # Only config.json and model.safetensors are kept.
    for extra in ("generation_config.json",):
        if os.path.exists(os.path.join(out_dir, extra)):
            os.remove(os.path.join(out_dir, extra))
    # The goldens come from the checkpoint as a user would load it.
    try:
        loaded = cls.from_pretrained(out_dir, dtype=dtype, attn_implementation=attn_impl)
    except TypeError:
        loaded = cls.from_pretrained(out_dir, torch_dtype=dtype, attn_implementation=attn_impl)
    loaded.eval()
    ref_state = model.state_dict()
    for key, value in loaded.state_dict().items():
        if key in ref_state:
            assert torch.equal(value, ref_state[key]), f"{name}: {key} changed in save/load"
    after_load = keep_inv_freq_fp32(loaded)
    print(f"[{name}] inv_freq after from_pretrained(dtype={spec['dtype']}): {after_load} -> float32")
    return loaded, dtype


@torch.no_grad()
def make_goldens(name, spec, out_dir, seed, attn_impl):
    model, dtype = make_model(name, spec, out_dir, seed, attn_impl)
    cfg = model.config
    H = cfg.hidden_size
    gen = seeded_generator(seed, name, "inputs")
    history_inputs = [torch.randn(L, H, generator=gen).to(dtype) for L in HISTORY_LENS]
    new_inputs = torch.randn(len(HISTORY_LENS), H, generator=gen).to(dtype)

    def run_all(m):
        return [run_sequence(m, history_inputs[b], new_inputs[b], POSITIONS[b])
                for b in range(len(HISTORY_LENS))]

    per_seq = run_all(model)
    tensors = {}
    for t in ("hidden_states", "normed", "q", "k", "v", "q_rot", "k_rot", "attn_output"):
        tensors[t] = torch.stack([s[t] for s in per_seq]).contiguous()
    tensors["positions"] = torch.tensor(POSITIONS, dtype=torch.int32)
    tensors["history_lens"] = torch.tensor(HISTORY_LENS, dtype=torch.int32)
    tensors["seq_lens"] = tensors["history_lens"] + 1
    for b, s in enumerate(per_seq):
        tensors[f"history_inputs_{b}"] = history_inputs[b].contiguous()
        tensors[f"k_history_{b}"] = s["k_history"].contiguous()
        tensors[f"v_history_{b}"] = s["v_history"].contiguous()
    rot = rotary_modules(model)[0]
    tensors["inv_freq"] = rot.inv_freq.detach().clone().contiguous()
    assert tensors["inv_freq"].dtype == torch.float32

    # The float64 reference of the same step, from the same inputs.
    p = check_goldens.model_params(json.load(open(os.path.join(out_dir, "config.json"))))
    weights = {k: v.detach().to(torch.float64).numpy() for k, v in model.state_dict().items()}
    g = {k: v.to(torch.float64).numpy() if v.is_floating_point() else v.numpy() for k, v in tensors.items()}
    g["inv_freq"] = tensors["inv_freq"].numpy()
    chain, _, _ = check_goldens.reference_step(p, weights, g)
    tensors["attn_output_f64"] = torch.from_numpy(chain["attn_output"].astype(np.float32))

    metadata = {
        "format": "fusion decode-step golden v1 (docs/goldens.md)",
        "generator": "test/golden/make_goldens.py",
        "model": name, "seed": str(seed), "dtype": spec["dtype"],
        "torch": torch.__version__, "transformers": transformers.__version__,
        "attn_implementation": attn_impl,
        "history_lens": json.dumps(HISTORY_LENS), "positions": json.dumps(POSITIONS),
    }
    save_safetensors(tensors, os.path.join(out_dir, "decode_step.safetensors"), metadata)

    # What the inv_freq trap would have cost: the same step with the rotary
    # buffer cast like model.to(dtype) casts it (informational, not saved).
    trap = {}
    for m in rotary_modules(model):
        trap[m] = m.inv_freq
        m.inv_freq = m.inv_freq.to(dtype)
    bad = run_all(model)
    for m, inv in trap.items():
        m.inv_freq = inv
    return {t: [check_goldens.rel_err(bad[b][t].double().numpy(), chain[t][b]) for b in range(len(HISTORY_LENS))]
            for t in ("q_rot", "attn_output")}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out-dir", default=HERE, help="where the model directories go (default: %(default)s)")
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS),
                    help="which models (default: all)")
    ap.add_argument("--seed", type=int, default=0, help="base seed (default: %(default)s)")
    ap.add_argument("--attn-implementation", default="sdpa", choices=["sdpa", "eager"],
                    help="transformers attention implementation (default: %(default)s; see docs/goldens.md)")
    ap.add_argument("--markdown", action="store_true", help="print the cross-check table as markdown")
    args = ap.parse_args(argv)

    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # CPU reductions in one fixed order
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, numpy {np.__version__}")
    dirs, traps = [], {}
    for name in args.models:
        out_dir = os.path.join(args.out_dir, name)
        traps[name] = make_goldens(name, MODELS[name], out_dir, args.seed, args.attn_implementation)
        dirs.append(out_dir)

    print("\nIf inv_freq had been left in the model dtype (the design.md section 3 trap),")
    print("relative error vs float64, per sequence (positions %s):" % POSITIONS)
    for name, errs in traps.items():
        for t, e in errs.items():
            print(f"  {name:15s} {t:12s} " + "  ".join(f"{x:.2e}" for x in e))

    print("\nCross-check against the float64 reference (check_goldens.py):")
    rows = []
    for d in dirs:
        rows += check_goldens.check_dir(d, verbose=True)
    print(check_goldens.format_table(rows, args.markdown))
    passed = sum(r["ok"] for r in rows)
    print(f"{passed} passed, {len(rows) - passed} failed")
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
