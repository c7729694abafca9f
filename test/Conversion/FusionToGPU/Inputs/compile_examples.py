#!/usr/bin/env python3
"""Compiles model files with fusion-compile for both strategies and checks
the artifacts: PTX assembles with `ptxas -arch=<chip>`, no libdevice calls
(also with CUDA_HOME/CUDA_PATH/CUDA_ROOT unset), the manifest parses, every
kernel's entry is in the PTX, and every input parameter is bound.

usage: compile_examples.py --fusion-compile BIN --ptxas BIN --out DIR FILE...
"""
import argparse
import json
import os
import subprocess
import sys


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--fusion-compile", required=True)
    p.add_argument("--ptxas", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--chip", default="sm_90")
    p.add_argument("files", nargs="+")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_HOME", "CUDA_PATH", "CUDA_ROOT")}
    failures = 0
    for path in sorted(args.files):
        name = os.path.splitext(os.path.basename(path))[0]
        for strategy in ("decode", "none"):
            prefix = os.path.join(args.out, f"{name}.{strategy}")
            what = f"{name} {strategy}"
            r = subprocess.run([args.fusion_compile, path, f"--strategy={strategy}",
                                f"--chip={args.chip}", "-o", prefix],
                               env=env, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {what}: fusion-compile: {r.stderr}")
                failures += 1
                continue
            ptx = open(prefix + ".ptx").read()
            manifest = json.load(open(prefix + ".manifest.json"))
            problems = []
            if "__nv_" in ptx or ".extern .func" in ptx:
                problems.append("libdevice call in the PTX")
            for k in manifest["kernels"]:
                if f".entry {k['entry']}(" not in ptx:
                    problems.append(f"entry {k['entry']} missing from the PTX")
                for prm in k["params"]:
                    if prm["kind"] == "input" and not (
                            "argument" in prm["binding"] or "kernel" in prm["binding"]):
                        problems.append(f"{k['name']} param {prm['index']} unbound")
            a = subprocess.run([args.ptxas, f"-arch={args.chip}", prefix + ".ptx",
                                "-o", prefix + ".cubin"], capture_output=True, text=True)
            if a.returncode != 0:
                problems.append("ptxas: " + a.stderr.strip())
            if problems:
                failures += 1
                print(f"FAIL {what}: " + "; ".join(problems))
            else:
                print(f"OK {what}: {len(manifest['kernels'])} kernels, "
                      f"{len(set(k['entry'] for k in manifest['kernels']))} entries")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
