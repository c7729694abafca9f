"""Where a decode step of Engine.generate spends its time between kernels
(docs/performance.md entry 36): the GPU timeline of `steps` greedy steps of a
whole model, recorded by the PyTorch profiler (CUPTI sees every kernel, copy
and driver call of the process, ours included).

    PYTHONPATH=<fusion package> python3 step_timeline.py PREFIX CONFIG_DIR \
        PROMPT_IDS_FILE BATCH [STEPS] [TRACE.json]

PREFIX is a compiled whole model (fusion-compile -o PREFIX), CONFIG_DIR its
config.json (random weights). Prints the period of a step (first kernel to
first kernel, median; and the same generate's us per step without the
profiler), the gap on the GPU between the last kernel of a step and the first
of the next (median, min, max), the copies between two steps, and the GPU
events around one step's first kernel with their streams. The profiler does
not record the runtime's driver calls, so host-side times are not here.
"""
import json
import statistics
import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile

import fusion


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def main():
    prefix, config, ids_file, batch = sys.argv[1:5]
    batch = int(batch)
    steps = int(sys.argv[5]) if len(sys.argv) > 5 else 48
    trace = sys.argv[6] if len(sys.argv) > 6 else "/tmp/step_timeline.json"
    prompt = [int(t) for t in open(ids_file).read().split()]
    engine = fusion.Engine(prefix, config, max_batch=batch,
                           max_tokens_per_seq=len(prompt) + 2 * steps + 64,
                           random_weights=1)
    seqs = list(range(batch))
    for s in seqs:
        engine.add_sequence(s)
    tokens = engine.prefill(seqs, [prompt] * batch)
    engine.generate(seqs, tokens, 16)  # captures the graphs
    start = time.perf_counter()
    engine.generate(seqs, tokens, steps)
    wall = (time.perf_counter() - start) * 1e6 / steps
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        engine.generate(seqs, tokens, steps)
    prof.export_chrome_trace(trace)
    events = json.load(open(trace))["traceEvents"]
    gpu = sorted((e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")),
                 key=lambda e: e["ts"])
    # A step starts with the manifest's first kernel (layer 0's front half,
    # which gathers the embedding under `decode`), as whichever entry (its
    # own or a batch variant's) the batch launches.
    first = json.load(open(prefix + ".manifest.json"))["kernels"][0]
    first_entries = {first["entry"]} | {v["entry"] for v in first.get("variants", [])}
    starts = [i for i, e in enumerate(gpu)
              if e["cat"] == "kernel" and e["name"] in first_entries]
    periods, gaps, copies = [], [], []
    for n in range(1, len(starts)):
        first, prev_first = gpu[starts[n]], gpu[starts[n - 1]]
        periods.append(first["ts"] - prev_first["ts"])
        last_kernel = max((e for e in gpu[starts[n - 1]:starts[n]] if e["cat"] == "kernel"),
                          key=lambda e: e["ts"] + e["dur"])
        gaps.append(first["ts"] - (last_kernel["ts"] + last_kernel["dur"]))
        copies.append([(e["name"][:24], round(e["dur"], 2)) for e in gpu[starts[n - 1]:starts[n]]
                       if e["cat"] != "kernel"])
    print(f"{prefix} B={batch}: {len(starts)} steps profiled")
    print(f"  period (first kernel to first kernel): median {median(periods):.1f} us; "
          f"generate without the profiler: {wall:.1f} us per step")
    print(f"  GPU gap, last kernel of a step to the first of the next: median "
          f"{median(gaps):.1f} us (min {min(gaps):.1f}, max {max(gaps):.1f})")
    print(f"  copies between two steps' first kernels (one step): {copies[len(copies) // 2]}")
    # One transition in detail: the GPU events around step n's first kernel
    # (times relative to it, us; stream; name).
    n = len(starts) // 2
    t0 = gpu[starts[n]]["ts"]
    print("  around a step's first kernel (start, end relative to it, us):")
    for e in gpu[max(0, starts[n] - 6):starts[n] + 3]:
        print(f"    {e['ts'] - t0:8.2f} {e['ts'] + e['dur'] - t0:8.2f} "
              f"stream {e.get('args', {}).get('stream', '?')} {e['name'][:60]}")
    kernels = [e for e in gpu[starts[1]:starts[2]] if e["cat"] == "kernel"]
    busy = sum(e["dur"] for e in kernels)
    print(f"  one step: {len(kernels)} kernels, {busy:.1f} us of kernel time summed "
          f"(overlapping under PDL)")


if __name__ == "__main__":
    main()
