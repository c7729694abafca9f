#!/usr/bin/env python3
"""Deterministic fuzz smoke test of the command-line tools.

Feeds the tools malformed and unusual input, from fixed seeds, and fails on
what a user must never see:

  * a crash: a signal exit, `LLVM ERROR`, an LLVM stack dump, a sanitizer
    report, an uncaught C++ exception;
  * a hang: a run past its time limit, or one that needs more memory than
    the limit (input must be checked against capacity before allocating);
  * invalid output accepted: `fusion-compile` exit 0 with PTX that `ptxas`
    rejects (when ptxas is installed), with a manifest and PTX that the
    runtime rejects (`fusion-run --inspect`), or without both of its files;
  * leftovers: any file a failed run leaves in its output directory.

A clean error (exit 1 with a message) is the expected answer to bad input.
Groups (counts at --scale 1):

  ir        IR mutations of the example layers and of a decode step with the
            back-half ops -> fusion-opt, fusion-compile
  generated layer modules from random valid configs -> fusion-import ->
            fusion-compile (these must succeed)
  options   odd option values of fusion-compile, fusion-opt, fusion-import
  config    mutated Hugging Face config.json files -> fusion-import
  runtime   corrupted manifests, PTX, safetensors, checkpoint indexes and
            configs -> fusion-run --dry-run

    fuzz_smoke.py --bin build/bin --fusion-run build/bin/fusion-run
    fuzz_smoke.py ... --only config --scale 0.2 -v

Exit status 0 when no case fails; each failure prints the case, the command
and the evidence, and the files of the case stay under --keep DIR if given.
"""

import argparse
import concurrent.futures
import json
import os
import random
import re
import resource
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CRASH_MARKERS = [
    "LLVM ERROR", "PLEASE submit a bug report", "Stack dump:", "AddressSanitizer",
    "LeakSanitizer", "UndefinedBehaviorSanitizer", "runtime error:", "terminate called",
    "Segmentation fault", "core dumped", "std::bad_alloc", "Assertion `",
]

# Values that find boundary bugs: zero, signs, powers of two at the 32- and
# 64-bit limits, odd sizes.
ODD_INTS = [0, 1, -1, 2, 3, 7, 63, 65, 1000, 2050, 65535, 65536, 2**31 - 1, 2**31,
            2**32, 2**53, 2**63 - 1, -2**31, -2**63]
ODD_FLOATS = ["0.0", "-1.0", "0.5", "1.0e-30", "1.0e+300", "-0.0", "3.0e+38", "4.9e-324", "0x7FC00000",
              "0x7FF0000000000000"]
ODD_NAMES = ['"a b"', '"a-b"', '"\u00fc"', '"a.b"', '"1x"', '""', 'x' * 300, '"a\\0b"',
             "decode_layer", "_", "a$b"]
ODD_JSON = [0, -1, 1, 1e-30, 0.5, 2**31 - 1, 2**31, 2**53 + 1, 2**63, 2**64, -2**63, 1e308,
            float("inf"), "", "f16", "batch", "../x", None, True, [], {}, [1, 2], {"a": 1}]


class Result:
    def __init__(self, rc, out, err, timed_out):
        self.rc, self.out, self.err, self.timed_out = rc, out, err, timed_out


class Fuzz:
    """Runs tools and collects failures."""

    def __init__(self, args):
        self.bin = args.bin
        self.fusion_run = args.fusion_run
        self.ptxas = args.ptxas
        self.timeout = args.timeout
        self.memory_limit_mb = args.memory_limit_mb
        self.keep = args.keep
        self.verbose = args.verbose
        self.work = tempfile.mkdtemp(prefix="fusion-fuzz-")
        self.env = dict(os.environ, LC_ALL="C")

    def tool(self, name):
        return os.path.join(self.bin, name)

    def limit_memory(self):
        if self.memory_limit_mb:
            limit = self.memory_limit_mb << 20
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def run(self, cmd, timeout=None, cwd=None):
        try:
            p = subprocess.run(cmd, capture_output=True, timeout=timeout or self.timeout,
                               cwd=cwd, env=self.env, preexec_fn=self.limit_memory)
            return Result(p.returncode, p.stdout.decode("utf-8", "replace"),
                          p.stderr.decode("utf-8", "replace"), False)
        except subprocess.TimeoutExpired as e:
            return Result(None, "", (e.stderr or b"").decode("utf-8", "replace"), True)

    @staticmethod
    def crash(res):
        """The evidence that a run crashed or hung, or None."""
        if res.timed_out:
            return "timeout"
        if res.rc < 0:
            return f"signal {-res.rc}: " + " | ".join(res.err.strip().splitlines()[:3])[:400]
        for marker in CRASH_MARKERS:
            if marker in res.err or marker in res.out:
                line = next((l for l in (res.err + res.out).splitlines() if marker in l), marker)
                return f"exit {res.rc}, '{marker}': {line.strip()[:300]}"
        return None

    def check_ptx(self, ptx, chip):
        """ptxas's complaint about a PTX file, or None (None too without ptxas)."""
        if not self.ptxas:
            return None
        res = self.run([self.ptxas, f"-arch={chip}", ptx, "-o", os.devnull], timeout=120)
        if res.timed_out or res.rc != 0:
            return "ptxas rejects the PTX of an exit-0 compile: " + res.err.strip()[-400:]
        return None

    def import_config(self, case_dir, cfg, options=()):
        """fusion-import cfg into case_dir/layer.mlir. Returns (the module's
        path or None where it was refused, the failures, the command and its
        result)."""
        out = os.path.join(case_dir, "layer.mlir")
        cmd = [self.tool("fusion-import"), cfg, "-o", out, *options]
        res = self.run(cmd)
        evidence = self.crash(res)
        if evidence:
            return None, [(cmd, evidence)], cmd, res
        if res.rc != 0:
            left = [(cmd, f"exit {res.rc} left {out}")] if os.path.exists(out) else []
            return None, left, cmd, res
        return out, [], cmd, res

    def check_manifest(self, prefix):
        """The runtime's complaint about an exit-0 compile's manifest and PTX
        (fusion-run --inspect validates both), or None (None too without
        fusion-run)."""
        if not self.fusion_run:
            return None
        res = self.run([self.fusion_run, "--ptx", prefix + ".ptx", "--manifest", prefix + ".manifest.json",
                        "--inspect"])
        if res.timed_out or res.rc != 0:
            return "the runtime rejects the output of an exit-0 compile: " + res.err.strip()[-400:]
        return None

    def compile(self, case_dir, src, options=(), chip="sm_90"):
        """fusion-compile src into case_dir/out/; returns failures."""
        out_dir = os.path.join(case_dir, "out")
        os.makedirs(out_dir, exist_ok=True)
        cmd = [self.tool("fusion-compile"), src, "-o", os.path.join(out_dir, "m"), *options]
        res = self.run(cmd)
        problems = []
        evidence = self.crash(res)
        if evidence:
            problems.append((cmd, evidence))
        elif res.rc == 0:
            files = sorted(os.listdir(out_dir))
            if files != ["m.manifest.json", "m.ptx"]:
                problems.append((cmd, f"exit 0 but {out_dir} holds {files}"))
            else:
                bad = self.check_ptx(os.path.join(out_dir, "m.ptx"), chip) or \
                    self.check_manifest(os.path.join(out_dir, "m"))
                if bad:
                    problems.append((cmd, bad))
        else:
            left = os.listdir(out_dir)
            if left:
                problems.append((cmd, f"exit {res.rc} left {left} behind"))
        shutil.rmtree(out_dir, ignore_errors=True)
        return res, problems


# ---------------------------------------------------------------------------
# Mutators
# ---------------------------------------------------------------------------

def mutate_ir(text, rng):
    """One random textual mutation of an MLIR module."""
    kind = rng.choice(["int", "int", "float", "type", "dim", "name", "drop_line", "dup_line",
                       "swap_ssa", "truncate", "attr", "bytes"])
    if kind == "int":
        spots = [m for m in re.finditer(r"(?<![\w.%#@x])\d+(?![\w.])", text)]
        if spots:
            m = rng.choice(spots)
            return text[:m.start()] + str(rng.choice(ODD_INTS)) + text[m.end():]
    if kind == "float":
        spots = list(re.finditer(r"\d+\.\d+(e[+-]?\d+)?", text))
        if spots:
            m = rng.choice(spots)
            return text[:m.start()] + rng.choice(ODD_FLOATS) + text[m.end():]
    if kind == "type":
        spots = list(re.finditer(r"\b(f16|bf16|f32|i32|i64)\b", text))
        if spots:
            m = rng.choice(spots)
            return text[:m.start()] + rng.choice(["f16", "bf16", "f32", "f64", "i32", "i64", "i1"]) + text[m.end():]
    if kind == "dim":
        spots = list(re.finditer(r"(?<=[<x])(\?|\d+)(?=x)", text))
        if spots:
            m = rng.choice(spots)
            return text[:m.start()] + rng.choice(["?", "0", "1", "3", "4097", "65536", "2147483648"]) + text[m.end():]
    if kind == "name":
        spots = list(re.finditer(r"@[\w$]+", text))
        if spots:
            m = rng.choice(spots)
            return text[:m.start()] + "@" + rng.choice(ODD_NAMES) + text[m.end():]
    if kind == "attr":
        spots = list(re.finditer(r"(\w+) = ([^,}]+)", text))
        if spots:
            m = rng.choice(spots)
            return text[:m.start()] + text[m.end():] if rng.random() < 0.5 else \
                text[:m.start(2)] + rng.choice(["-1", "0", '"x"', "[]", "unit", "1.5 : f32"]) + text[m.end(2):]
    lines = text.split("\n")
    code = [i for i, l in enumerate(lines) if l.strip() and not l.strip().startswith("//")]
    if kind == "drop_line" and code:
        del lines[rng.choice(code)]
        return "\n".join(lines)
    if kind == "dup_line" and code:
        i = rng.choice(code)
        lines.insert(rng.choice(code), lines[i])
        return "\n".join(lines)
    if kind == "swap_ssa":
        names = sorted(set(re.findall(r"%\w+", text)))
        if len(names) >= 2:
            a, b = rng.sample(names, 2)
            spots = [m for m in re.finditer(re.escape(a) + r"\b", text)]
            m = rng.choice(spots)
            return text[:m.start()] + b + text[m.end():]
    if kind == "truncate":
        return text[:rng.randrange(len(text))]
    data = bytearray(text.encode())
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(len(data))] = rng.choice(b"{}()<>[]:,%@\"\\x0\xff")
    return data.decode("utf-8", "replace")


def json_paths(value, path=()):
    """Every (path, value) in a JSON value, depth first."""
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from json_paths(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from json_paths(v, path + (i,))


def json_set(root, path, value, delete=False):
    node = root
    for key in path[:-1]:
        node = node[key]
    if delete:
        del node[path[-1]]
    else:
        node[path[-1]] = value


def mutate_json(obj, rng, n=None):
    """A deep copy of obj with 1-3 random member changes (new value, removed
    member, changed type)."""
    obj = json.loads(json.dumps(obj))
    for _ in range(n or rng.randint(1, 3)):
        paths = [p for p, _ in json_paths(obj) if p]
        if not paths:
            break
        path = rng.choice(paths)
        old = dict(json_paths(obj))[path]
        if rng.random() < 0.2:
            json_set(obj, path, None, delete=True)
        elif isinstance(old, (int, float)) and not isinstance(old, bool) and rng.random() < 0.5:
            json_set(obj, path, rng.choice([old * 2, old + 1, old - 1, -old, old * 65536, 0]))
        else:
            json_set(obj, path, rng.choice(ODD_JSON))
    return obj


def dump_json(obj):
    # inf/nan are not JSON, which is itself a useful malformed input.
    return json.dumps(obj, indent=1)


def corrupt_bytes(data, rng):
    data = bytearray(data)
    kind = rng.choice(["flip", "truncate", "insert"])
    if kind == "truncate" or not data:
        return bytes(data[:rng.randrange(len(data) + 1)])
    if kind == "insert":
        i = rng.randrange(len(data))
        return bytes(data[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 16))) + data[i:])
    for _ in range(rng.randint(1, 8)):
        data[rng.randrange(len(data))] = rng.randrange(256)
    return bytes(data)


def deep_nesting(depth=40000):
    return '{"x": ' + "[" * depth


# ---------------------------------------------------------------------------
# Groups
# ---------------------------------------------------------------------------

# The example layers, and a whole decode step with the back-half ops (linear,
# silu_mul, embedding, argmax), which fusion-compile must reject cleanly until
# they have a GPU lowering.
IR_BASES = ["examples/tinyllama_1_1b.mlir", "examples/qwen2_7b.mlir", "examples/llama3_8b.mlir",
            "test/Transforms/form-kernels-back-half.mlir"]


def ir_case(fz, seed, case_dir):
    rng = random.Random(seed)
    base = os.path.join(ROOT, rng.choice(IR_BASES))
    text = open(base).read()
    for _ in range(rng.randint(1, 2)):
        text = mutate_ir(text, rng)
    src = os.path.join(case_dir, "in.mlir")
    with open(src, "w") as f:
        f.write(text)
    problems = []
    cmd = [fz.tool("fusion-opt"), src, "--fusion-form-kernels=strategy=" + rng.choice(["decode", "none"])]
    evidence = Fuzz.crash(fz.run(cmd))
    if evidence:
        problems.append((cmd, evidence))
    _, more = fz.compile(case_dir, src, ["--strategy=" + rng.choice(["decode", "none"])])
    return problems + more


def random_config(rng):
    """A valid LLaMA-family config.json with random (small) shapes."""
    head_dim = rng.choice([64, 80, 96, 128, 256])
    kv = rng.choice([1, 2, 3, 4, 8])
    group = rng.choice([1, 2, 3, 4, 5, 6, 7, 8])
    heads = kv * group
    hidden = rng.choice([heads * head_dim, 8 * rng.randint(8, 512)])
    model_type = rng.choice(["llama", "mistral", "qwen2"])
    cfg = {"model_type": model_type, "hidden_size": hidden, "num_attention_heads": heads,
           "num_key_value_heads": kv, "head_dim": head_dim,
           "rms_norm_eps": rng.choice([1e-5, 1e-6, 9.999999747378752e-06]),
           "rope_theta": rng.choice([10000.0, 500000.0, 1000000.0]),
           "torch_dtype": rng.choice(["float16", "bfloat16"]),
           "attention_bias": model_type == "qwen2" or rng.random() < 0.2}
    if rng.random() < 0.3:
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    if rng.random() < 0.2:
        cfg["partial_rotary_factor"] = rng.choice([0.5, 0.25])
    return cfg


def generated_case(fz, seed, case_dir):
    rng = random.Random(seed)
    cfg_path = os.path.join(case_dir, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(random_config(rng), f)
    src, problems, cmd, res = fz.import_config(
        case_dir, cfg_path, ["--page-size=" + str(rng.choice([1, 8, 16, 32])), "--residual=" + rng.choice(["on", "off"])])
    if not src:
        return problems or [(cmd, "a valid config was rejected: " + res.err.strip()[-300:])]
    chip = rng.choice(["sm_80", "sm_90"])
    options = ["--strategy=" + rng.choice(["decode", "none"]), "--chip=" + chip,
               "--sm-count=" + str(rng.choice([1, 7, 108, 132, 144]))]
    res, problems = fz.compile(case_dir, src, options, chip)
    if not problems and res.rc != 0:
        problems.append(([fz.tool("fusion-compile"), src, *options],
                         "a valid module failed to compile: " + res.err.strip()[-300:]))
    return problems


COMPILE_OPTIONS = {
    "--sm-count": ["0", "-1", "1", "2", "1000", "100000", str(2**31), str(2**63 - 1), str(-2**63), "abc", "1e3", ""],
    "--chip": ["sm_1000", "SM_90", "sm_90 ", "sm_-1", "garbage", "", "sm_80", "sm_86", "sm_90a", "sm_52", "sm_9"],
    "--features": ["garbage", "", "+ptx80", "+ptx60", "-ptx80", "+ptx999"],
    "--strategy": ["decode", "none", "single", "garbage", ""],
    "--dump-mlir": ["/dev/null", "-", "", "{case}", "{case}/out/m.ptx", "{case}/dump/d.mlir", "{input}"],
}
OPT_PIPELINES = [
    "--fusion-form-kernels=strategy={}", "--fusion-to-ptx=chip={}", "--fusion-to-ptx=format={}",
    "--fusion-to-ptx=sm-count={}", "--fusion-to-ptx=features={}", "--fusion-to-ptx=opt-level={}",
    "--convert-fusion-to-gpu=sm-count={}", "--convert-fusion-to-gpu=target-sm={}",
]
OPT_VALUES = ["decode", "none", "garbage", "", "sm_90", "sm_1000", "SM_90", "isa", "bin", "fatbin", "0", "-1",
              "3", str(2**31), str(2**63 - 1), "+ptx80", "sm_80"]
IMPORT_OPTIONS = {
    "--dtype": ["f16", "bf16", "f32", "garbage", ""],
    "--page-size": ["0", "-1", "1", "3", "16", str(2**31), str(2**53), str(2**63 - 1), "x"],
    "--residual": ["on", "off", "maybe", ""],
    "--function-name": ODD_NAMES,
}


def options_case(fz, seed, case_dir):
    rng = random.Random(seed)
    base = os.path.join(ROOT, "examples/tinyllama_1_1b.mlir")
    tool = rng.choice(["compile", "compile", "opt", "import"])
    if tool == "compile":
        base = shutil.copy(base, case_dir)  # --dump-mlir may name the input
        keys = rng.sample(sorted(COMPILE_OPTIONS), rng.randint(1, 3))
        options = [f"{k}={rng.choice(COMPILE_OPTIONS[k])}".format(case=case_dir, input=base) for k in keys]
        chip = next((o.split("=", 1)[1] for o in options if o.startswith("--chip=")), "sm_90")
        ptx_chip = chip if re.fullmatch(r"sm_\d+a?", chip) else "sm_90"
        return fz.compile(case_dir, base, options, ptx_chip)[1]
    if tool == "opt":
        cmd = [fz.tool("fusion-opt"), base]
        if rng.random() < 0.5:
            cmd.append("--fusion-form-kernels")
        cmd.append(rng.choice(OPT_PIPELINES).format(rng.choice(OPT_VALUES)))
        evidence = Fuzz.crash(fz.run(cmd))
        return [(cmd, evidence)] if evidence else []
    cfg = os.path.join(ROOT, "runtime/test/data/configs", rng.choice(["llama3_8b.json", "qwen2_7b.json"]))
    keys = rng.sample(sorted(IMPORT_OPTIONS), rng.randint(1, 2))
    out, problems, _, _ = fz.import_config(case_dir, cfg, [f"{k}={rng.choice(IMPORT_OPTIONS[k])}" for k in keys])
    return fz.compile(case_dir, out)[1] if out and rng.random() < 0.5 else problems


CONFIG_BASES = ["runtime/test/data/configs/llama3_8b.json", "runtime/test/data/configs/qwen2_7b.json",
                "runtime/test/data/configs/mistral_7b_v0_3.json", "runtime/test/data/configs/tinyllama_1_1b.json",
                "test/golden/llama3_gqa/config.json", "test/golden/qwen2_bias_g7/config.json"]


def mutated_config_text(rng):
    base = json.load(open(os.path.join(ROOT, rng.choice(CONFIG_BASES))))
    roll = rng.random()
    if roll < 0.03:
        return deep_nesting(rng.choice([200, 40000]))
    if roll < 0.08:
        return corrupt_bytes(json.dumps(base).encode(), rng).decode("latin-1")
    return dump_json(mutate_json(base, rng))


def config_case(fz, seed, case_dir):
    rng = random.Random(seed)
    cfg = os.path.join(case_dir, "config.json")
    with open(cfg, "w", encoding="latin-1") as f:
        f.write(mutated_config_text(rng))
    out, problems, _, _ = fz.import_config(case_dir, cfg)
    # Compile a quarter of the accepted configs (for time). Shapes past what
    # a kernel can launch are the compiler's to reject, with a clear error.
    return fz.compile(case_dir, out)[1] if out and rng.random() < 0.25 else problems


# ---------------------------------------------------------------------------
# Runtime inputs (fusion-run --dry-run)
# ---------------------------------------------------------------------------

def safetensors_bytes(header, payload):
    h = json.dumps(header).encode()
    return struct.pack("<Q", len(h)) + h + payload


def split_safetensors(data):
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def prepare_runtime_base(fz):
    """Compiles the tiny checkpoint's layer once; returns the base files."""
    base = os.path.join(fz.work, "runtime-base")
    os.makedirs(base)
    ckpt = os.path.join(ROOT, "runtime/test/data/tiny_checkpoint")
    src = os.path.join(base, "layer.mlir")
    subprocess.run([fz.tool("fusion-import"), os.path.join(ckpt, "config.json"), "-o", src, "--residual=off"],
                   check=True, env=fz.env)
    subprocess.run([fz.tool("fusion-compile"), src, "-o", os.path.join(base, "layer")], check=True,
                   capture_output=True, env=fz.env)
    return {"ptx": os.path.join(base, "layer.ptx"), "manifest": os.path.join(base, "layer.manifest.json"),
            "checkpoint": ckpt}


def runtime_case(fz, seed, case_dir, base):
    rng = random.Random(seed)
    ptx, manifest, ckpt = base["ptx"], base["manifest"], base["checkpoint"]
    what = rng.choice(["manifest", "manifest", "manifest", "ptx", "safetensors", "index", "config"])
    extra = []
    if what == "manifest":
        manifest = os.path.join(case_dir, "m.manifest.json")
        obj = json.load(open(base["manifest"]))
        text = deep_nesting() if rng.random() < 0.02 else dump_json(mutate_json(obj, rng))
        with open(manifest, "w") as f:
            f.write(text)
    elif what == "ptx":
        ptx = os.path.join(case_dir, "m.ptx")
        with open(ptx, "wb") as f:
            f.write(corrupt_bytes(open(base["ptx"], "rb").read(), rng))
    else:
        ckpt = os.path.join(case_dir, "ckpt")
        shutil.copytree(base["checkpoint"], ckpt)
        if what == "config":
            with open(os.path.join(ckpt, "config.json"), "w", encoding="latin-1") as f:
                f.write(mutated_config_text(rng))
        elif what == "safetensors":
            path = os.path.join(ckpt, "model.safetensors")
            data = open(path, "rb").read()
            if rng.random() < 0.5:
                header, payload = split_safetensors(data)
                data = safetensors_bytes(mutate_json(header, rng), payload)
            else:
                data = corrupt_bytes(data, rng)
            with open(path, "wb") as f:
                f.write(data)
        else:  # a sharded checkpoint whose index points somewhere odd
            header, _ = split_safetensors(open(os.path.join(ckpt, "model.safetensors"), "rb").read())
            names = [n for n in header if n != "__metadata__"]
            target = rng.choice(["/etc/passwd", "../../../etc/passwd", "../tiny_checkpoint/model.safetensors",
                                 "model.safetensors", "", ".", "sub/../../x", "missing.safetensors"])
            index = {"metadata": {}, "weight_map": {n: "model.safetensors" for n in names}}
            index["weight_map"][rng.choice(names)] = target
            os.rename(os.path.join(ckpt, "model.safetensors"), os.path.join(ckpt, "model-00001.safetensors"))
            index["weight_map"] = {n: ("model-00001.safetensors" if t == "model.safetensors" else t)
                                   for n, t in index["weight_map"].items()}
            with open(os.path.join(ckpt, "model.safetensors.index.json"), "w") as f:
                json.dump(index, f)
        extra = ["--weights", ckpt]
    json_out = os.path.join(case_dir, "run.json")
    cmd = [fz.fusion_run, "--ptx", ptx, "--manifest", manifest, "--dry-run", "--json", json_out, *extra]
    if rng.random() < 0.3:
        cmd += ["--batch", str(rng.choice([1, 3, 64, 2**31 - 1])), "--kv-len", str(rng.choice([0, 1, 17, 2**31 - 1]))]
    res = fz.run(cmd)
    evidence = Fuzz.crash(res)
    if evidence:
        return [(cmd, evidence)]
    if res.rc != 0 and os.path.exists(json_out):
        return [(cmd, f"exit {res.rc} left {json_out}")]
    return []


# ---------------------------------------------------------------------------
# Driver
# ---------------------------------------------------------------------------

GROUPS = {"ir": (400, 1000), "generated": (80, 2000), "options": (150, 3000), "config": (400, 4000),
          "runtime": (400, 5000)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="directory of fusion-opt, fusion-compile, fusion-import")
    ap.add_argument("--fusion-run", help="fusion-run (the runtime group is skipped without it)")
    ap.add_argument("--ptxas", default=shutil.which("ptxas") or
                    ("/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None))
    ap.add_argument("--scale", type=float, default=1.0, help="multiplies every group's case count")
    ap.add_argument("--only", action="append", choices=sorted(GROUPS), help="run these groups only")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per tool run")
    ap.add_argument("--memory-limit-mb", type=int, default=8192,
                    help="address-space limit of each tool run (0: none; sanitizer builds need 0 "
                         "and bound memory with ASAN_OPTIONS=hard_rss_limit_mb instead)")
    ap.add_argument("--keep", help="copy the files of failing cases here")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    fz = Fuzz(args)
    groups = args.only or sorted(GROUPS)
    runtime_base = None
    if "runtime" in groups:
        if args.fusion_run:
            runtime_base = prepare_runtime_base(fz)
        else:
            groups = [g for g in groups if g != "runtime"]
            print("fuzz: no --fusion-run, runtime group skipped")
    cases = []
    for g in groups:
        count, seed0 = GROUPS[g]
        cases += [(g, seed0 + i) for i in range(max(1, int(count * args.scale)))]

    def one(case):
        group, seed = case
        case_dir = os.path.join(fz.work, f"{group}-{seed}")
        os.makedirs(case_dir)
        fn = {"ir": ir_case, "generated": generated_case, "options": options_case,
              "config": config_case}.get(group)
        problems = fn(fz, seed, case_dir) if fn else runtime_case(fz, seed, case_dir, runtime_base)
        if problems and fz.keep:
            shutil.copytree(case_dir, os.path.join(fz.keep, f"{group}-{seed}"), dirs_exist_ok=True)
        shutil.rmtree(case_dir, ignore_errors=True)
        return case, problems

    failures = 0
    counts = {g: 0 for g in groups}
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for (group, seed), problems in pool.map(one, cases):
            counts[group] += 1
            for cmd, evidence in problems:
                failures += 1
                print(f"FAIL {group} seed {seed}: {evidence}\n  command: {' '.join(cmd)}")
            if args.verbose and not problems:
                print(f"ok   {group} seed {seed}")
    shutil.rmtree(fz.work, ignore_errors=True)
    print("fuzz: " + ", ".join(f"{counts[g]} {g}" for g in groups) +
          f" cases; ptxas {'on' if args.ptxas else 'off'}; {failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
