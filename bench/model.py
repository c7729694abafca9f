#!/usr/bin/env python3
"""Whole-model decode benchmark: our engine against the gpt-fast-style
PyTorch anchor, on the same GPU in the same command (issue 15's speed table).

For each model (`NAME=PREFIX:CONFIG_DIR`: a fusion-compile prefix of a
`fusion-import --whole-model` module, and the directory of its config.json)
and batch:
  fusion   `fusion-generate --random-weights 1` with a prompt of --prompt ids
           per sequence (the engine's prefill: chunks of up to the default
           --prefill-rows rows, at least B: fusion-generate prints the
           count),
           then --steps decode steps replayed from its CUDA graph; the time
           is fusion-generate's own "decode: ... us/step" (host-timed around
           Engine::generate: the steps enqueued back to back, each step's
           input tokens copied from the last one's argmax on the GPU, the
           ids downloaded once at the end).
  anchor   a plain PyTorch Llama decode step (RMSNorm, packed QKV, RoPE,
           static KV cache, SDPA with GQA, o_proj, SwiGLU MLP, final norm, LM
           head, argmax) compiled with torch.compile(mode="reduce-overhead")
           (CUDA graphs): gpt-fast's recipe, what a PyTorch user gets without
           a serving engine (after ../shared/tools/gptfast_baseline.py).
           Random fp16/bf16 weights of the config's shapes, a static cache of
           prompt + steps tokens, timed with CUDA events over the same
           positions prompt .. prompt + steps - 1 (Python loop included, as
           gpt-fast reports tokens/s).
The floor is every weight a step reads (the layers, the final norm and the LM
head; of the embedding table only B rows) plus the KV cache at the mean
context (prompt + steps / 2), over the read bandwidth of bench.py's
16-byte-load kernel. Prints a table and writes JSON (--out).

Known biases: ours is timed on the host around all the steps, the anchor with
CUDA events; at batch 1 our engine re-captures its CUDA graph when the split
count grows (every 64 tokens of context: twice in the default 512 + 127),
inside the timed steps.
Each model's compile takes the anchor about 40 s: one --model per device
command keeps a run inside its limit.

    python3 bench/model.py --fusion-generate /tmp/rt/tools/fusion-generate \\
        --model smollm2=out/smollm2.decode:models/smollm2 --batches 1,16
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def read_config(directory):
    """The shapes of a Hugging Face Llama-family config.json."""
    with open(os.path.join(directory, "config.json")) as f:
        c = json.load(f)
    hq = c["num_attention_heads"]
    hkv = c.get("num_key_value_heads") or hq
    rope = c.get("rope_parameters") or {}
    return dict(H=c["hidden_size"], I=c["intermediate_size"],
                L=c["num_hidden_layers"], V=c["vocab_size"], Hq=hq, Hkv=hkv,
                D=c.get("head_dim") or c["hidden_size"] // hq,
                eps=c["rms_norm_eps"],
                theta=rope.get("rope_theta", c.get("rope_theta", 10000.0)),
                tied=bool(c.get("tie_word_embeddings", False)))


def weight_bytes(c, element_bytes=2):
    """Bytes of the weights a decode step reads: every layer's, the final
    norm and the LM head once (tied or not). The embedding lookup reads B
    rows of its table, not counted. (Issue 15's table counted the untied
    table too: 1.05 GB more for the Llama-3-8B shape.)"""
    H, I, D = c["H"], c["I"], c["D"]
    layer = ((c["Hq"] + 2 * c["Hkv"]) * D * H + H * c["Hq"] * D + 3 * I * H
             + 2 * H)
    return element_bytes * (c["L"] * layer + c["V"] * H + H)


def kv_bytes(c, batch, context, element_bytes=2):
    """Bytes of K and V a step reads at `context` tokens per sequence."""
    return element_bytes * c["L"] * 2 * c["Hkv"] * c["D"] * context * batch


def run_fusion(generate, prefix, config_dir, batch, prompt, steps, dtype):
    """Our engine's decode microseconds per step (fusion-generate)."""
    with tempfile.NamedTemporaryFile("w", suffix=".ids", delete=False) as f:
        # Ids below 100 exist in every vocabulary; the weights are random.
        f.write(" ".join(str(3 + i % 97) for i in range(prompt)))
        ids = f.name
    try:
        cmd = [generate, "--model", prefix, "--checkpoint", config_dir,
               "--random-weights", "1", "--ids-file", ids, "--batch",
               str(batch), "--max-new-tokens", str(steps + 1), "--dtype",
               dtype]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(ids)
    m = re.search(r"^decode: (\d+) steps x batch (\d+) in [0-9.]+ ms: "
                  r"([0-9.]+) us/step", out.stdout, re.M)
    if out.returncode != 0 or not m:
        raise RuntimeError(f"{' '.join(cmd)} failed ({out.returncode}):\n"
                           f"{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return float(m.group(3))


def anchor_model(c, batch, ctx, dtype):
    """The gpt-fast-style model (torch imported here, so that the module
    loads without it). Its weights, caches and tables are buffers of an
    nn.Module, so torch.compile treats them as static addresses: its CUDA
    graphs neither copy them nor refuse the in-place cache writes."""
    import torch
    import torch.nn.functional as F

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            dev = "cuda"
            g = torch.Generator(device=dev).manual_seed(0)

            def rand(*shape):
                return torch.randn(*shape, device=dev, dtype=dtype,
                                   generator=g) * 0.02

            H, D, Hq, Hkv = c["H"], c["D"], c["Hq"], c["Hkv"]
            self.register_buffer("embed", rand(c["V"], H))
            self.register_buffer(
                "head", self.embed if c["tied"] else rand(c["V"], H))
            self.register_buffer("ones", torch.ones(H, device=dev,
                                                    dtype=dtype))
            for i in range(c["L"]):
                self.register_buffer(f"wqkv{i}",
                                     rand((Hq + 2 * Hkv) * D, H))
                self.register_buffer(f"wo{i}", rand(H, Hq * D))
                self.register_buffer(f"w13{i}", rand(2 * c["I"], H))
                self.register_buffer(f"w2{i}", rand(H, c["I"]))
                self.register_buffer(f"k{i}", rand(batch, Hkv, ctx, D))
                self.register_buffer(f"v{i}", rand(batch, Hkv, ctx, D))
            inv = 1.0 / (c["theta"] ** (
                torch.arange(0, D, 2, device=dev).float() / D))
            angles = torch.arange(ctx, device=dev).float()[:, None] * inv
            self.register_buffer("cos", angles.cos())
            self.register_buffer("sin", angles.sin())
            self.register_buffer("rows", torch.arange(batch, device=dev))
            self.register_buffer("positions", torch.arange(ctx,
                                                           device=dev))

        def rope(self, x, pos):  # neox pairing, as Hugging Face's Llama
            x1, x2 = x.float().chunk(2, dim=-1)
            co = self.cos[pos][:, None, :]
            si = self.sin[pos][:, None, :]
            return torch.cat([x1 * co - x2 * si, x2 * co + x1 * si],
                             -1).to(dtype)

        def forward(self, ids, pos):
            H, D, Hq, Hkv, eps = c["H"], c["D"], c["Hq"], c["Hkv"], c["eps"]
            h = self.embed[ids]
            mask = (self.positions[None, :] <= pos[:, None])[:, None,
                                                             None, :]
            for i in range(c["L"]):
                kc, vc = getattr(self, f"k{i}"), getattr(self, f"v{i}")
                n = F.rms_norm(h, (H,), self.ones, eps)
                q, k, v = (n @ getattr(self, f"wqkv{i}").t()).split(
                    [Hq * D, Hkv * D, Hkv * D], -1)
                q = self.rope(q.view(-1, Hq, D), pos)
                kc[self.rows, :, pos] = self.rope(k.view(-1, Hkv, D), pos)
                vc[self.rows, :, pos] = v.view(-1, Hkv, D)
                a = F.scaled_dot_product_attention(
                    q[:, :, None, :], kc, vc, attn_mask=mask,
                    enable_gqa=True)
                h = h + a.reshape(-1, Hq * D) @ getattr(self, f"wo{i}").t()
                n = F.rms_norm(h, (H,), self.ones, eps)
                gate, up = (n @ getattr(self, f"w13{i}").t()).chunk(2, -1)
                h = h + (F.silu(gate) * up) @ getattr(self, f"w2{i}").t()
            n = F.rms_norm(h, (H,), self.ones, eps)
            return (n @ self.head.t()).argmax(-1)

    return Model()


def run_anchor(c, batch, prompt, steps, dtype):
    """The gpt-fast-style step's microseconds per step, over the positions
    prompt .. prompt + steps - 1 of a cache of prompt + steps tokens."""
    import torch
    import torch._dynamo.utils

    dt = {"f16": torch.float16, "bf16": torch.bfloat16}[dtype]
    torch.set_grad_enabled(False)
    model = anchor_model(c, batch, prompt + steps, dt)
    compiled = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    ids = torch.randint(0, c["V"], (batch,), device="cuda")
    pos = [torch.full((batch,), prompt + i, device="cuda", dtype=torch.long)
           for i in range(steps)]
    skips = torch._dynamo.utils.counters["inductor"]["cudagraph_skips"]
    for i in range(3):  # compile and capture
        torch.compiler.cudagraph_mark_step_begin()
        ids = compiled(ids, pos[i]).clone()
    if torch._dynamo.utils.counters["inductor"]["cudagraph_skips"] != skips:
        raise RuntimeError("the anchor ran without CUDA graphs "
                           "(torch.compile skipped them)")
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    for p in pos:
        torch.compiler.cudagraph_mark_step_begin()
        ids = compiled(ids, p).clone()
    end.record()
    torch.cuda.synchronize()
    us = start.elapsed_time(end) * 1e3 / steps
    del model, compiled
    torch._dynamo.reset()
    torch.cuda.empty_cache()
    return us


def parse_model(text):
    name, _, rest = text.partition("=")
    prefix, _, config_dir = rest.partition(":")
    if not (name and prefix and config_dir):
        raise argparse.ArgumentTypeError(
            f"--model {text!r} is not NAME=PREFIX:CONFIG_DIR")
    return name, prefix, config_dir


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fusion-generate", required=True)
    ap.add_argument("--model", type=parse_model, action="append",
                    required=True, help="NAME=PREFIX:CONFIG_DIR (repeatable)")
    ap.add_argument("--batches", default="1,16")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--steps", type=int, default=127)
    ap.add_argument("--dtype", choices=["f16", "bf16"], default="f16")
    ap.add_argument("--repeats", type=int, default=3,
                    help="runs of ours per row (the median is reported)")
    ap.add_argument("--no-anchor", action="store_true")
    ap.add_argument("--out", default=os.path.join(
        os.environ.get("OUT", "."), "model-bench.json"))
    a = ap.parse_args()
    if a.steps < 3:
        ap.error("--steps must be at least 3 (the anchor warms up on 3)")
    import torch
    from bench import read_bandwidth

    bandwidth = read_bandwidth()
    result = dict(gpu=torch.cuda.get_device_name(), torch=torch.__version__,
                  date=time.strftime("%Y-%m-%d"), read_TBps=bandwidth / 1e12,
                  prompt=a.prompt, steps=a.steps, dtype=a.dtype, rows=[])
    print(f"read bandwidth {bandwidth / 1e12:.2f} TB/s", flush=True)
    for name, prefix, config_dir in a.model:
        c = read_config(config_dir)
        for batch in (int(b) for b in a.batches.split(",")):
            ours = sorted(run_fusion(a.fusion_generate, prefix, config_dir,
                                     batch, a.prompt, a.steps, a.dtype)
                          for _ in range(a.repeats))
            anchor = (None if a.no_anchor else
                      run_anchor(c, batch, a.prompt, a.steps, a.dtype))
            floor = (weight_bytes(c) + kv_bytes(c, batch, a.prompt +
                                                a.steps // 2)) / bandwidth
            row = dict(model=name, batch=batch, fusion_us=ours[len(ours) // 2],
                       fusion_runs_us=ours, anchor_us=anchor,
                       floor_us=floor * 1e6)
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
            with open(a.out, "w") as f:
                json.dump(result, f, indent=1)
    print(f"{'model':12} {'B':>4} {'fusion us':>10} {'anchor us':>10} "
          f"{'floor us':>9} {'%floor':>7} {'speedup':>8}")
    for r in result["rows"]:
        anchor = r["anchor_us"]
        print(f"{r['model']:12} {r['batch']:4d} {r['fusion_us']:10.1f} "
              f"{anchor or float('nan'):10.1f} {r['floor_us']:9.1f} "
              f"{100 * r['floor_us'] / r['fusion_us']:7.1f} "
              f"{(anchor or float('nan')) / r['fusion_us']:8.2f}")


if __name__ == "__main__":
    main()
