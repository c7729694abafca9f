#!/usr/bin/env python3
"""Hugging Face transformers' numbers for the real SmolLM2-135M-Instruct model.

    make_smollm2_goldens.py --model DIR [--gguf FILE] --text FILE --out DIR

DIR is scripts/get-smollm2.sh's model directory (tools/convert-gguf's output).
Writes into --out:
  reference.json        per dtype (float32, float16, bfloat16, on the GPU):
                        teacher-forced perplexity of --text, greedy
                        continuations of PROMPTS (ids, text, and the top-2
                        logit gap of every step, to tell near-ties), plus the
                        token ids of the text and of the prompts
  activations.safetensors
                        float64 (CPU) hidden states of ACTIVATION_PROMPT after
                        the embedding and after the layers of LAYERS_SAVED, the final
                        norm's output and the last token's logits: the golden
                        of the whole-model CPU reference
With --gguf (needs the gguf package) it also checks that tools/convert-gguf
gives the tensors transformers' own GGUF loader gives and that our
tokenizer.json encodes the text and prompts as transformers' GGUF tokenizer
does once given our pre-tokenizer (see cross_check_gguf); the results go
into reference.json and a mismatch is exit status 1.

Runs on a CUDA machine with torch and transformers (the H200 image); the CPU
float64 part takes a few seconds. The greedy prompts are raw text (no chat
template), so the numbers do not depend on the template.
"""

import argparse
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):",
    "The three primary colors are",
    "Water boils at a temperature of",
    "Once upon a time, in a small village,",
]
ACTIVATION_PROMPT = "The capital of France is Paris. The capital of Germany is"
# hidden_states indices saved as layer outputs: layers 0, 1 and 14. (The last
# element of hidden_states is after the final norm: saved as final_norm.)
LAYERS_SAVED = [1, 2, 15]
NEW_TOKENS = 32
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def load(model_dir, dtype, device):
    m = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype)
    return m.to(device).eval()


@torch.no_grad()
def perplexity(model, ids):
    """exp(mean NLL) of ids[1:] given their prefixes, in one forward pass."""
    x = torch.tensor([ids], device=model.device)
    logits = model(x).logits[0, :-1].double()
    nll = torch.nn.functional.cross_entropy(logits, x[0, 1:], reduction="mean")
    return {"tokens_scored": len(ids) - 1, "mean_nll": nll.item(), "perplexity": nll.exp().item()}


@torch.no_grad()
def greedy(model, tok, prompt_ids):
    x = torch.tensor([prompt_ids], device=model.device)
    out = model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=NEW_TOKENS,
                         do_sample=False, output_scores=True, return_dict_in_generate=True,
                         pad_token_id=tok.pad_token_id)
    new = out.sequences[0, len(prompt_ids):].tolist()
    gaps = []
    for s in out.scores:
        top = torch.topk(s[0].float(), 2).values
        gaps.append(round((top[0] - top[1]).item(), 6))
    return {"ids": new, "text": tok.decode(new), "top2_gap": gaps}


@torch.no_grad()
def activations(model_dir, tok):
    model = load(model_dir, torch.float64, "cpu")
    ids = tok(ACTIVATION_PROMPT)["input_ids"]
    out = model(torch.tensor([ids]), output_hidden_states=True)
    t = {"input_ids": torch.tensor(ids, dtype=torch.int32),
         "embeddings": out.hidden_states[0][0].contiguous(),
         "final_norm": out.hidden_states[-1][0].contiguous(),
         "last_logits": out.logits[0, -1].contiguous()}
    for i in LAYERS_SAVED:
        t[f"layer_{i - 1}_output"] = out.hidden_states[i][0].contiguous()
    return t


def cross_check_gguf(model_dir, gguf_path, tok, texts):
    """Our conversion and tokenizer against transformers' GGUF loader."""
    d, f = os.path.dirname(gguf_path), os.path.basename(gguf_path)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file=f,
                                                               dtype=torch.float32)
    ours = load(model_dir, torch.float32, "cpu")
    a, b = ours.state_dict(), theirs.state_dict()
    worst = max((a[n].float() - b[n].float()).abs().max().item() for n in a)
    # transformers builds no digit split for llama.cpp's pre-tokenizer type
    # "smollm" (llama-vocab.cpp: "\\p{N}" before GPT-2's regex, as SmolLM2's
    # own tokenizer.json does), so it is compared as is and with ours swapped in.
    ttok = transformers.AutoTokenizer.from_pretrained(d, gguf_file=f)
    as_is = [tok(s)["input_ids"] == ttok(s)["input_ids"] for s in texts]
    ttok.backend_tokenizer.pre_tokenizer = tok.backend_tokenizer.pre_tokenizer
    swapped = [tok(s)["input_ids"] == ttok(s)["input_ids"] for s in texts]
    return {"tensors_compared": len(a), "names_equal": set(a) == set(b),
            "max_abs_weight_difference": worst, "tokenizer_ids_equal": as_is,
            "tokenizer_ids_equal_with_our_pre_tokenizer": swapped}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--gguf")
    ap.add_argument("--text", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tok = transformers.AutoTokenizer.from_pretrained(args.model)
    text = open(args.text, encoding="utf-8").read()
    text_ids = tok(text)["input_ids"]
    ref = {"transformers": transformers.__version__, "torch": torch.__version__,
           "device": torch.cuda.get_device_name(), "text": os.path.basename(args.text),
           "text_ids": text_ids, "prompts": PROMPTS,
           "prompt_ids": [tok(p)["input_ids"] for p in PROMPTS], "dtypes": {}}
    ok = True
    if args.gguf:
        ref["gguf_check"] = cross_check_gguf(args.model, args.gguf, tok, [text] + PROMPTS)
        g = ref["gguf_check"]
        ok = (g["names_equal"] and g["max_abs_weight_difference"] == 0
              and all(g["tokenizer_ids_equal_with_our_pre_tokenizer"]))
        print("gguf check:", json.dumps(g))
    for name, dtype in DTYPES.items():
        model = load(args.model, dtype, "cuda")
        r = {"text": perplexity(model, text_ids),
             "greedy": [greedy(model, tok, ids) for ids in ref["prompt_ids"]]}
        ref["dtypes"][name] = r
        print(f"{name}: perplexity {r['text']['perplexity']:.4f}; "
              f"'{PROMPTS[0]}' -> {r['greedy'][0]['text']!r}")
        del model
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1)
    save_file(activations(args.model, tok), os.path.join(args.out, "activations.safetensors"))
    print("wrote", args.out, "" if ok else "(GGUF CHECK FAILED)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
