#!/usr/bin/env python3
"""The fused front half dropped into a Hugging Face transformers Llama model.

Greedy generation of the same prompts three ways, on a GPU with PyTorch and
transformers:
  transformers   ``model.generate``: eager, its own attention and cache;
  torch graph    the decode loop of ``fusion.hf.LlamaDecoder`` with the
                 transformers path in each layer instead of our op (input
                 RMSNorm, q/k/v projections, its RoPE, a cache write, SDPA
                 over the whole static cache with a length mask: gpt-fast's
                 method), every step one CUDA graph;
  fusion graph   ``fusion.hf.LlamaDecoder``: ``torch.ops.fusion.front_half``
                 in each layer, every step one CUDA graph.

    python3 scripts/hf_dropin.py --checkpoint build/models/smollm2 \\
        --layer <fusion-compile output of fusion-import config.json --dtype=f16>

Prints, per batch size, whether fusion's tokens are identical to
transformers' (and where each row first differs), and the decode time per
step of each
(CUDA events around generate(N) minus generate(1), divided by N - 1; the
better of two runs); --out writes it as JSON. Exit status 0 iff the tokens
are identical.
"""

import argparse
import json
import sys

import torch
import torch.nn.functional as F
import transformers
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

import fusion.hf

PROMPTS = [
    "The capital of France is",
    "Here is a short story about a robot who learns to paint:",
    "The three primary colors are",
    "To make a cup of tea, first",
]


class TorchAttentionDecoder(fusion.hf.LlamaDecoder):
    """The same decode loop and caches with the transformers attention path."""

    @torch.no_grad()
    def step(self, tokens, positions):
        model, batch = self.model, tokens.shape[0]
        x = model.model.embed_tokens(tokens)[:, None]
        cos, sin = model.model.rotary_emb(x, positions.long()[:, None])
        rows = torch.arange(batch, device=tokens.device)
        for i, layer in enumerate(self.layers):
            a = layer.self_attn
            h = layer.input_layernorm(x)
            q, k, v = (proj(h).view(batch, 1, -1, a.head_dim).transpose(1, 2)
                       for proj in (a.q_proj, a.k_proj, a.v_proj))
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
            cache = self.kv[i].view(2, -1, self.pages_per_seq * self.kv[i].shape[2],
                                    *self.kv[i].shape[3:])[:, :batch]
            cache[0, rows, positions.long()] = k[:, :, 0]
            cache[1, rows, positions.long()] = v[:, :, 0]
            mask = (torch.arange(cache.shape[2], device=x.device) <= positions[:, None])
            o = F.scaled_dot_product_attention(
                q, cache[0].transpose(1, 2), cache[1].transpose(1, 2),
                attn_mask=mask[:, None, None, :], scale=a.scaling, enable_gqa=True)
            x = x + a.o_proj(o.transpose(1, 2).reshape(batch, 1, -1))
            x = x + layer.mlp(layer.post_attention_layernorm(x))
        return model.lm_head(model.model.norm(x))[:, 0].argmax(-1)


def decode_ms(run, new_tokens):
    """Milliseconds per decode step of run(n) (generates n tokens)."""
    best = float("inf")
    for _ in range(2):
        times = []
        for n in (1, new_tokens):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run(n)
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        best = min(best, (times[1] - times[0]) / (new_tokens - 1))
    return best


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--layer", required=True, help="compiled front half (path prefix)")
    p.add_argument("--batches", default="1,4")
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--out")
    args = p.parse_args()

    tokenizer = transformers.AutoTokenizer.from_pretrained(args.checkpoint)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        args.checkpoint, dtype=torch.float16).cuda().eval()
    model.generation_config.eos_token_id = None  # always generate --new-tokens
    batches = [int(b) for b in args.batches.split(",")]
    decoder = fusion.hf.LlamaDecoder(model, args.layer, max_batch=max(batches), max_len=512)
    baseline = TorchAttentionDecoder(model, args.layer, max_batch=max(batches), max_len=512)
    report, same = [], True
    for batch in batches:
        ids = [tokenizer(t)["input_ids"] for t in (PROMPTS * batch)[:batch]]
        length = min(len(i) for i in ids)
        input_ids = torch.tensor([i[:length] for i in ids], device="cuda")

        def hf(n):
            return model.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                                  max_new_tokens=n, do_sample=False,
                                  pad_token_id=tokenizer.eos_token_id)[:, length:]

        def ours(n):
            return decoder.generate(input_ids, n)

        def torch_graph(n):
            return baseline.generate(input_ids, n)

        expected, got = hf(args.new_tokens), ours(args.new_tokens)
        torch_tokens = torch_graph(args.new_tokens)
        rows = []
        for b in range(batch):
            diff = (expected[b] != got[b]).nonzero()
            rows.append({"prompt": tokenizer.decode(input_ids[b]),
                         "transformers": tokenizer.decode(expected[b]),
                         "fusion": tokenizer.decode(got[b]),
                         "first_difference": int(diff[0]) if len(diff) else None})
        same &= bool(torch.equal(expected, got))
        entry = {"batch": batch, "prompt_tokens": length, "new_tokens": args.new_tokens,
                 "identical": bool(torch.equal(expected, got)),
                 "torch_graph_identical": bool(torch.equal(expected, torch_tokens)),
                 "rows": rows,
                 "transformers_ms_per_step": decode_ms(hf, args.new_tokens),
                 "torch_graph_ms_per_step": decode_ms(torch_graph, args.new_tokens),
                 "fusion_graph_ms_per_step": decode_ms(ours, args.new_tokens)}
        report.append(entry)
        print(f"B={batch}: identical={entry['identical']} "
              f"(torch graph: {entry['torch_graph_identical']}); ms/step: "
              f"transformers {entry['transformers_ms_per_step']:.3f}, "
              f"torch graph {entry['torch_graph_ms_per_step']:.3f}, "
              f"fusion graph {entry['fusion_graph_ms_per_step']:.3f}")
        for r in rows:
            print(f"  {r['prompt']!r} -> {r['fusion']!r}"
                  + ("" if r["first_difference"] is None else
                     f"  [transformers differs from token {r['first_difference']}: "
                     f"{r['transformers']!r}]"))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "transformers": transformers.__version__, "runs": report}, f, indent=1)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
