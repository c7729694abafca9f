#!/usr/bin/env python3
"""Benchmark of the Llama-3-8B decode-layer front half (RMSNorm -> QKV
projection -> RoPE -> KV-cache append -> GQA decode attention) on the GPU.

For each dtype and (batch, KV length) it times, in microseconds per
layer-step:
  fused          our fused pipeline (strategy decode), run by fusion-run
  unfused        our unfused pipeline (strategy none), run by fusion-run
  eager_math     PyTorch eager, attention written out in fp32 math, in a
                 CUDA graph
  eager_sdpa     PyTorch eager with scaled_dot_product_attention, in a CUDA
                 graph
  inductor_sdpa  torch.compile (Inductor) of the SDPA step, in a CUDA graph
  fusion_op      our fused pipeline as the PyTorch op torch.ops.fusion.front_half
                 (python/fusion/ops.py) on torch tensors, vLLM's cache
                 layout ([2, pages, 16, Hkv, D]) and the FlashInfer column's
                 scattered page table, in the same CUDA graph timing as the
                 PyTorch variants; checked against SDPA first (needs the
                 fusion package, `pip install .`; FAILED with the reason
                 where it is not importable)
  flashinfer     the FlashInfer stack vLLM and SGLang run (fused_add_rmsnorm,
                 F.linear, RoPE from a cos/sin cache, append_paged_kv_cache,
                 BatchDecodeWithPagedKVCacheWrapper on 16-token pages), best
                 of its tensor-core decode on and off, in a CUDA graph; its
                 attention is checked against SDPA first (skipped where
                 flashinfer is not importable)
(the baselines of docs/design.md sections 1 and 5, after
../shared/tools/anchor_bench.py and ../shared/tools/peer_flashinfer.py).
Every variant runs --layers (default 8)
layer copies per replay (weights, caches and inputs each in their own memory,
so the L2 cache cannot hold the 50 MB QKV weight between its uses) in one
CUDA graph; the replays are enqueued back to back with a CUDA event between
each two, and the median replay time divided by the number of copies is the
time per layer-step. fusion-run
does the same (--layers, --graph) and also checks copy 0 against its CPU
reference. Data is random (never zeros), of the same shapes on both sides;
the KV history holds L - 1 tokens, the step appends token L - 1 and attention
reads L tokens.

The floor is the bytes the step must move (each input read once, each output
written once: QKV and norm weights, the K/V history, x, the attention output
and the new K/V rows) over the read bandwidth measured by a CuPy kernel of
16-byte loads. It prints one table and writes it as JSON (bench/README.md
explains the columns).

    python3 bench/bench.py --fusion-run /tmp/rt/tools/fusion-run \\
        --ptx-dir build/bench [--dtypes f16] [--configs 1x1024,16x4096]
"""

import argparse
import datetime
import functools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:
    sys.exit(f"bench.py: {e}; it runs on the GPU machine, with torch and cupy "
             "(bench/README.md)")

# Llama-3.1-8B (runtime/test/data/configs/llama3_8b.json).
HIDDEN, HEADS, KV_HEADS, HEAD_DIM = 4096, 32, 8, 128
QKV_ROWS = (HEADS + 2 * KV_HEADS) * HEAD_DIM
EPS = 1e-5
ROPE_THETA = 500000.0
LLAMA3_FACTOR, LLAMA3_LOW, LLAMA3_HIGH, LLAMA3_ORIGINAL = 8.0, 1.0, 4.0, 8192

PAGE = 16  # tokens per KV page, ours (bench/compile.sh) and FlashInfer's

DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16}
# Batch 1 at four lengths, batches 1 to 8 at 4096 (issue 13's small-batch
# rows), then batch 16 to 256 at 1 GiB of K/V history per layer or less
# (64x4096, 128x2048 and 256x1024 hold the same tokens).
CONFIGS = [(1, 1024), (1, 4096), (1, 8192), (1, 32768), (2, 4096), (4, 4096),
           (8, 4096), (16, 4096), (32, 4096), (64, 4096), (128, 2048),
           (256, 1024)]
VARIANTS = ["fused", "unfused", "fusion_op", "eager_math", "eager_sdpa",
            "inductor_sdpa", "flashinfer"]
STRATEGIES = {"fused": "decode", "unfused": "none"}
OURS_IN_TORCH = ["fusion_op"]
TORCH_VARIANTS = ["eager_math", "eager_sdpa", "inductor_sdpa"]
DEVICE = "cuda"


# --- Bandwidth --------------------------------------------------------------

READ_KERNEL = r"""
extern "C" __global__ void read_all(const uint4 *__restrict__ a, size_t n,
                                    float *out) {
  float acc = 0.f;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint4 v = __ldg(a + i);
    acc += __uint_as_float(v.x ^ v.y ^ v.z ^ v.w);
  }
  if (acc == 12345.f)  // never true: keeps the loads
    out[0] = acc;
}
"""


def read_bandwidth(nbytes=4 << 30, reps=20):
    """Bytes/s of a CuPy kernel that reads `nbytes` with 16-byte loads: the
    best median over a few grid sizes."""
    import cupy as cp

    kernel = cp.RawModule(code=READ_KERNEL).get_function("read_all")
    words = cp.arange(nbytes // 4, dtype=cp.uint32)  # not zeros
    out = cp.zeros(1, cp.float32)
    n = cp.uint64(nbytes // 16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    start, end = cp.cuda.Event(), cp.cuda.Event()
    best = 0.0
    for blocks in (sms * 4, sms * 8, sms * 16):
        ms = []
        for i in range(3 + reps):
            start.record()
            kernel((blocks,), (512,), (words, n, out))
            end.record()
            end.synchronize()
            if i >= 3:  # the first three warm up
                ms.append(cp.cuda.get_elapsed_time(start, end))
        best = max(best, nbytes / (statistics.median(ms) / 1e3))
    words = None
    cp.get_default_memory_pool().free_all_blocks()
    return best


def copy_bandwidth(nbytes=1 << 30, reps=20):
    """Bytes/s of a device-to-device copy, counting bytes read and written."""
    a = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device=DEVICE)
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(reps):
        start.record()
        b.copy_(a)
        end.record()
        end.synchronize()
        ms.append(start.elapsed_time(end))
    return 2 * nbytes / (statistics.median(ms) / 1e3)


def floor_bytes(batch, length, elem_bytes):
    """Each input read once and each output written once."""
    weights = QKV_ROWS * HIDDEN + HIDDEN
    kv_history = batch * length * KV_HEADS * HEAD_DIM * 2
    x = batch * HIDDEN
    outputs = batch * (HEADS + 2 * KV_HEADS) * HEAD_DIM  # attention, new K, V
    return (weights + kv_history + x + outputs) * elem_bytes


# --- The PyTorch baselines (design.md section 1) ----------------------------


def rope_inv_freq():
    """Llama-3.1 RoPE frequencies in fp32, as transformers computes them
    (_compute_llama3_parameters)."""
    inv = 1.0 / (ROPE_THETA ** (
        torch.arange(0, HEAD_DIM, 2, dtype=torch.int64).float() / HEAD_DIM))
    low_wavelen = LLAMA3_ORIGINAL / LLAMA3_LOW
    high_wavelen = LLAMA3_ORIGINAL / LLAMA3_HIGH
    wavelen = 2 * math.pi / inv
    scaled = torch.where(wavelen > low_wavelen, inv / LLAMA3_FACTOR, inv)
    smooth = (LLAMA3_ORIGINAL / wavelen - LLAMA3_LOW) / (LLAMA3_HIGH -
                                                        LLAMA3_LOW)
    smoothed = (1 - smooth) * scaled / LLAMA3_FACTOR + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, smoothed, scaled).to(DEVICE)


def rope(x, pos, inv_freq):
    """NeoX rotation of x [B, heads, D] at positions pos [B], in fp32."""
    angle = pos.float()[:, None] * inv_freq[None, :]
    cos = torch.cat([angle.cos(), angle.cos()], -1)[:, None, :]
    sin = torch.cat([angle.sin(), angle.sin()], -1)[:, None, :]
    x1, x2 = x[..., :HEAD_DIM // 2], x[..., HEAD_DIM // 2:]
    rotated = torch.cat([-x2, x1], -1)
    return (x.float() * cos + rotated.float() * sin).to(x.dtype)


def project(x, w_norm, w_qkv, pos, inv_freq, normed):
    """q, k, v of the new token, rotated; `normed` is the normalised x."""
    b = x.shape[0]
    qkv = normed @ w_qkv.t()
    q = qkv[:, :HEADS * HEAD_DIM].view(b, HEADS, HEAD_DIM)
    k = qkv[:, HEADS * HEAD_DIM:(HEADS + KV_HEADS) * HEAD_DIM].view(
        b, KV_HEADS, HEAD_DIM)
    v = qkv[:, (HEADS + KV_HEADS) * HEAD_DIM:].view(b, KV_HEADS, HEAD_DIM)
    return rope(q, pos, inv_freq), rope(k, pos, inv_freq), v


def step_math(x, w_norm, w_qkv, kc, vc, pos, inv_freq):
    """Attention written out in fp32 over the whole cache window
    [B, L, Hkv, D], positions past `pos` masked."""
    b = x.shape[0]
    normed = F.rms_norm(x.float(), (HIDDEN,), w_norm.float(), EPS).to(x.dtype)
    q, k, v = project(x, w_norm, w_qkv, pos, inv_freq, normed)
    rows = torch.arange(b, device=x.device)
    kc[rows, pos] = k
    vc[rows, pos] = v
    length = kc.shape[1]
    qg = q.view(b, KV_HEADS, HEADS // KV_HEADS, HEAD_DIM)
    scores = torch.einsum("bgqd,blgd->bgql", qg.float(),
                          kc.float()) / math.sqrt(HEAD_DIM)
    mask = torch.arange(length, device=x.device)[None, :] > pos[:, None]
    scores = scores.masked_fill(mask[:, None, None, :], float("-inf"))
    o = torch.einsum("bgql,blgd->bgqd", scores.softmax(-1), vc.float())
    return o.reshape(b, HEADS * HEAD_DIM).to(x.dtype)


def step_sdpa(x, w_norm, w_qkv, kc, vc, pos, inv_freq):
    """Attention by scaled_dot_product_attention with GQA."""
    b = x.shape[0]
    normed = F.rms_norm(x, (HIDDEN,), w_norm, EPS)
    q, k, v = project(x, w_norm, w_qkv, pos, inv_freq, normed)
    rows = torch.arange(b, device=x.device)
    kc[rows, pos] = k
    vc[rows, pos] = v
    length = kc.shape[1]
    mask = torch.arange(length, device=x.device)[None, :] <= pos[:, None]
    o = F.scaled_dot_product_attention(q[:, :, None, :], kc.transpose(1, 2),
                                       vc.transpose(1, 2),
                                       attn_mask=mask[:, None, None, :],
                                       enable_gqa=True)
    return o.reshape(b, HEADS * HEAD_DIM)


def make_layers(batch, length, dtype, copies, seed=0):
    """`copies` independent sets of random weights, caches and inputs; the
    step appends at position length - 1 and reads `length` tokens."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    randn = lambda *shape: torch.randn(*shape, device=DEVICE, generator=g)
    inv_freq = rope_inv_freq()
    layers = []
    for _ in range(copies):
        layers.append(dict(
            x=randn(batch, HIDDEN).to(dtype),
            w_norm=(1 + 0.1 * randn(HIDDEN)).to(dtype),
            w_qkv=(randn(QKV_ROWS, HIDDEN) / math.sqrt(HIDDEN)).to(dtype),
            kc=randn(batch, length, KV_HEADS, HEAD_DIM).to(dtype),
            vc=randn(batch, length, KV_HEADS, HEAD_DIM).to(dtype),
            pos=torch.full((batch,), length - 1, device=DEVICE,
                           dtype=torch.long),
            inv_freq=inv_freq))
    return layers


def time_graph(fn, layers, iters, warmup):
    """(median, min) microseconds per layer-step: one CUDA graph runs `fn`
    on every copy in `layers`; its replays are enqueued back to back with an
    event between each two (fusion-run times the same way)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            for layer in layers:
                fn(**layer)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for layer in layers:
            fn(**layer)
    for _ in range(warmup):
        graph.replay()
    torch.cuda.synchronize()
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(iters + 1)]
    marks[0].record()
    for i in range(iters):
        graph.replay()
        marks[i + 1].record()
    torch.cuda.synchronize()
    us = sorted(marks[i].elapsed_time(marks[i + 1]) * 1e3 / len(layers)
                for i in range(iters))
    return us[len(us) // 2], us[0]


def run_eager(step, layers, args):
    median, minimum = time_graph(step, layers, args.iters, args.warmup)
    return dict(us=median, us_min=minimum)


def run_inductor(layers, args):
    torch._dynamo.reset()
    compiled = torch.compile(step_sdpa, dynamic=False)
    start = time.perf_counter()
    compiled(**layers[0])
    torch.cuda.synchronize()
    compile_s = time.perf_counter() - start
    median, minimum = time_graph(compiled, layers, args.iters, args.warmup)
    return dict(us=median, us_min=minimum, compile_s=compile_s)


# --- The FlashInfer stack (the peer of issue 14) -----------------------------
#
# What a vLLM or SGLang user runs for this step, as
# ../shared/tools/peer_flashinfer.py measured it: flashinfer-python 0.5.3,
# imported only here (bench/run.sh installs it from wheels, BENCH_WHEELS).

FI_WORKSPACE_BYTES = 256 << 20  # the decode wrapper's float workspace
FI_MAX_POSITIONS = 131072  # Llama-3.1's max_position_embeddings
FI_TOLERANCE = dict(attention=2e-2, front=5e-2)  # max |error| / max |ref|


def flashinfer_modules(dtypes):
    """Builds (or loads) every FlashInfer kernel module the step needs before
    any timing: the norm, RoPE and page modules and, per dtype, the CUDA-core
    decode and the tensor-core (fa2 prefill) decode modules, with the
    arguments the decode wrapper's plan() asks for. Missing ones are
    JIT-compiled with nvcc in one ninja run (MAX_JOBS at a time) into
    FLASHINFER_WORKSPACE_BASE; a prebuilt one (flashinfer/data/aot, unpacked
    by bench/run.sh) that does not load is deleted and compiled instead.
    Returns {module: "prebuilt" | "compiled before" | "compiled now"}."""
    import shutil

    from flashinfer.decode import get_batch_decode_module
    from flashinfer.jit import (build_jit_specs, gen_batch_decode_module,
                                gen_batch_prefill_module)
    from flashinfer.jit.norm import gen_norm_module
    from flashinfer.jit.page import gen_page_module
    from flashinfer.jit.rope import gen_rope_module
    from flashinfer.norm import get_norm_module
    from flashinfer.page import get_page_module
    from flashinfer.prefill import get_batch_prefill_module
    from flashinfer.rope import get_rope_module

    todo = [(gen_norm_module, get_norm_module, ()),
            (gen_rope_module, get_rope_module, ()),
            (gen_page_module, get_page_module, ())]
    for name in dtypes:
        dt = DTYPES[name]
        # q, kv and output dtypes, index dtype, head dims, no positional
        # encoding, no sliding window, no soft cap (decode.py's plan()).
        args = (dt, dt, dt, torch.int32, HEAD_DIM, HEAD_DIM, 0, False, False)
        todo.append((gen_batch_decode_module, get_batch_decode_module, args))
        todo.append((functools.partial(gen_batch_prefill_module, "fa2"),
                     functools.partial(get_batch_prefill_module, "fa2"),
                     args + (False,)))  # no fp16 QK reduction
    specs, report = [], {}
    for gen, _, args in todo:
        spec = gen(*args)
        if spec.is_aot:
            try:
                spec.load(spec.aot_path)
            except Exception as e:
                print(f"  flashinfer module {spec.name}: the prebuilt one "
                      f"does not load ({type(e).__name__}: {str(e)[:300]}); "
                      "compiling it", flush=True)
                shutil.rmtree(spec.aot_path.parent)
        report[spec.name] = ("prebuilt" if spec.is_aot else "compiled before"
                             if spec.is_compiled else "compiled now")
        specs.append(spec)
    missing = [s for s in specs if not s.is_aot]
    if missing:
        print(f"  flashinfer: building {len(missing)} kernel modules with "
              "nvcc (about a minute when none is in the cache)", flush=True)
        build_jit_specs(missing, verbose=False)
    for _, get, args in todo:  # loads each (and fails here, not in a row)
        get(*args)
    return report


def fi_meta(batch, length, seed):
    """The page table of 16-token pages, scattered over a pool of exactly
    the pages the step needs, and what the step's kernels take besides the
    tensors of a layer; shared by every layer copy, as a model's layers
    share one page table."""
    pages_per_seq = (length + PAGE - 1) // PAGE
    num_pages = batch * pages_per_seq
    g = torch.Generator(device="cpu").manual_seed(seed)
    indices = torch.randperm(num_pages, generator=g).to(torch.int32)
    indptr = torch.arange(0, num_pages + 1, pages_per_seq, dtype=torch.int32)
    last_page_len = torch.full((batch,), length - (pages_per_seq - 1) * PAGE,
                               dtype=torch.int32)
    # vLLM's RotaryEmbedding cache: [positions, D] fp32, cos | sin of the
    # Llama-3.1 frequencies (NeoX pairing, like rope() above).
    t = torch.arange(max(FI_MAX_POSITIONS, length), dtype=torch.float32,
                     device=DEVICE)
    angle = t[:, None] * rope_inv_freq()[None, :]
    return dict(
        num_pages=num_pages, pages_per_seq=pages_per_seq,
        indices=indices.to(DEVICE), indptr=indptr.to(DEVICE),
        last_page_len=last_page_len.to(DEVICE),
        # The appended token: sequence b, position L - 1 (what
        # flashinfer.get_batch_indices_positions gives for one new token
        # per sequence), and the RoPE positions.
        batch_indices=torch.arange(batch, dtype=torch.int32, device=DEVICE),
        positions=torch.full((batch,), length - 1, dtype=torch.int32,
                             device=DEVICE),
        pos=torch.full((batch,), length - 1, dtype=torch.long, device=DEVICE),
        cos_sin=torch.cat([angle.cos(), angle.sin()], -1).contiguous())


def fi_layers(batch, dtype, copies, meta, seed=0, kv_first=False):
    """`copies` independent sets of random weights, inputs and paged caches
    ([pages, K|V, 16, Hkv, D], NHD, every slot random; with kv_first vLLM's
    [K|V, pages, 16, Hkv, D])."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    randn = lambda *shape: torch.randn(*shape, device=DEVICE, generator=g)
    layers = []
    for _ in range(copies):
        layers.append(dict(
            x=randn(batch, HIDDEN).to(dtype),
            residual=randn(batch, HIDDEN).to(dtype),
            w_norm=(1 + 0.1 * randn(HIDDEN)).to(dtype),
            w_qkv=(randn(QKV_ROWS, HIDDEN) / math.sqrt(HIDDEN)).to(dtype),
            kv=torch.randn(*((2, meta["num_pages"]) if kv_first else
                             (meta["num_pages"], 2)), PAGE, KV_HEADS,
                           HEAD_DIM, device=DEVICE, generator=g, dtype=dtype),
            out=torch.empty(batch, HEADS, HEAD_DIM, device=DEVICE,
                            dtype=dtype)))
    return layers


def fi_wrapper(meta, batch, dtype, tensor_cores):
    """The decode wrapper as vLLM and SGLang build it for their decode CUDA
    graphs (use_cuda_graph, its own index buffers), planned once, outside
    the graph, for the whole run (the page table does not change)."""
    import flashinfer

    i32 = lambda n: torch.empty(n, dtype=torch.int32, device=DEVICE)
    wrapper = flashinfer.decode.BatchDecodeWithPagedKVCacheWrapper(
        torch.zeros(FI_WORKSPACE_BYTES, dtype=torch.uint8, device=DEVICE),
        "NHD", use_cuda_graph=True, use_tensor_cores=tensor_cores,
        paged_kv_indptr_buffer=i32(batch + 1),
        paged_kv_indices_buffer=i32(meta["num_pages"]),
        paged_kv_last_page_len_buffer=i32(batch))
    wrapper.plan(meta["indptr"], meta["indices"], meta["last_page_len"],
                 HEADS, KV_HEADS, HEAD_DIM, PAGE, pos_encoding_mode="NONE",
                 q_data_type=dtype, kv_data_type=dtype)
    torch.cuda.synchronize()
    return wrapper


def step_flashinfer(x, residual, w_norm, w_qkv, kv, out, wrapper, meta):
    """One step on the FlashInfer stack: residual += x and x = rmsnorm(
    residual) in place, the packed QKV projection (cuBLAS), RoPE in place on
    q and k, the new K/V row appended to the paged cache, decode attention
    into `out` [B, Hq, D]. Returns the rotated q [B, Hq, D] and `out`."""
    import flashinfer

    b = x.shape[0]
    flashinfer.norm.fused_add_rmsnorm(x, residual, w_norm, EPS)
    qkv = F.linear(x, w_qkv)
    q, k, v = qkv.split([HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM,
                         KV_HEADS * HEAD_DIM], dim=-1)
    flashinfer.rope.apply_rope_with_cos_sin_cache_inplace(
        meta["pos"], q, k, HEAD_DIM, meta["cos_sin"], is_neox=True)
    flashinfer.page.append_paged_kv_cache(
        k.view(b, KV_HEADS, HEAD_DIM), v.view(b, KV_HEADS, HEAD_DIM),
        meta["batch_indices"], meta["positions"], kv, meta["indices"],
        meta["indptr"], meta["last_page_len"], "NHD")
    q = q.view(b, HEADS, HEAD_DIM)
    wrapper.run(q, kv, out=out)
    return q, out


def fi_gather(kv, meta, batch, length):
    """K and V [B, L, Hkv, D] gathered from the paged cache."""
    pages = meta["indices"].long().view(batch, meta["pages_per_seq"])
    k = kv[pages, 0].reshape(batch, -1, KV_HEADS, HEAD_DIM)[:, :length]
    v = kv[pages, 1].reshape(batch, -1, KV_HEADS, HEAD_DIM)[:, :length]
    return k, v


def fi_check(layer, wrapper, meta, batch, length):
    """One step on copies of a layer's inputs, then
      attention: its output against torch SDPA (enable_gqa, the working
        dtype) on the same inputs: its rotated q and the cache it attended
        over (gathered from the pages after the append);
      front: its q and appended K/V row against this harness's projection
        (project(), bench.py's RoPE) of x + residual;
      history: the L - 1 tokens before the append unchanged.
    Errors are max |a - ref| and that over max |ref|; AssertionError if one
    is above FI_TOLERANCE."""
    x0, r0 = layer["x"].clone(), layer["residual"].clone()
    kv = layer["kv"].clone()
    k_hist, v_hist = fi_gather(kv, meta, batch, length - 1)
    q, out = step_flashinfer(x0.clone(), r0.clone(), layer["w_norm"],
                             layer["w_qkv"], kv, torch.empty_like(
                                 layer["out"]), wrapper, meta)
    kc, vc = fi_gather(kv, meta, batch, length)
    sdpa = F.scaled_dot_product_attention(
        q.contiguous()[:, :, None, :], kc.transpose(1, 2), vc.transpose(1, 2),
        enable_gqa=True)[:, :, 0, :]
    summed = x0 + r0
    normed = F.rms_norm(summed, (HIDDEN,), layer["w_norm"], EPS)
    q_ref, k_ref, v_ref = project(summed, layer["w_norm"], layer["w_qkv"],
                                  meta["pos"], rope_inv_freq(), normed)

    def errors(a, ref):
        err = (a.float() - ref.float()).abs().max().item()
        return err, err / max(ref.float().abs().max().item(), 1e-30)

    attn_abs, attn_rel = errors(out, sdpa)
    front_rel = max(errors(q, q_ref)[1],
                    errors(kc[:, length - 1], k_ref)[1],
                    errors(vc[:, length - 1], v_ref)[1])
    history = bool(torch.equal(kc[:, :length - 1], k_hist) and
                   torch.equal(vc[:, :length - 1], v_hist))
    check = dict(attention_max_abs_err=attn_abs, attention_rel_err=attn_rel,
                 front_rel_err=front_rel, history_unchanged=history)
    if (not attn_rel <= FI_TOLERANCE["attention"] or
            not front_rel <= FI_TOLERANCE["front"] or not history):
        raise AssertionError(f"check failed (tolerance {FI_TOLERANCE}): "
                             f"{check}")
    return check


def run_flashinfer(dtype, batch, length, args):
    """The FlashInfer stack with the tensor-core decode off and on: each
    checked (fi_check, on copy 0's inputs before any step has changed them),
    then timed like the PyTorch variants; the faster is the column. A
    setting that fails its check is not timed."""
    meta = fi_meta(batch, length, seed=batch * 100003 + length)
    layers = fi_layers(batch, dtype, args.layers, meta)
    settings, steps = {}, {}

    def failed(key, e):
        settings[key]["error"] = f"{type(e).__name__}: {str(e)[:1500]}"
        print(f"  flashinfer, tensor cores {key}: FAILED: "
              f"{settings[key]['error']}", flush=True)

    for key, tc in (("off", False), ("on", True)):
        settings[key] = {}
        try:
            wrapper = fi_wrapper(meta, batch, dtype, tc)
            settings[key] = fi_check(layers[0], wrapper, meta, batch, length)
        except Exception as e:
            failed(key, e)
            continue
        steps[key] = functools.partial(step_flashinfer, wrapper=wrapper,
                                       meta=meta)
        print(f"  flashinfer, tensor cores {key}: attention vs SDPA max error "
              f"{settings[key]['attention_max_abs_err']:.2e} "
              f"({settings[key]['attention_rel_err']:.1e} of its max)",
              flush=True)
    for key, step in steps.items():
        try:
            median, minimum = time_graph(step, layers, args.iters, args.warmup)
        except Exception as e:
            failed(key, e)
            continue
        settings[key].update(us=median, us_min=minimum)
        print(f"  flashinfer, tensor cores {key}: {median:.1f} us", flush=True)
    timed = [key for key in settings if "us" in settings[key]]
    if not timed:
        raise RuntimeError("neither tensor-core setting passed its check and "
                           "ran")
    best = min(timed, key=lambda key: settings[key]["us"])
    return dict(settings[best], tensor_cores=best == "on",
                tensor_cores_settings=settings)


# --- Our fused pipeline as the PyTorch op --------------------------------------


def step_fusion_op(x, residual, w_norm, w_qkv, kv, out, layer, meta):
    """One step through torch.ops.fusion.front_half: (attention output,
    x + residual)."""
    return layer(x, w_norm, w_qkv, meta["positions"], meta["seq_lens"],
                 meta["block_table"], kv[0], kv[1], residual=residual)


def op_check(layer, step, meta, batch, length):
    """One step on copies of a layer's inputs: its attention output against
    SDPA on this harness's projection (project(), bench.py's RoPE) of
    x + residual and the cache after the append, the appended K/V row
    against that projection, residual_out against x + residual, the history
    unchanged; errors as fi_check's."""
    x0, r0, kv = layer["x"].clone(), layer["residual"].clone(), layer["kv"].clone()
    k_hist, v_hist = fi_gather(kv.transpose(0, 1), meta, batch, length - 1)
    out, residual_out = step(x0, r0, layer["w_norm"], layer["w_qkv"], kv, None)
    kc, vc = fi_gather(kv.transpose(0, 1), meta, batch, length)
    summed = x0 + r0
    normed = F.rms_norm(summed, (HIDDEN,), layer["w_norm"], EPS)
    q_ref, k_ref, v_ref = project(summed, layer["w_norm"], layer["w_qkv"],
                                  meta["pos"], rope_inv_freq(), normed)
    sdpa = F.scaled_dot_product_attention(
        q_ref.view(batch, HEADS, 1, HEAD_DIM), kc.transpose(1, 2),
        vc.transpose(1, 2), enable_gqa=True)[:, :, 0, :]

    def rel(a, ref):
        return ((a.float() - ref.float()).abs().max() /
                ref.float().abs().max().clamp_min(1e-30)).item()

    check = dict(attention_rel_err=rel(out, sdpa),
                 front_rel_err=max(rel(kc[:, length - 1], k_ref),
                                   rel(vc[:, length - 1], v_ref),
                                   rel(residual_out, summed)),
                 history_unchanged=bool(
                     torch.equal(kc[:, :length - 1], k_hist) and
                     torch.equal(vc[:, :length - 1], v_hist)))
    if (not check["attention_rel_err"] <= FI_TOLERANCE["attention"] or
            not check["front_rel_err"] <= FI_TOLERANCE["front"] or
            not check["history_unchanged"]):
        raise AssertionError(f"check failed (tolerance {FI_TOLERANCE}): "
                             f"{check}")
    return check


def run_fusion_op(dtype, batch, length, args):
    """Our fused PTX (bench/compile.sh's decode strategy) through the
    PyTorch op: checked (op_check), then timed like the PyTorch variants.
    num_splits is Function.num_splits (the manifest's policy fitted to the
    device's clusters) for the block table's capacity (the op's default)."""
    import fusion.ops

    name = {torch.float16: "f16", torch.bfloat16: "bf16"}[dtype]
    layer = fusion.ops.FrontHalf(
        os.path.join(args.ptx_dir, f"llama3_8b.{name}.{STRATEGIES['fused']}"),
        max_batch=batch)
    meta = fi_meta(batch, length, seed=batch * 100003 + length)
    meta["block_table"] = meta["indices"].view(batch, meta["pages_per_seq"])
    meta["seq_lens"] = meta["positions"] + 1
    layers = fi_layers(batch, dtype, args.layers, meta, kv_first=True)
    step = functools.partial(step_fusion_op, layer=layer, meta=meta)
    check = op_check(layers[0], step, meta, batch, length)
    median, minimum = time_graph(step, layers, args.iters, args.warmup)
    return dict(check, us=median, us_min=minimum)


# --- Our pipelines, through fusion-run --------------------------------------


def run_fusion(variant, dtype, batch, length, args):
    """Runs fusion-run on the compiled PTX of `variant`; returns its timing,
    check result and errors. A failed check keeps the time and says so.
    fusion-run's output goes to args.log."""
    prefix = os.path.join(args.ptx_dir,
                          f"llama3_8b.{dtype}.{STRATEGIES[variant]}")
    with tempfile.TemporaryDirectory() as tmp:
        summary = os.path.join(tmp, "run.json")
        cmd = [args.fusion_run, "--ptx", prefix + ".ptx", "--manifest",
               prefix + ".manifest.json", "--graph", "--batch", str(batch),
               "--kv-len", str(length - 1), "--layers", str(args.layers),
               "--iters", str(args.iters), "--warmup", str(args.warmup),
               "--json", summary]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True,
                               timeout=args.timeout)
        except subprocess.TimeoutExpired as e:
            # The captured output may be bytes even in text mode.
            output = "".join(
                o.decode(errors="replace") if isinstance(o, bytes) else o
                for o in (e.stdout or "", e.stderr or ""))
            with open(args.log, "a") as log:
                log.write(f"$ {' '.join(cmd)}\n{output}"
                          f"timed out after {args.timeout} s\n\n")
            raise
        with open(args.log, "a") as log:
            log.write(f"$ {' '.join(cmd)}\n{p.stdout}{p.stderr}"
                      f"exit {p.returncode}\n\n")
        if p.returncode not in (0, 1) or not os.path.exists(summary):
            tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-8:])
            raise RuntimeError(f"{' '.join(cmd)}: exit {p.returncode}\n{tail}")
        with open(summary) as f:
            j = json.load(f)
    if j["result"] != "pass":
        print(f"  WARNING: {variant} {dtype} {batch}x{length}: outputs differ "
              f"from the reference: {j['rel_error_vs_f64']}", flush=True)
    return dict(us=j["us_per_layer_step"], us_min=j["us_per_layer_step_min"],
                check=j["result"], rel_error_vs_f64=j["rel_error_vs_f64"],
                num_splits=j["num_splits"], kernels=j["kernels"])


# --- The table --------------------------------------------------------------


def derive(row):
    """Adds the fused pipeline's bandwidth (floor bytes over its time), its
    share of the floor and every other variant's time over its own."""

    def us(variant):
        return (row.get(variant) or {}).get("us")

    def ratio(a, b):
        return a / b if a is not None and b else None

    fused, floor = us("fused"), row["floor_us"]
    row["fused_TBps"] = ratio(row["floor_bytes"] / 1e6, fused)
    row["fused_pct_of_floor"] = ratio(None if floor is None else 100 * floor,
                                      fused)
    for v in VARIANTS[1:]:
        row[v + "_over_fused"] = ratio(us(v), fused)
    peers = [us(v) for v in VARIANTS if v not in STRATEGIES and v not in OURS_IN_TORCH
             and us(v) is not None]
    row["best_peer_over_fused"] = ratio(min(peers, default=None), fused)


def us_of(variant, key="us"):
    return lambda r: (r.get(variant) or {}).get(key)


COLUMNS = [  # header, width, value
    ("dtype", 5, lambda r: r["dtype"]),
    ("B", 3, lambda r: r["batch"]),
    ("L", 6, lambda r: r["kv_len"]),
    ("floor", 6, lambda r: r["floor_us"]),
    ("fused", 6, us_of("fused")),
    ("unfused", 7, us_of("unfused")),
    ("op", 6, us_of("fusion_op")),
    ("e-math", 7, us_of("eager_math")),
    ("e-sdpa", 6, us_of("eager_sdpa")),
    ("ind-sdpa", 8, us_of("inductor_sdpa")),
    ("fi", 6, us_of("flashinfer")),
    ("fi-tc", 5, lambda r: {True: "on", False: "off", None: None}[
        us_of("flashinfer", "tensor_cores")(r)]),
    ("TB/s", 5, lambda r: r["fused_TBps"]),
    ("%floor", 6, lambda r: r["fused_pct_of_floor"]),
    ("unf/fus", 7, lambda r: r["unfused_over_fused"]),
    ("op/fus", 6, lambda r: r["fusion_op_over_fused"]),
    ("em/fus", 6, lambda r: r["eager_math_over_fused"]),
    ("es/fus", 6, lambda r: r["eager_sdpa_over_fused"]),
    ("ind/fus", 7, lambda r: r["inductor_sdpa_over_fused"]),
    ("fi/fus", 6, lambda r: r["flashinfer_over_fused"]),
    ("peer/fus", 8, lambda r: r["best_peer_over_fused"]),
    ("compile s", 9, us_of("inductor_sdpa", "compile_s")),
]


def cell(value, width):
    """`value` right-aligned in `width` characters; None is "-"."""
    if value is None:
        return f"{'-':>{width}}"
    if isinstance(value, float):
        digits = 2 if abs(value) < 10 else 1
        return f"{value:>{width}.{digits}f}"
    return f"{value!s:>{width}}"


def print_table(result):
    print(f"\n{result['gpu']}, {result['date']}; read bandwidth "
          f"{cell(result['read_bw_TBps'], 0)} TB/s (the floor's), copy "
          f"{cell(result['copy_bw_TBps'], 0)} TB/s; us per layer-step, median "
          f"over {result['iters']} replays of {result['layers']} layer copies"
          + (f"; flashinfer {result['flashinfer']}"
             if result.get("flashinfer") else ""))
    print(" ".join(f"{h:>{w}}" for h, w, _ in COLUMNS))
    for row in result["rows"]:
        line = " ".join(cell(value(row), w) for _, w, value in COLUMNS)
        failed = [v for v in ("fused", "unfused")
                  if (row.get(v) or {}).get("check") == "mismatch"]
        print(line + ("  CHECK FAILED: " + ",".join(failed) if failed else ""))
    sys.stdout.flush()


# --- Main -------------------------------------------------------------------


def parse_configs(text):
    configs = []
    for item in text.split(","):
        try:
            batch, length = (int(v) for v in item.lower().split("x"))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"config {item!r} is not BATCHxLENGTH (e.g. 16x4096)")
        if batch < 1 or length < 1:
            raise argparse.ArgumentTypeError(
                f"config {item!r}: batch and length must be at least 1")
        configs.append((batch, length))
    return configs


def parse_list(choices):
    def parse(text):
        items = text.split(",")
        bad = [i for i in items if i not in choices]
        if bad:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(bad)} (choose from {', '.join(choices)})")
        return items
    return parse


def main():
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fusion-run", help="the fusion-run executable (needed "
                    "for the fused and unfused variants)")
    ap.add_argument("--ptx-dir", default="build/bench",
                    help="what bench/compile.sh wrote (default build/bench)")
    ap.add_argument("--dtypes", type=parse_list(list(DTYPES)),
                    default=list(DTYPES), help="default f16,bf16")
    ap.add_argument("--configs", type=parse_configs, default=CONFIGS,
                    help="BATCHxLENGTH,... (default " + ",".join(
                        f"{b}x{l}" for b, l in CONFIGS) + ")")
    ap.add_argument("--variants", type=parse_list(VARIANTS), default=VARIANTS,
                    help="default " + ",".join(VARIANTS))
    ap.add_argument("--layers", type=int, default=8,
                    help="layer copies per replay (default 8)")
    ap.add_argument("--iters", type=int, default=100,
                    help="timed replays (default 100)")
    ap.add_argument("--warmup", type=int, default=10,
                    help="untimed replays first (default 10)")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds allowed for one fusion-run (default 600)")
    ap.add_argument("--out", default=os.path.join(os.environ.get("OUT", "."),
                                                  "bench.json"),
                    help="the JSON result (default $OUT/bench.json, or "
                    "./bench.json without OUT); fusion-run's output goes "
                    "beside it, to <out without .json>.fusion-run.log")
    args = ap.parse_args()
    args.log = os.path.splitext(args.out)[0] + ".fusion-run.log"
    if args.layers < 1 or args.iters < 1 or args.warmup < 0:
        ap.error("--layers and --iters must be at least 1, --warmup at least 0")
    ours = [v for v in args.variants if v in STRATEGIES]
    if ours and not args.fusion_run:
        ap.error(f"--fusion-run is needed for {', '.join(ours)}")
    for dtype in args.dtypes:
        for v in ours:
            ptx = os.path.join(args.ptx_dir,
                               f"llama3_8b.{dtype}.{STRATEGIES[v]}.ptx")
            if not os.path.exists(ptx):
                ap.error(f"{ptx} not found (run bench/compile.sh "
                         f"{args.ptx_dir} where LLVM is installed)")

    open(args.log, "w").close()
    started = time.perf_counter()
    result = dict(
        date=datetime.datetime.now(datetime.timezone.utc).isoformat(
            timespec="seconds"),
        gpu=torch.cuda.get_device_name(), torch=torch.__version__,
        command=" ".join(sys.argv), layers=args.layers, iters=args.iters,
        warmup=args.warmup, read_bw_TBps=None, copy_bw_TBps=None,
        flashinfer=None, flashinfer_modules=None, rows=[])
    print(f"{result['gpu']}, torch {result['torch']}", flush=True)

    def attempt(what, fn):
        """fn()'s result, or None after printing why it failed. A timing's
        dict gets its wall time."""
        t0 = time.perf_counter()
        try:
            value = fn()
        except Exception as e:  # a failing variant never stops the table
            print(f"  {what}: FAILED: {type(e).__name__}: {str(e)[:3000]}",
                  flush=True)
            return None
        wall = time.perf_counter() - t0
        if isinstance(value, dict):
            value["wall_s"] = wall
            print(f"  {what}: {cell(value.get('us'), 0)} us ({wall:.1f} s)",
                  flush=True)
        else:
            print(f"  {what}: done ({wall:.1f} s)", flush=True)
        return value

    fi_ready = False
    if "flashinfer" in args.variants:
        try:
            import flashinfer
        except Exception as e:  # not installed: the column is skipped
            why = (str(e).splitlines() or [""])[0][:200]
            print(f"flashinfer: not importable ({type(e).__name__}: {why}); "
                  "its column is skipped (bench/README.md: BENCH_WHEELS)",
                  flush=True)
        else:
            result["flashinfer"] = flashinfer.__version__
            t0 = time.perf_counter()
            try:
                result["flashinfer_modules"] = flashinfer_modules(args.dtypes)
                fi_ready = True
            except Exception as e:
                print(f"flashinfer {flashinfer.__version__}: its kernel "
                      f"modules did not build or load ({type(e).__name__}: "
                      f"{str(e)[-3000:]}); its column is skipped", flush=True)
            else:
                sources = list(result["flashinfer_modules"].values())
                counts = ", ".join(f"{sources.count(s)} {s}"
                                   for s in dict.fromkeys(sources))
                print(f"flashinfer {flashinfer.__version__}: kernel modules "
                      f"ready in {time.perf_counter() - t0:.1f} s ({counts})",
                      flush=True)
    read_bw = attempt("read bandwidth", read_bandwidth)
    copy_bw = attempt("copy bandwidth", copy_bandwidth)
    result["read_bw_TBps"] = read_bw / 1e12 if read_bw else None
    result["copy_bw_TBps"] = copy_bw / 1e12 if copy_bw else None
    print(f"read bandwidth {cell(result['read_bw_TBps'], 0)} TB/s, copy "
          f"(read + write) {cell(result['copy_bw_TBps'], 0)} TB/s", flush=True)

    for dtype in args.dtypes:
        for batch, length in args.configs:
            t0 = time.perf_counter()
            print(f"{dtype} B={batch} L={length}", flush=True)
            nbytes = floor_bytes(batch, length,
                                 torch.finfo(DTYPES[dtype]).bits // 8)
            row = dict(dtype=dtype, batch=batch, kv_len=length,
                       floor_bytes=nbytes,
                       floor_us=nbytes / read_bw * 1e6 if read_bw else None)
            for v in ours:
                row[v] = attempt(v, lambda: run_fusion(v, dtype, batch,
                                                       length, args))
            baselines = [v for v in args.variants if v in TORCH_VARIANTS]
            if baselines:
                layers = attempt("make layers", lambda: make_layers(
                    batch, length, DTYPES[dtype], args.layers))
                runs = dict(
                    eager_math=lambda: run_eager(step_math, layers, args),
                    eager_sdpa=lambda: run_eager(step_sdpa, layers, args),
                    inductor_sdpa=lambda: run_inductor(layers, args))
                for v in baselines:
                    row[v] = attempt(v, runs[v]) if layers else None
                del layers
                torch.cuda.empty_cache()
            if "fusion_op" in args.variants:
                row["fusion_op"] = attempt("fusion_op", lambda: run_fusion_op(
                    DTYPES[dtype], batch, length, args))
                torch.cuda.empty_cache()
            if "flashinfer" in args.variants:
                row["flashinfer"] = None  # not importable: skipped
                if fi_ready:
                    row["flashinfer"] = attempt("flashinfer", lambda: (
                        run_flashinfer(DTYPES[dtype], batch, length, args)))
                    torch.cuda.empty_cache()
            derive(row)
            row["wall_s"] = time.perf_counter() - t0
            result["rows"].append(row)
            result["wall_s"] = time.perf_counter() - started
            # Written after every configuration: a run cut short keeps what
            # it measured.
            with open(args.out, "w") as f:
                json.dump(result, f, indent=1)
    print_table(result)
    print(f"wrote {args.out} and {args.log} "
          f"({result.get('wall_s', 0):.0f} s)")


if __name__ == "__main__":
    main()
