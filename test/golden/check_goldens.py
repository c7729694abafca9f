#!/usr/bin/env python3
"""Float64 cross-check of the committed transformers goldens (numpy only).

Each directory under test/golden/ that holds config.json, model.safetensors
and decode_step.safetensors (written by make_goldens.py) is checked: the
decode step of the attention front half (RMSNorm -> packed QKV projection ->
RoPE -> KV append -> GQA decode attention, output before o_proj) is recomputed
in float64 from the committed weights and inputs, with the semantics of
design.md section 2.1 / FusionOps.td, and compared with the tensors that
Hugging Face transformers produced. See docs/goldens.md.

Needs only numpy: the safetensors files are parsed here (bf16 included, which
numpy cannot represent; bf16 values are widened exactly to float32).

Exit status 0 when every check passes, 1 otherwise; the last line is
'N passed, N failed'.

    python3 test/golden/check_goldens.py            # every golden directory
    python3 test/golden/check_goldens.py test/golden/llama3_gqa -v
    python3 test/golden/check_goldens.py --mutants   # also: are bugs caught?
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))

# Relative-error bounds against the float64 reference (design.md section 3).
TOLERANCE = {"F16": 2e-3, "BF16": 1e-2, "F32": 1e-5}
# attn_output_f64 is the float64 result stored as float32.
F64_STORAGE_TOLERANCE = 1e-6
# Our float32 emulation of transformers' inv_freq against its stored buffer:
# two powf implementations within ~1 ulp each, then a reciprocal.
INV_FREQ_ULPS = 4


# ---------------------------------------------------------------------------
# safetensors reader (the format: 8-byte little-endian header length, a JSON
# header {name: {dtype, shape, data_offsets}}, then the raw little-endian data)
# ---------------------------------------------------------------------------

_NUMPY_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16,
    "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8,
    "U8": np.uint8, "BOOL": np.bool_,
}


def read_safetensors(path):
    """Returns (tensors, dtypes, metadata): numpy arrays by name, the stored
    dtype string of each ('F16', 'BF16', ...), and the __metadata__ dict.
    BF16 tensors come back as float32 holding the exact bf16 values."""
    with open(path, "rb") as f:
        blob = f.read()
    (header_len,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + header_len].decode("utf-8"))
    base = 8 + header_len
    metadata = header.pop("__metadata__", {}) or {}
    tensors, dtypes = {}, {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        raw = blob[base + begin:base + end]
        shape = tuple(info["shape"])
        dt = info["dtype"]
        if dt == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32).reshape(shape)
        elif dt in _NUMPY_DTYPES:
            arr = np.frombuffer(raw, dtype=np.dtype(_NUMPY_DTYPES[dt]).newbyteorder("<"))
            arr = arr.astype(_NUMPY_DTYPES[dt]).reshape(shape)
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt}")
        tensors[name] = arr
        dtypes[name] = dt
    return tensors, dtypes, metadata


# ---------------------------------------------------------------------------
# Model description from a transformers config.json (v5 `rope_parameters`
# and v4 `rope_theta` / `rope_scaling` spellings). transformers is not
# installed here (scripts/setup.sh installs numpy only), so this is a small
# reader of its own; it follows the same transformers semantics as the C++
# reader, fusion::runtime::ModelConfig (runtime/src/ModelConfig.cpp), which
# fusion-import and fusion-run use. Keep the two in step.
# ---------------------------------------------------------------------------

SUPPORTED_MODEL_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe")


def _get(cfg, key, default):
    """cfg[key], or `default` when absent or null (transformers' None)."""
    value = cfg.get(key)
    return default if value is None else value


def qkv_bias(cfg):
    """The packed q/k/v bias as each model's attention module decides it:
    LlamaAttention reads attention_bias (default False), Qwen2Attention always
    has one, MistralAttention / MixtralAttention never, Qwen2MoeAttention reads
    qkv_bias (default True)."""
    model_type = cfg.get("model_type")
    if model_type == "llama":
        return bool(_get(cfg, "attention_bias", False))
    if model_type == "qwen2_moe":
        return bool(_get(cfg, "qkv_bias", True))
    return model_type == "qwen2"


def model_params(cfg):
    if cfg.get("model_type") not in SUPPORTED_MODEL_TYPES:
        raise ValueError(f"model_type {cfg.get('model_type')!r} is not supported")
    hidden = cfg["hidden_size"]
    num_heads = cfg["num_attention_heads"]
    num_kv_heads = _get(cfg, "num_key_value_heads", num_heads)
    head_dim = _get(cfg, "head_dim", hidden // num_heads)
    # transformers 5's rope_parameters, when present, replaces rope_scaling;
    # its rope_theta and partial_rotary_factor win over top-level ones.
    if cfg.get("rope_parameters") is not None:
        rope = dict(cfg["rope_parameters"])
    else:
        rope = dict(cfg.get("rope_scaling") or {})
    if rope.get("rope_theta") is None:
        rope["rope_theta"] = _get(cfg, "rope_theta", 10000.0)
    rope_type = rope.get("rope_type", rope.get("type", "default"))
    partial = rope.get("partial_rotary_factor")
    if partial is None:
        partial = _get(cfg, "partial_rotary_factor", 1.0)
    return {
        "hidden": hidden, "num_heads": num_heads, "num_kv_heads": num_kv_heads,
        "head_dim": head_dim, "eps": float(_get(cfg, "rms_norm_eps", 1e-6)),
        "theta": float(rope["rope_theta"]), "rope_type": rope_type,
        "rotary_dim": int(head_dim * partial), "rope": rope, "bias": qkv_bias(cfg),
    }


def config_reader_failures():
    """model_params on hand-made configs where readers once disagreed, with
    the values transformers' semantics give; returns what differs."""
    base = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4}
    cases = [
        ({"model_type": "qwen2", "attention_bias": False}, "bias", True),
        ({"model_type": "qwen2_moe"}, "bias", True),
        ({"model_type": "qwen2_moe", "qkv_bias": False, "attention_bias": True}, "bias", False),
        ({"model_type": "mistral", "attention_bias": True}, "bias", False),
        ({"attention_bias": True}, "bias", True),
        # head_dim 64: rope_parameters' 0.25 wins over the top-level 0.5.
        ({"partial_rotary_factor": 0.5, "rope_parameters": {"partial_rotary_factor": 0.25}},
         "rotary_dim", 16),
        ({"rope_theta": 2e4, "rope_parameters": {"rope_type": "default", "rope_theta": 4e4}},
         "theta", 4e4),
        # rope_scaling is not read when rope_parameters is present.
        ({"rope_scaling": {"rope_type": "llama3"}, "rope_parameters": {"rope_type": "default"}},
         "rope_type", "default"),
    ]
    failures = []
    for fields, key, expected in cases:
        got = model_params({**base, **fields})[key]
        if got != expected:
            failures.append(f"{fields}: {key} = {got!r}, expected {expected!r}")
    return failures


# ---------------------------------------------------------------------------
# The reference math (design.md section 2.1), float64 unless stated
# ---------------------------------------------------------------------------

def rmsnorm_f64(x, weight, eps):
    """rmsnorm: y = (x * rsqrt(mean(x^2) + eps)) * w, rows of x, in float64."""
    x = np.asarray(x, np.float64)
    rms = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return x / rms * np.asarray(weight, np.float64)


def pack_qkv(weights, prefix="model.layers.0.self_attn."):
    """The packed QKV weight [(Hq + 2*Hkv) * D, H] = cat(q_proj.weight,
    k_proj.weight, v_proj.weight) along dim 0, and likewise the bias (None
    without attention bias)."""
    w = np.concatenate([weights[prefix + p + "_proj.weight"] for p in "qkv"], axis=0)
    if prefix + "q_proj.bias" in weights:
        b = np.concatenate([weights[prefix + p + "_proj.bias"] for p in "qkv"], axis=0)
    else:
        b = None
    return w, b


def qkv_proj_f64(x, packed_w, packed_b, num_heads, num_kv_heads, head_dim):
    """qkv_proj: [N, H] x [(Hq + 2*Hkv) * D, H]^T (+ bias) -> q [N, Hq, D],
    k [N, Hkv, D], v [N, Hkv, D], in float64."""
    y = np.asarray(x, np.float64) @ np.asarray(packed_w, np.float64).T
    if packed_b is not None:
        y = y + np.asarray(packed_b, np.float64)
    nq, nk = num_heads * head_dim, num_kv_heads * head_dim
    n = y.shape[0]
    return (y[:, :nq].reshape(n, num_heads, head_dim),
            y[:, nq:nq + nk].reshape(n, num_kv_heads, head_dim),
            y[:, nq + nk:].reshape(n, num_kv_heads, head_dim))


def rope_inv_freq_f32(theta, rotary_dim, rope=None):
    """inv_freq[i] = theta ^ (-2i / rotary_dim) in float32, evaluated in the
    same float32 operation order as transformers (powf, then a float32
    reciprocal; not a correctly rounded float64 value), then the Llama-3.1
    frequency scaling (transformers' _compute_llama3_parameters), also in
    float32."""
    f32 = np.float32
    exponent = np.arange(0, rotary_dim, 2, dtype=np.int64).astype(f32) / f32(rotary_dim)
    inv = f32(1.0) / (f32(theta) ** exponent)
    rope = rope or {}
    if rope.get("rope_type", rope.get("type", "default")) == "llama3":
        factor = f32(rope["factor"])
        low, high = float(rope["low_freq_factor"]), float(rope["high_freq_factor"])
        old_len = float(rope["original_max_position_embeddings"])
        low_wavelen, high_wavelen = f32(old_len / low), f32(old_len / high)
        wavelen = f32(2 * math.pi) / inv
        inv_llama = np.where(wavelen > low_wavelen, inv / factor, inv).astype(f32)
        smooth = (f32(old_len) / wavelen - f32(low)) / f32(high - low)
        smoothed = (f32(1.0) - smooth) * inv_llama / factor + smooth * inv_llama
        medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
        inv = np.where(medium, smoothed, inv_llama).astype(f32)
    elif rope.get("rope_type", rope.get("type", "default")) != "default":
        raise NotImplementedError(f"rope_type {rope.get('rope_type')}")
    return inv.astype(f32)


def rope_neox_f64(x, positions, inv_freq_f32, gptj=False):
    """rope, NeoX / HF rotate_half pairing: x[..., i] with x[..., i + r/2].
    x is [N, heads, D], positions [N]. The angle pos * inv_freq is formed in
    float32 (as the op semantics and transformers do); cos/sin and the
    rotation are float64. Elements past rotary_dim = 2 * len(inv_freq) pass
    through."""
    x = np.asarray(x, np.float64)
    half = inv_freq_f32.shape[0]
    angle = (np.asarray(positions).astype(np.float32)[:, None] * inv_freq_f32[None, :])
    angle = angle.astype(np.float64)[:, None, :]  # [N, 1, r/2]
    cos, sin = np.cos(angle), np.sin(angle)
    out = x.copy()
    if gptj:  # GPT-J interleaved pairing x[2i], x[2i+1] (only for --mutants)
        a, b = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
        out[..., 0:2 * half:2] = a * cos - b * sin
        out[..., 1:2 * half:2] = b * cos + a * sin
        return out
    a, b = x[..., :half], x[..., half:2 * half]
    out[..., :half] = a * cos - b * sin
    out[..., half:2 * half] = b * cos + a * sin
    return out


def decode_attention_f64(q, k_all, v_all, scale=None, kv_head_modulo=False):
    """decode_attention for one sequence: q [Hq, D], k_all/v_all [L, Hkv, D]
    (the cache after the append). o[h] = softmax(q[h] . K^T * scale) V with
    kv_head = h / (Hq / Hkv), scale 1/sqrt(D). L = 0 gives zeros."""
    q = np.asarray(q, np.float64)
    num_heads, head_dim = q.shape
    length, num_kv_heads, _ = k_all.shape
    if length == 0:
        return np.zeros_like(q)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else scale
    group = num_heads // num_kv_heads
    out = np.empty_like(q)
    k_all = np.asarray(k_all, np.float64)
    v_all = np.asarray(v_all, np.float64)
    for h in range(num_heads):
        kv = h % num_kv_heads if kv_head_modulo else h // group
        s = k_all[:, kv, :] @ q[h] * scale
        p = np.exp(s - s.max())
        out[h] = (p / p.sum()) @ v_all[:, kv, :]
    return out


def round_to(dtype, x):
    """x rounded (to nearest even) to 'F16' or 'BF16', returned as float32."""
    x = np.asarray(x, np.float32)
    if dtype == "F16":
        return x.astype(np.float16).astype(np.float32)
    if dtype == "BF16":
        bits = x.view(np.uint32).astype(np.uint64)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.astype(np.uint32).view(np.float32)
    return x


# ---------------------------------------------------------------------------
# The check of one golden directory
# ---------------------------------------------------------------------------

def rel_err(out, ref):
    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    den = np.linalg.norm(ref)
    num = np.linalg.norm(out - ref)
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


def compare(out, ref):
    """(worst relative error over sequences, relative error of the whole
    tensor, max |out - ref|). out and ref are arrays whose axis 0 is the
    sequence, or lists of per-sequence arrays (the KV histories)."""
    if isinstance(out, list):
        worst = max(rel_err(o, r) for o, r in zip(out, ref))
        out = np.concatenate([np.asarray(o, np.float64).ravel() for o in out])
        ref = np.concatenate([np.asarray(r, np.float64).ravel() for r in ref])
    else:
        out = np.asarray(out, np.float64)
        ref = np.asarray(ref, np.float64)
        worst = max(rel_err(out[i], ref[i]) for i in range(out.shape[0]))
    max_abs = float(np.max(np.abs(out - ref))) if out.size else 0.0
    return worst, rel_err(out, ref), max_abs


# Deliberate bugs for --mutants: each must make some golden comparison fail,
# which shows that the goldens are sensitive to that part of the math.
MUTANTS = {
    "norm_weight_ignored": "RMSNorm without its weight",
    "bias_ignored": "QKV bias dropped (Qwen2)",
    "packed_q_v_k": "packed weight in q, v, k order",
    "rope_gptj_pairing": "GPT-J interleaved pairing instead of rotate_half",
    "rope_unscaled": "llama3 frequency scaling left out",
    "inv_freq_in_model_dtype": "inv_freq rounded to the model dtype (the section 3 trap)",
    "position_plus_1": "RoPE at position + 1",
    "kv_head_modulo": "kv_head = h % Hkv instead of h / group",
    "scale_1_over_d": "softmax scale 1/D instead of 1/sqrt(D)",
    "history_ignored": "attention over the new token only",
}


def mutant_applies(p, bug):
    if bug == "bias_ignored":
        return p["bias"]
    if bug == "rope_unscaled":
        return p["rope_type"] == "llama3"
    if bug == "kv_head_modulo":
        return 1 < p["num_kv_heads"] < p["num_heads"]
    return True


def reference_step(p, w, g, bug=None):
    """The float64 decode step from the committed inputs. Returns
    (chain, stage, history): chain holds the float64 results computed from
    hidden_states alone, stage each stage computed from transformers' output
    of the stage before, history (k_history, its reference, v_history, its
    reference), each a list over the sequences that have a history, or None. `bug` (a MUTANTS key) introduces
    a deliberate error."""
    prefix = "model.layers.0."
    norm_w = w[prefix + "input_layernorm.weight"]
    if bug == "norm_weight_ignored":
        norm_w = np.ones_like(norm_w)
    packed_w, packed_b = pack_qkv(w)
    Hq, Hkv, D = p["num_heads"], p["num_kv_heads"], p["head_dim"]
    if bug == "bias_ignored":
        packed_b = None
    if bug == "packed_q_v_k":
        nq, nk = Hq * D, Hkv * D
        packed_w = np.concatenate([packed_w[:nq], packed_w[nq + nk:], packed_w[nq:nq + nk]])
        if packed_b is not None:
            packed_b = np.concatenate([packed_b[:nq], packed_b[nq + nk:], packed_b[nq:nq + nk]])
    # The float32 inv_freq transformers used (stored with the goldens), not
    # our emulation of it: a float32 powf is not correctly rounded and its
    # last bits depend on the SIMD path the library picks, which the angle
    # at large positions amplifies. The emulation is checked separately.
    inv_freq = np.asarray(g["inv_freq"], np.float32)
    if bug == "rope_unscaled":
        inv_freq = rope_inv_freq_f32(p["theta"], p["rotary_dim"], {"rope_type": "default"})
    if bug == "inv_freq_in_model_dtype":
        inv_freq = round_to(p["dtype"], inv_freq)
    B = g["positions"].shape[0]
    pos = g["positions"].astype(np.int64) + (1 if bug == "position_plus_1" else 0)
    gptj = bug == "rope_gptj_pairing"
    attn_kw = {"kv_head_modulo": bug == "kv_head_modulo",
               "scale": 1.0 / D if bug == "scale_1_over_d" else None}

    def rope_(x, positions):
        return rope_neox_f64(x, positions, inv_freq, gptj)

    chain = {}
    chain["normed"] = rmsnorm_f64(g["hidden_states"], norm_w, p["eps"])
    chain["q"], chain["k"], chain["v"] = qkv_proj_f64(chain["normed"], packed_w, packed_b, Hq, Hkv, D)
    chain["q_rot"] = rope_(chain["q"], pos)
    chain["k_rot"] = rope_(chain["k"], pos)

    stage = {"normed": chain["normed"]}
    stage["q"], stage["k"], stage["v"] = qkv_proj_f64(g["normed"], packed_w, packed_b, Hq, Hkv, D)
    stage["q_rot"] = rope_(g["q"], pos)
    stage["k_rot"] = rope_(g["k"], pos)

    attn_chain, attn_stage, k_hist_ref, v_hist_ref, k_hist, v_hist = [], [], [], [], [], []
    for b in range(B):
        kh, vh = g[f"k_history_{b}"], g[f"v_history_{b}"]
        L = kh.shape[0]
        # The history itself, recomputed from its layer inputs at positions
        # positions[b] - L .. positions[b] - 1 (layer 0: K/V depend on the
        # token's own input only).
        if L:
            hn = rmsnorm_f64(g[f"history_inputs_{b}"], norm_w, p["eps"])
            _, hk, hv = qkv_proj_f64(hn, packed_w, packed_b, Hq, Hkv, D)
            k_hist_ref.append(rope_(hk, np.arange(int(pos[b]) - L, int(pos[b]))))
            v_hist_ref.append(hv)
            k_hist.append(kh)
            v_hist.append(vh)
        if bug == "history_ignored":
            kh, vh = kh[:0], vh[:0]
        # KV append, then attention over history + the new token.
        k_all = np.concatenate([kh, chain["k_rot"][b:b + 1]], axis=0)
        v_all = np.concatenate([vh, chain["v"][b:b + 1]], axis=0)
        attn_chain.append(decode_attention_f64(chain["q_rot"][b], k_all, v_all, **attn_kw))
        k_all = np.concatenate([kh, g["k_rot"][b:b + 1]], axis=0)
        v_all = np.concatenate([vh, g["v"][b:b + 1]], axis=0)
        attn_stage.append(decode_attention_f64(g["q_rot"][b], k_all, v_all, **attn_kw))
    chain["attn_output"] = np.stack(attn_chain)
    stage["attn_output"] = np.stack(attn_stage)
    history = None
    if k_hist:
        history = (k_hist, k_hist_ref, v_hist, v_hist_ref)
    return chain, stage, history


def load_dir(path):
    """(name, params, weights, goldens) of one golden directory."""
    name = os.path.basename(os.path.normpath(path))
    with open(os.path.join(path, "config.json")) as f:
        cfg = json.load(f)
    p = model_params(cfg)
    w, _, _ = read_safetensors(os.path.join(path, "model.safetensors"))
    g, gdt, _ = read_safetensors(os.path.join(path, "decode_step.safetensors"))
    p["dtype"] = gdt["hidden_states"]
    return name, p, w, g


def check_dir(path, verbose=False):
    """Checks one golden directory. Returns a list of result rows (dicts)."""
    name, p, w, g = load_dir(path)
    dtype = p["dtype"]
    tol = TOLERANCE[dtype]
    chain, stage, history = reference_step(p, w, g)
    rows = []

    def row(tensor, worst, whole, max_abs, limit, stage_err=None, note="", ok=None):
        if ok is None:
            ok = worst <= limit and (stage_err is None or stage_err <= limit)
        rows.append({"model": name, "dtype": dtype, "tensor": tensor, "rel": worst,
                     "rel_all": whole, "stage": stage_err, "max_abs": max_abs,
                     "tol": limit, "ok": bool(ok), "note": note})

    # inv_freq: our float32 emulation of transformers' formula against the
    # buffer it stored. powf and torch's pow are each within ~1 ulp of the
    # exact value on any host, so a right formula is within a few ulps and
    # a wrong one (exponent, scaling, pairing of i) is off by far more.
    ours = rope_inv_freq_f32(p["theta"], p["rotary_dim"], p["rope"])
    theirs = g["inv_freq"]
    ulps = int(np.max(np.abs(ours.view(np.int32).astype(np.int64) - theirs.view(np.int32).astype(np.int64))))
    row("inv_freq", rel_err(ours, theirs), rel_err(ours, theirs),
        float(np.max(np.abs(ours.astype(np.float64) - theirs))), INV_FREQ_ULPS * 2.0**-23,
        note=f"max {ulps} ulp, bound {INV_FREQ_ULPS} ulp", ok=ulps <= INV_FREQ_ULPS)
    # The KV history from its inputs.
    if history is not None:
        kh, kh_ref, vh, vh_ref = history
        tokens = sum(x.shape[0] for x in kh)
        row("k_history", *compare(kh, kh_ref), tol, note=f"{tokens} tokens")
        row("v_history", *compare(vh, vh_ref), tol, note=f"{tokens} tokens")
    # The decode step, chain and per stage.
    for t in ("normed", "q", "k", "v", "q_rot", "k_rot", "attn_output"):
        worst, whole, max_abs = compare(g[t], chain[t])
        stage_worst = compare(g[t], stage[t])[0]
        row(t, worst, whole, max_abs, tol, stage_err=stage_worst)
    # The stored float64 result.
    row("attn_output_f64", *compare(g["attn_output_f64"], chain["attn_output"]), F64_STORAGE_TOLERANCE,
        note="stored as float32")
    if verbose:
        pos = g["positions"]
        for b in range(pos.shape[0]):
            e = rel_err(g["attn_output"][b], chain["attn_output"][b])
            print(f"  {name} seq {b}: position {int(pos[b])}, history {g[f'k_history_{b}'].shape[0]}, "
                  f"attn_output rel err {e:.2e}")
    return rows


def mutant_rows(path):
    """Runs the reference with each deliberate bug of MUTANTS and reports
    which golden tensors catch it (worst-sequence relative error above the
    bound). A bug that no tensor catches is a failed row."""
    name, p, w, g = load_dir(path)
    tol = TOLERANCE[p["dtype"]]
    rows = []
    for bug, what in MUTANTS.items():
        if not mutant_applies(p, bug):
            continue
        chain, _, history = reference_step(p, w, g, bug)
        errs = {t: compare(g[t], chain[t])[0] for t in ("normed", "q", "k", "v", "q_rot", "k_rot", "attn_output")}
        if history is not None:
            errs["k_history"] = compare(history[0], history[1])[0]
            errs["v_history"] = compare(history[2], history[3])[0]
        caught = {t: e for t, e in errs.items() if not e <= tol}
        worst = max(errs.values())
        rows.append({"model": name, "dtype": p["dtype"], "tensor": bug, "rel": worst, "rel_all": worst,
                     "stage": None, "max_abs": math.nan, "tol": tol, "ok": bool(caught),
                     "note": ("caught by " + ", ".join(caught)) if caught else "NOT CAUGHT"})
    return rows


def format_mutants(rows, markdown=False):
    header = ["model", "deliberate bug", "largest rel err", "caught by"]
    body = [[r["model"], r["tensor"], f"{r['rel']:.1e}", r["note"].replace("caught by ", "")] for r in rows]
    if markdown:
        return "\n".join(["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
                         + ["| " + " | ".join(b) + " |" for b in body])
    widths = [max(len(x[i]) for x in [header] + body) for i in range(len(header))]
    fmt = "  ".join("{:<%d}" % wd for wd in widths)
    return "\n".join([fmt.format(*header)] + [fmt.format(*b) for b in body])


def find_golden_dirs(root):
    out = []
    for entry in sorted(os.listdir(root)):
        d = os.path.join(root, entry)
        if os.path.isfile(os.path.join(d, "decode_step.safetensors")):
            out.append(d)
    return out


def format_table(rows, markdown=False):
    header = ["model", "dtype", "tensor", "rel err (worst seq)", "rel err (all)",
              "rel err (stage)", "max abs err", "bound", "result"]
    lines = []
    body = []
    for r in rows:
        body.append([r["model"], r["dtype"], r["tensor"], f"{r['rel']:.2e}", f"{r['rel_all']:.2e}",
                     "-" if r["stage"] is None else f"{r['stage']:.2e}", f"{r['max_abs']:.2e}",
                     f"{r['tol']:.0e}" + (f" ({r['note']})" if r["note"] else ""),
                     "ok" if r["ok"] else "FAIL"])
    if markdown:
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "|".join("---" for _ in header) + "|")
        lines += ["| " + " | ".join(b) + " |" for b in body]
    else:
        widths = [max(len(x[i]) for x in [header] + body) for i in range(len(header))]
        fmt = "  ".join("{:<%d}" % wd for wd in widths)
        lines.append(fmt.format(*header))
        lines += [fmt.format(*b) for b in body]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dirs", nargs="*", help="golden directories (default: every one under %s)" % HERE)
    ap.add_argument("-v", "--verbose", action="store_true", help="per-sequence attention errors")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--mutants", action="store_true",
                    help="also check that deliberate bugs in the reference (MUTANTS) are caught by the goldens")
    args = ap.parse_args(argv)
    dirs = args.dirs or find_golden_dirs(HERE)
    if not dirs:
        print("no golden directories found", file=sys.stderr)
        return 1
    rows = []
    for d in dirs:
        try:
            rows += check_dir(d, args.verbose)
        except Exception as e:  # a broken file is a failed check, not a crash
            rows.append({"model": os.path.basename(os.path.normpath(d)), "dtype": "?", "tensor": "(load)",
                         "rel": math.inf, "rel_all": math.inf, "stage": None, "max_abs": math.inf,
                         "tol": 0.0, "ok": False, "note": f"{type(e).__name__}: {e}"})
    for failure in config_reader_failures():
        rows.append({"model": "(config reader)", "dtype": "-", "tensor": "-", "rel": math.inf,
                     "rel_all": math.inf, "stage": None, "max_abs": math.inf, "tol": 0.0,
                     "ok": False, "note": failure})
    print(format_table(rows, args.markdown))
    if args.mutants:
        mrows = []
        for d in dirs:
            try:
                mrows += mutant_rows(d)
            except Exception as e:
                mrows.append({"model": os.path.basename(os.path.normpath(d)), "tensor": "(load)", "rel": math.inf,
                              "ok": False, "note": f"{type(e).__name__}: {e}"})
        print()
        print(format_mutants(mrows, args.markdown))
        rows += mrows
    passed = sum(r["ok"] for r in rows)
    failed = len(rows) - passed
    print(f"{passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
