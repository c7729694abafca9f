#!/usr/bin/env python3
"""Tests scripts/generate.py without a GPU: a stand-in for fusion-generate
(written here) records the command line and ids it gets and prints ids and
log-probs as fusion-generate does; a word-level tokenizer.json (written with
the `tokenizers` package) turns them into text. Needs tokenizers.
"""

import os
import subprocess
import sys
import tempfile
import unittest

from tokenizers import Tokenizer, models, pre_tokenizers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "scripts", "generate.py")
WORDS = ["<unk>", "the", "capital", "of", "france", "is", "paris", "."]

# Prints the ids it was given as the continuation of sequence 0, reversed,
# and 5, 6 ("is paris") for sequence 1; with --score, one log-prob per id
# after the first. Records its arguments.
STUB = """#!/bin/sh
echo "$@" > "$(dirname "$0")/args"
ids_file=""
score=0
while [ $# -gt 0 ]; do
  case "$1" in
    --ids-file) ids_file=$2; shift ;;
    --score) score=1 ;;
  esac
  shift
done
ids=$(cat "$ids_file")
if [ $score = 1 ]; then
  i=0
  for id in $ids; do
    [ $i -gt 0 ] && echo "logprob $i $id -0.5"
    i=$((i + 1))
  done
  echo "perplexity: 1.648721 (mean negative log-prob 0.500000 over $((i - 1)) tokens)"
  exit 0
fi
echo "ids 0: $(echo $ids | tr ' ' '\\n' | tac | tr '\\n' ' ')"
echo "ids 1: 5 6"
echo "decode: 1 steps x batch 2 in 0.100 ms: 100.0 us/step, 20000.0 tokens/s"
"""


class GeneratePyTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(WORDS)},
                                         unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.Whitespace()
        tok.save(os.path.join(d, "tokenizer.json"))
        self.stub = os.path.join(d, "fusion-generate")
        with open(self.stub, "w") as f:
            f.write(STUB)
        os.chmod(self.stub, 0o755)

    def tearDown(self):
        self.tmp.cleanup()

    def run_script(self, *args):
        cmd = [sys.executable, SCRIPT, "--model", "out/m", "--checkpoint",
               self.tmp.name, "--fusion-generate", self.stub, *args]
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    def stub_args(self):
        with open(os.path.join(self.tmp.name, "args")) as f:
            return f.read().split()

    def test_generation_decodes_the_ids(self):
        out = self.run_script("the capital of", "--batch", "2", "--max-new-tokens", "4",
                              "--", "--no-graph")
        self.assertIn("3 tokens", out)
        # Sequence 0 gets the prompt's ids (1 2 3) reversed: "of capital the".
        self.assertIn("[0] the capital ofof capital the", out)
        self.assertIn("[1] the capital ofis paris", out)
        self.assertIn("20000.0 tokens/s", out)
        args = self.stub_args()
        self.assertEqual(args[:4], ["--model", "out/m", "--checkpoint", self.tmp.name])
        for flag, value in [("--batch", "2"), ("--max-new-tokens", "4")]:
            self.assertEqual(args[args.index(flag) + 1], value)
        self.assertEqual(args[-1], "--no-graph")

    def test_score_reports_the_perplexity(self):
        out = self.run_script("--score", "the capital of france", "--show-tokens")
        self.assertIn("perplexity: 1.648721", out)
        self.assertIn("logprob 3 4 -0.5  'france'", out)
        self.assertNotIn("--batch", self.stub_args())
        self.assertNotIn("logprob", self.run_script("--score", "the capital"))

    def test_text_from_a_file(self):
        path = os.path.join(self.tmp.name, "text.txt")
        with open(path, "w") as f:
            f.write("paris is")
        out = self.run_script("--file", path, "--max-new-tokens", "1")
        self.assertIn("[0] paris isis paris", out)


if __name__ == "__main__":
    unittest.main()
