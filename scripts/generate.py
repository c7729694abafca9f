#!/usr/bin/env python3
"""Text in, text out around fusion-generate, which reads and prints token ids.

Greedy generation (--batch copies of the prompt as that many sequences):

  scripts/generate.py --model out/smollm2 --checkpoint build/models/smollm2 \\
      "The capital of France is"

Scoring: the log-probability of every token but the first and the perplexity,
the number test/golden/smollm2/reference.json holds for the Apache-2.0 text:

  scripts/generate.py --model out/smollm2 --checkpoint build/models/smollm2 \\
      --score --file /usr/share/common-licenses/Apache-2.0

The text is tokenized with the checkpoint's tokenizer.json (the `tokenizers`
package) without special tokens (no BOS), as test/golden/make_smollm2_goldens.py
tokenized it; generated ids are decoded with the same tokenizer. --model is the
prefix fusion-compile wrote (PREFIX.ptx, PREFIX.manifest.json) for the output of
`fusion-import --whole-model` of the checkpoint's config.json. Arguments after
`--` go to fusion-generate unchanged (e.g. `-- --no-graph --device 1`).
Exit status: fusion-generate's (77: no CUDA device).
"""

import argparse
import os
import subprocess
import sys
import tempfile

from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_BINARY = os.path.join(ROOT, "build", "bin", "fusion-generate")


def parse_args(argv):
    extra = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("text", nargs="?", help="the prompt (or, with --score, the text)")
    p.add_argument("--file", help="read the text from FILE instead")
    p.add_argument("--model", required=True, help="fusion-compile's output prefix")
    p.add_argument("--checkpoint", required=True,
                   help="Hugging Face directory: config.json, safetensors, tokenizer.json")
    p.add_argument("--dtype", choices=["f16", "bf16"])
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--score", action="store_true",
                   help="print log-probs and the perplexity instead of generating")
    p.add_argument("--show-tokens", action="store_true",
                   help="with --score, print each token's text next to its log-prob")
    p.add_argument("--fusion-generate", default=DEFAULT_BINARY,
                   help="the fusion-generate binary (default: build/bin/fusion-generate)")
    args = p.parse_args(argv)
    if (args.text is None) == (args.file is None):
        p.error("give the text as an argument or with --file, not both")
    return args, extra


def command(args, ids_file, extra):
    cmd = [args.fusion_generate, "--model", args.model, "--checkpoint",
           args.checkpoint, "--ids-file", ids_file]
    if args.dtype:
        cmd += ["--dtype", args.dtype]
    if args.score:
        cmd.append("--score")
    else:
        cmd += ["--batch", str(args.batch), "--max-new-tokens", str(args.max_new_tokens)]
    return cmd + extra


def report(args, tok, prompt, out):
    """fusion-generate's output with ids turned into text."""
    for line in out.splitlines():
        if line.startswith("ids "):
            seq, ids = line[len("ids "):].split(":", 1)
            new = [int(i) for i in ids.split()]
            print(f"[{seq}] {prompt}{tok.decode(new, skip_special_tokens=False)}")
        elif line.startswith("logprob "):
            if args.show_tokens:
                token = int(line.split()[2])
                print(f"{line}  {tok.decode([token])!r}")
        else:
            print(line)


def main(argv):
    args, extra = parse_args(argv)
    tok = Tokenizer.from_file(os.path.join(args.checkpoint, "tokenizer.json"))
    if args.file:
        with open(args.file, encoding="utf-8") as f:
            text = f.read()
    else:
        text = args.text
    ids = tok.encode(text, add_special_tokens=False).ids
    if not ids:
        sys.exit("generate.py: the text has no tokens")
    with tempfile.TemporaryDirectory() as tmp:
        ids_file = os.path.join(tmp, "text.ids")
        with open(ids_file, "w") as f:
            f.write(" ".join(str(i) for i in ids) + "\n")
        proc = subprocess.run(command(args, ids_file, extra), capture_output=True, text=True)
    sys.stderr.write(proc.stderr)
    if proc.returncode != 0:
        sys.stdout.write(proc.stdout)
        return proc.returncode
    print(f"{len(ids)} tokens")
    report(args, tok, "" if args.score else text, proc.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
