#!/usr/bin/env python3
"""GPU check of the split-KV decode attention kernels (AttentionEmitter.cpp).

Loads PTX compiled on the build machine (one .ptx per configuration, written
by test/gpu/check_attention.py --emit, see below) with CuPy, builds paged K/V
caches with a shuffled block table and NaN in every unused slot and page,
launches the kernel with the ABI of include/fusion/Conversion/FusionToGPU/
Emitters.h, and compares with a float64 numpy reference of design.md 2.1:

    o[b, h] = softmax(q[b, h] . K[b, 0..len_b)^T * scale) V[b, 0..len_b)

Metrics: max |out - ref| and ||out - ref|| / ||ref|| over the batch; rows of
length 0 must be exactly zero. Thresholds: rel < 2e-3 (f16), 1e-2 (bf16).
Also checks that the arrival counters are zero again after every launch.
Where the runtime would launch the splits as one thread-block cluster
(fusion.cluster_x, docs/abi.md 3.4), each case runs both ways: in clusters
(through cuda.bindings' cuLaunchKernelEx; the combine through distributed
shared memory) and without (the combine through the workspaces).

Usage:
  # on the build machine (no GPU): write the .mlir inputs, compile, ptxas
  python3 test/gpu/check_attention.py --emit .gpu/attention  # uses build/bin/fusion-compile
  # on the GPU machine
  python3 test/gpu/check_attention.py --ptx-dir .gpu/attention
  python3 test/gpu/check_attention.py --ptx-dir .gpu/attention --sanitize   # one small config
Exit status 0 when every check passes; with no GPU / no CuPy it prints SKIP
and exits 0 (the CI convention of design.md section 4).
"""

import argparse
import json
import math
import os
import subprocess
import sys
import time

try:
    import numpy as np
except ImportError:  # the --emit step needs no numpy
    np = None

# name, Hq, Hkv, D, dtype, page_size
CONFIGS = [
    ("g1_d128_f16", 8, 8, 128, "f16", 16),
    ("g4_d128_f16", 32, 8, 128, "f16", 16),     # Llama-3-8B
    ("g7_d128_bf16", 28, 4, 128, "bf16", 16),   # Qwen2-7B-like
    ("g8_d64_f16", 32, 4, 64, "f16", 16),
    ("g4_d256_bf16", 8, 2, 256, "bf16", 32),
    ("g3_d80_f16_p12", 12, 4, 80, "f16", 12),   # D=80, page size not 2^k
    ("g6_d96_bf16_p8", 24, 4, 96, "bf16", 8),
    ("g16_d128_f16", 32, 2, 128, "f16", 16),    # two head blocks per KV head
    ("g3_d64_f16", 9, 3, 64, "f16", 16),        # SmolLM2-135M
]

# Schedule variants for --sweep (tuning): name, config, schedule overrides.
SWEEP_VARIANTS = [
    ("llama_t128_u4", CONFIGS[1], dict(threads=128, kv_unroll=4, max_splits=64)),
    ("llama_t128_u2", CONFIGS[1], dict(threads=128, kv_unroll=2, max_splits=64)),
    ("llama_t128_u8", CONFIGS[1], dict(threads=128, kv_unroll=8, max_splits=64)),
    ("llama_t256_u4", CONFIGS[1], dict(threads=256, kv_unroll=4, max_splits=64)),
    ("llama_t256_u2", CONFIGS[1], dict(threads=256, kv_unroll=2, max_splits=64)),
    ("llama_t64_u4", CONFIGS[1], dict(threads=64, kv_unroll=4, max_splits=64)),
    ("g7_t128_u2", CONFIGS[2], dict(threads=128, kv_unroll=2, max_splits=64)),
    ("g7_t128_u4", CONFIGS[2], dict(threads=128, kv_unroll=4, max_splits=64)),
    ("g7_t256_u2", CONFIGS[2], dict(threads=256, kv_unroll=2, max_splits=64)),
]
SWEEP_SHAPES = [(1, 1024), (1, 8192), (1, 32768), (4, 4096), (16, 4096),
                (64, 4096)]
SWEEP_SPLITS = [1, 2, 4, 8, 12, 16, 24, 32, 48, 64]

LENGTH_SETS = [
    [0, 1, 17, 1000, 4097],  # mixed lengths, B = 5
    [15, 16, 17],
    [4097],
    [0],
]
SPLITS = [1, 3, 8, 16, 64]


def mlir_for(name, hq, hkv, d, dtype, p):
    """A model of one decode_attention; fusion-compile wraps it in a kernel
    named <name>_k0_decode_attention."""
    t = dtype
    q = f"tensor<?x{hq}x{d}x{t}>"
    c = f"memref<?x{p}x{hkv}x{d}x{t}>"
    return f"""func.func @{name}(%q: {q}, %kc: {c}, %vc: {c},
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> {q} {{
  %o = fusion.decode_attention %q, %kc, %vc[%bt, %sl]
      : {q}, {c}, tensor<?x?xi32>, tensor<?xi32>
  return %o : {q}
}}
"""


def emit(out_dir, fusion_compile, ptxas, flags=()):
    """Compiles every configuration with fusion-compile and its options
    `flags` (no GPU needed): <name>.ptx and <name>.manifest.json; checks
    them with ptxas."""
    os.makedirs(out_dir, exist_ok=True)
    ok = True
    for cfg in CONFIGS:
        name = cfg[0]
        src = os.path.join(out_dir, name + ".mlir")
        with open(src, "w") as f:
            f.write(mlir_for(*cfg))
        res = subprocess.run([fusion_compile, *flags, src, "-o",
                              os.path.join(out_dir, name)],
                             capture_output=True, text=True)
        if res.returncode != 0:
            print(f"FAIL emit {name}: {res.stderr}")
            ok = False
            continue
        path = os.path.join(out_dir, name + ".ptx")
        ptx = open(path).read()
        if "__nv_" in ptx or ".extern .func" in ptx:
            print(f"FAIL {name}: external (libdevice) call in PTX")
            ok = False
        chip = next((f.split("=", 1)[1] for f in flags
                     if f.startswith("--chip=")), "sm_90")
        r = subprocess.run([ptxas, f"-arch={chip}", "-v", path, "-o", os.devnull],
                           capture_output=True, text=True)
        info = " ".join(l.split("info    :")[-1].strip() for l in r.stderr.splitlines()
                        if "registers" in l or "spill" in l)
        print(f"{'ok  ' if r.returncode == 0 else 'FAIL'} ptxas {name}: {info}")
        if r.returncode != 0:
            print(r.stderr)
            ok = False
    return ok


def sweep_schedule(cfg, overrides):
    """The #fusion.split_kv_attention_schedule a --sweep variant carries: the
    overrides (threads, kv_unroll, max_splits) on the defaults, with the
    members they imply for the sweep's configs (G <= 8: all heads of a group
    in one CTA; D = 128: 16 lanes per row). The compiler rejects a schedule
    whose implied members are not these, naming the right ones."""
    _, hq, hkv, d, _, _ = cfg
    m = dict(threads=256, max_splits=64, heads_per_cta=hq // hkv, head_blocks=1,
             vector_width=8, lanes_per_row=d // 8, kv_unroll=4,
             chunk_multiple=0, target_ctas=264, min_chunk_tokens=64,
             cluster_splits=0)  # launched without clusters here
    m.update(overrides)
    m["chunk_multiple"] = m["threads"] // m["lanes_per_row"] * m["kv_unroll"]
    members = ", ".join(f"{k} = {v}" for k, v in m.items())
    return f"#fusion.split_kv_attention_schedule<{members}>"


def kernel_mlir_for(name, cfg, overrides):
    """A pre-formed fusion.kernel with schedule overrides (for --sweep)."""
    _, hq, hkv, d, t, p = cfg
    q = f"tensor<?x{hq}x{d}x{t}>"
    c = f"memref<?x{p}x{hkv}x{d}x{t}>"
    sched = sweep_schedule(cfg, overrides)
    return f"""func.func @{name}(%q: {q}, %kc: {c}, %vc: {c},
    %bt: tensor<?x?xi32>, %sl: tensor<?xi32>) -> {q} {{
  %o = fusion.kernel @{name}_k0_decode_attention (%a = %q, %b = %kc, %c = %vc, %d = %bt, %e = %sl)
      : ({q}, {c}, {c}, tensor<?x?xi32>, tensor<?xi32>) -> {q}
      attributes {{strategy = #fusion.strategy<decode>, schedule = {sched}}} {{
    %0 = fusion.decode_attention %a, %b, %c[%d, %e]
        : {q}, {c}, tensor<?x?xi32>, tensor<?xi32>
    fusion.yield %0 : {q}
  }}
  return %o : {q}
}}
"""


def emit_sweep(out_dir, fusion_compile):
    os.makedirs(out_dir, exist_ok=True)
    ok = True
    for name, cfg, overrides in SWEEP_VARIANTS:
        src = os.path.join(out_dir, name + ".mlir")
        with open(src, "w") as f:
            f.write(kernel_mlir_for(name, cfg, overrides))
        res = subprocess.run([fusion_compile, src, "-o",
                              os.path.join(out_dir, name)],
                             capture_output=True, text=True)
        print(f"{'ok  ' if res.returncode == 0 else 'FAIL'} emit {name} {res.stderr.strip()}")
        ok &= res.returncode == 0
    return ok


# ----------------------------------------------------------------------------
# bf16 helpers (numpy has no bf16: keep raw uint16 bits)
# ----------------------------------------------------------------------------

def to_bf16_bits(x32):
    u = np.ascontiguousarray(x32, dtype=np.float32).view(np.uint32)
    rounding = ((u >> 16) & 1) + 0x7FFF
    bits = ((u + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(x32)
    bits[nan] = 0x7FC0
    return bits


def bf16_bits_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


class DType:
    def __init__(self, name):
        self.name = name
        self.tol = 2e-3 if name == "f16" else 1e-2

    def encode(self, x32):
        """float32 -> (device-format numpy array, exact float64 values)."""
        if self.name == "f16":
            h = x32.astype(np.float16)
            return h, h.astype(np.float64)
        bits = to_bf16_bits(x32)
        return bits, bf16_bits_to_f32(bits).astype(np.float64)

    def nan_fill(self, shape):
        if self.name == "f16":
            return np.full(shape, np.nan, dtype=np.float16)
        return np.full(shape, 0x7FC0, dtype=np.uint16)

    def decode(self, arr):
        if self.name == "f16":
            return arr.astype(np.float64)
        return bf16_bits_to_f32(arr).astype(np.float64)

    @property
    def np_dtype(self):
        return np.float16 if self.name == "f16" else np.uint16


# ----------------------------------------------------------------------------
# Problem construction and reference
# ----------------------------------------------------------------------------

def build_problem(rng, cfg, lens, big_cache=False):
    name, hq, hkv, d, dtname, p = cfg
    dt = DType(dtname)
    b = len(lens)
    pages_per_seq = [max(1, math.ceil(l / p)) if l > 0 else 0 for l in lens]
    max_pages = max(pages_per_seq + [1]) + 2
    used = sum(pages_per_seq)
    poison_page = used  # a page full of NaN, also used as padding in the table
    num_pages = used + 3
    page_base = 0
    if big_cache:
        # Put the used pages past 2^31 elements: exercises 64-bit offsets.
        page_elems = p * hkv * d
        page_base = (2**31) // page_elems + 7
        num_pages = page_base + used + 3
        poison_page = page_base + used
    perm = rng.permutation(used) + page_base
    bt = np.full((b, max_pages), poison_page, dtype=np.int32)
    q32 = (rng.standard_normal((b, hq, d)) * 2.0).astype(np.float32)
    q_dev, q64 = dt.encode(q32)
    k_pages = {}
    v_pages = {}
    ref = np.zeros((b, hq, d))
    g = hq // hkv
    scale = 1.0 / math.sqrt(d)
    nxt = 0
    for i, l in enumerate(lens):
        n = pages_per_seq[i]
        ids = perm[nxt:nxt + n]
        nxt += n
        bt[i, :n] = ids
        if l == 0:
            continue
        k32 = rng.standard_normal((n * p, hkv, d)).astype(np.float32)
        v32 = rng.standard_normal((n * p, hkv, d)).astype(np.float32)
        k32[l:] = np.nan  # unused slots of the last page
        v32[l:] = np.nan
        kd, k64 = dt.encode(k32)
        vd, v64 = dt.encode(v32)
        for j, pid in enumerate(ids):
            k_pages[int(pid)] = kd[j * p:(j + 1) * p]
            v_pages[int(pid)] = vd[j * p:(j + 1) * p]
        # reference in float64
        kk = k64[:l].reshape(l, hkv, d)
        vv = v64[:l].reshape(l, hkv, d)
        qq = q64[i].reshape(hkv, g, d)
        s = np.einsum("hgd,lhd->hgl", qq, kk) * scale
        s -= s.max(axis=-1, keepdims=True)
        w = np.exp(s)
        w /= w.sum(axis=-1, keepdims=True)
        ref[i] = np.einsum("hgl,lhd->hgd", w, vv).reshape(hq, d)
    return dict(dt=dt, q=q_dev, bt=bt, lens=np.array(lens, dtype=np.int32),
                k_pages=k_pages, v_pages=v_pages, num_pages=num_pages,
                max_pages=max_pages, ref=ref, page_base=page_base,
                poison_page=poison_page)


def upload_cache(cp, prob, cfg, pages):
    name, hq, hkv, d, dtname, p = cfg
    dt = prob["dt"]
    num_pages = prob["num_pages"]
    cache = cp.empty((num_pages, p, hkv, d), dtype=dt.np_dtype)
    # NaN everywhere we might touch by mistake: the region around the used
    # pages (all of it for a small cache).
    lo = prob["page_base"]
    cache[lo:] = cp.asarray(dt.nan_fill((1, p, hkv, d)))
    if lo > 0:
        cache[:64] = cp.asarray(dt.nan_fill((1, p, hkv, d)))
    for pid, data in pages.items():
        cache[pid] = cp.asarray(data)
    return cache


def runtime_bindings():
    """The fusion package (the runtime's bindings), needed on the GPU side
    only; the --emit step runs without it."""
    try:
        import fusion
    except ImportError:
        sys.exit("check_attention.py needs the fusion package on the GPU "
                 "machine: scripts/python.sh (or pip install .)")
    return fusion


class Kernel:
    """The attention kernel of a config's manifest: its own entry, or with
    `variant` = i the entry of its i-th batch variant (the tensor-core loop,
    docs/abi.md 3.2), which takes the same arguments on the same grid."""

    def __init__(self, cp, ptx_dir, cfg, name=None, variant=None):
        self.cp = cp
        self.cfg = cfg
        name = name or cfg[0]
        path = os.path.join(ptx_dir, name + ".manifest.json")
        with open(path) as f:
            manifest = json.load(f)
        (kernel,) = manifest["kernels"]
        # The runtime's view of it: the num_splits policy the bench uses.
        self.model = runtime_bindings().Model.load(path)
        launch = kernel if variant is None else kernel["variants"][variant]
        self.label = cfg[0] + ("" if variant is None else "/" + launch["entry"].rsplit("_", 1)[1])
        self.module = cp.RawModule(path=os.path.join(ptx_dir, name + ".ptx"))
        self.fn = self.module.get_function(launch["entry"])
        self.threads = int(launch["block"][0])
        self.smem = int(launch.get("dynamic_shared_bytes", 0))
        if self.smem:
            self.fn.max_dynamic_shared_size_bytes = self.smem
        self.max_splits = int(kernel["schedule"]["max_splits"])
        self.cluster_splits = int(launch["schedule"].get("cluster_splits", 0))
        self.grid_y = int(kernel["grid"][1])
        self.target_ctas = int(kernel["schedule"]["target_ctas"])
        self.min_chunk = int(kernel["schedule"]["min_chunk_tokens"])
        roles = [p["role"] for p in kernel["params"]]
        # With a CTA-ring variant (--attention-cta-ring) the caches' tensor
        # maps follow the workspaces (docs/abi.md 3.3).
        self.maps = [p for p in kernel["params"] if p["kind"] == "tensor_map"]
        expected = ["query", "key_cache", "value_cache", "block_table",
                    "seq_lens", "output", "partial_out", "partial_stats",
                    "split_counters"] + [p["role"] for p in self.maps] + [
                    "batch", "max_pages", "num_splits"]
        assert roles == expected, f"unexpected ABI {roles}"
        assert [p["role"] for p in self.maps] in (
            [], ["key_cache_map", "value_cache_map"]), roles
        self.encoded = {}
        assert kernel["grid"][0] == "num_splits" and kernel["grid"][2] == "batch"
        assert launch["grid"] == kernel["grid"]
        self.counters = None

    @staticmethod
    def all_of(cp, ptx_dir, cfg, name=None):
        """The kernel and each of its batch variants."""
        with open(os.path.join(ptx_dir, (name or cfg[0]) + ".manifest.json")) as f:
            (kernel,) = json.load(f)["kernels"]
        return [Kernel(cp, ptx_dir, cfg, name)] + [
            Kernel(cp, ptx_dir, cfg, name, v)
            for v in range(len(kernel.get("variants", [])))]

    def cluster_x(self, num_splits):
        """The cluster the runtime would launch num_splits splits in."""
        return runtime_bindings().cluster_x(self.cluster_splits, num_splits)

    def run(self, prob, kc, vc, num_splits, out=None, cluster_x=1):
        cp = self.cp
        name, hq, hkv, d, dtname, p = self.cfg
        b = len(prob["lens"])
        dt = prob["dt"]
        q = cp.asarray(prob["q"])
        bt = cp.asarray(prob["bt"])
        sl = cp.asarray(prob["lens"])
        if out is None:
            out = cp.asarray(dt.nan_fill((b, hq, d)))  # poisoned
        ms = self.max_splits
        part_o = cp.full((b, hq, ms, d), np.nan, dtype=cp.float32)
        part_s = cp.full((b, hq, ms, 2), np.nan, dtype=cp.float32)
        if self.counters is None or self.counters.shape[0] < b:
            self.counters = cp.zeros((max(b, 8), self.grid_y), dtype=cp.int32)
        args = (q, kc, vc, bt, sl, out, part_o, part_s, self.counters,
                *self.cache_maps(kc, vc),
                np.int32(b), np.int32(prob["max_pages"]), np.int32(num_splits))
        grid = (num_splits, self.grid_y, b)
        if cluster_x > 1:
            # Here, not at the top: check_kernels needs numpy, --emit does not.
            from check_kernels import launch_in_clusters
            launch_in_clusters(cp, self.fn, grid, self.threads, self.smem, args,
                               cluster_x)
        else:
            self.fn(grid, (self.threads, 1, 1), args, shared_mem=self.smem)
        self.last_stats = part_s
        return out

    def cache_maps(self, kc, vc):
        """The tensor maps of the caches kc and vc (check_kernels'
        encode_tensor_map: [pages * P, Hkv * D]), encoded once per pair."""
        if not self.maps:
            return ()
        key = (kc.data.ptr, vc.data.ptr, kc.shape[0])
        if key not in self.encoded:
            from check_kernels import encode_tensor_map
            self.encoded[key] = tuple(
                encode_tensor_map(self.cp, p, kc if p["tensor_map"]["of"] == 1 else vc)
                for p in self.maps)
        return self.encoded[key]

    def partials_written(self, num_splits, cluster_x=1):
        """With several splits combined through the workspaces every CTA
        writes its (m, l): l is never NaN. Combined in a cluster, none does:
        the statistics stay NaN (so the cluster path did run)."""
        if num_splits <= 1:
            return True
        ns = min(num_splits, self.max_splits)
        l = self.last_stats[:, :, :ns, 1].get()
        if cluster_x > 1:
            return bool(np.isnan(l).all())
        return bool(np.isfinite(l).all())

    def counters_zero(self):
        return int(self.cp.count_nonzero(self.counters).get()) == 0


def compare(prob, out_dev):
    dt = prob["dt"]
    out = dt.decode(out_dev.get())
    ref = prob["ref"]
    finite = bool(np.isfinite(out).all())
    err = np.abs(out - ref)
    max_abs = float(np.nanmax(err)) if finite else float("inf")
    denom = float(np.linalg.norm(ref))
    rel = float(np.linalg.norm(out - ref) / denom) if denom > 0 else max_abs
    zero_rows_ok = all(
        np.all(out[i] == 0.0) for i, l in enumerate(prob["lens"]) if l == 0)
    ok = finite and zero_rows_ok and rel < dt.tol and (denom > 0 or max_abs == 0)
    return ok, max_abs, rel, finite, zero_rows_ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--emit", help="compile PTX into this directory (no GPU)")
    ap.add_argument("--fusion-compile", default="build/bin/fusion-compile")
    ap.add_argument("--emit-flags", default="",
                    help="fusion-compile options of --emit (e.g. "
                         "\"--chip=sm_90a --attention-cta-ring\")")
    ap.add_argument("--ptxas", default="/usr/local/cuda/bin/ptxas")
    ap.add_argument("--ptx-dir", default=".gpu/attention")
    ap.add_argument("--sanitize", action="store_true",
                    help="one small configuration (for compute-sanitizer)")
    ap.add_argument("--bench", action="store_true")
    ap.add_argument("--emit-sweep", help="compile the --sweep variants here")
    ap.add_argument("--sweep", help="time the schedule variants in this dir")
    ap.add_argument("--json", help="write the results table here")
    args = ap.parse_args()

    if args.emit or args.emit_sweep:
        ok = True
        if args.emit:
            ok &= emit(args.emit, args.fusion_compile, args.ptxas,
                       args.emit_flags.split())
        if args.emit_sweep:
            ok &= emit_sweep(args.emit_sweep, args.fusion_compile)
        return 0 if ok else 1

    try:
        import cupy as cp
        cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001
        print(f"SKIP: no GPU / CuPy ({e})")
        return 0

    if args.sanitize:
        # One cudaMalloc per array, so that compute-sanitizer sees the true
        # bounds of every buffer (the pool would hide overruns).
        cp.cuda.set_allocator(None)
    rng = np.random.default_rng(1234)
    results = []
    all_ok = True
    configs = CONFIGS
    length_sets = LENGTH_SETS
    splits = SPLITS
    if args.sanitize:
        configs = [c for c in CONFIGS if c[0] in ("g7_d128_bf16", "g3_d80_f16_p12")]
        length_sets = [[0, 1, 17, 100, 33]]
        splits = [1, 3, 8, 64]
    for cfg, kern in [(c, k) for c in configs
                      for k in Kernel.all_of(cp, args.ptx_dir, c)]:
        for lens in length_sets:
            prob = build_problem(rng, cfg, lens)
            kc = upload_cache(cp, prob, cfg, prob["k_pages"])
            vc = upload_cache(cp, prob, cfg, prob["v_pages"])
            for ns, cx in [(n, c) for n in splits
                           for c in sorted({1, kern.cluster_x(n)})]:
                # Twice: the second launch checks that the counters were reset.
                for rep in range(2):
                    out = kern.run(prob, kc, vc, ns, cluster_x=cx)
                    cp.cuda.runtime.deviceSynchronize()
                ok, max_abs, rel, finite, zr = compare(prob, out)
                cz = kern.counters_zero()
                pw = kern.partials_written(ns, cx)
                # The two combines do the same arithmetic (docs/abi.md 3.4).
                bits = out.get().view(np.uint16)
                same = cx == 1 or np.array_equal(bits, unclustered)
                unclustered = bits
                ok = ok and cz and pw and same
                all_ok &= ok
                row = dict(config=kern.label, lens=lens, splits=ns, cluster_x=cx,
                           max_abs=max_abs, rel=rel, finite=finite, zero_rows=zr,
                           counters=cz, ok=ok)
                results.append(row)
                print(f"{'ok  ' if ok else 'FAIL'} {kern.label:20s} lens={str(lens):24s} "
                      f"splits={ns:2d} cluster={cx} max_abs={max_abs:.3e} rel={rel:.3e}"
                      f"{'' if finite else ' NONFINITE'}{'' if zr else ' ZERO-ROWS'}"
                      f"{'' if cz else ' COUNTERS'}{'' if pw else ' PARTIALS'}"
                      f"{'' if same else ' NOT-BIT-IDENTICAL'}", flush=True)
            del kc, vc
    if not args.sanitize:
        # 64-bit page offsets: the used pages live past 2^31 elements.
        cfg = CONFIGS[1]
        prob = build_problem(rng, cfg, [300, 4097], big_cache=True)
        kc = upload_cache(cp, prob, cfg, prob["k_pages"])
        vc = upload_cache(cp, prob, cfg, prob["v_pages"])
        for kern, ns in [(k, n) for k in Kernel.all_of(cp, args.ptx_dir, cfg)
                         for n in (1, 7)]:
            out = kern.run(prob, kc, vc, ns)
            cp.cuda.runtime.deviceSynchronize()
            ok, max_abs, rel, finite, zr = compare(prob, out)
            all_ok &= ok
            results.append(dict(config=kern.label + "_bigcache", lens=[300, 4097],
                                splits=ns, max_abs=max_abs, rel=rel, ok=ok))
            print(f"{'ok  ' if ok else 'FAIL'} {kern.label + '_bigcache':20s} "
                  f"pages>2^31 elems splits={ns:2d} max_abs={max_abs:.3e} rel={rel:.3e}",
                  flush=True)
        del kc, vc
        cp.get_default_memory_pool().free_all_blocks()
    if args.bench:
        bench(cp, args.ptx_dir, rng)
    if args.sweep:
        all_ok &= check_variants(cp, args.sweep, rng)
        sweep(cp, args.sweep, rng, args.json)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    print("ALL OK" if all_ok else "SOME CHECKS FAILED")
    return 0 if all_ok else 1


BENCH_SHAPES = {
    "g4_d128_f16": ((1, 1024), (1, 8192), (1, 32768), (4, 4096), (16, 4096),
                    (64, 4096), (16, 512), (64, 512)),
    "g7_d128_bf16": ((1, 1024), (4, 4096), (16, 4096), (64, 4096)),
    "g3_d64_f16": ((1, 512), (4, 512), (16, 512), (64, 512), (16, 4096)),
}


def bench(cp, ptx_dir, rng):
    """The kernel and each of its batch variants (from their min_batch) with
    the manifest's num_splits policy, launched without clusters (the runtime
    may launch fewer splits, in clusters: DecodeStep::numSplitsFor), L2-cold
    (the caches rotate over copies totalling >= 400 MB), at BENCH_SHAPES: Llama-3-8B (32/8, D=128, f16),
    G=7 (28/4, D=128, bf16) and SmolLM2-135M (9/3, D=64, f16)."""
    for cfg in [c for c in CONFIGS if c[0] in BENCH_SHAPES]:
        name, hq, hkv, d, dtname, p = cfg
        with open(os.path.join(ptx_dir, name + ".manifest.json")) as f:
            (kernel,) = json.load(f)["kernels"]
        min_batch = [1] + [v["min_batch"] for v in kernel.get("variants", [])]
        for kern, first in zip(Kernel.all_of(cp, ptx_dir, cfg), min_batch):
            for b, l in BENCH_SHAPES[name]:
                if b >= first:
                    bench_one(cp, rng, kern, b, l)


def timing_problem(cp, rng, cfg, b, l):
    """Random inputs of config `cfg` at batch b and length l for timing:
    (K+V bytes, pages per sequence, kc, vc, q, seq_lens, block tables), the
    caches `copies` times over (>= 400 MB in all, so that L2 holds none of
    them when the launches rotate over the block tables)."""
    name, hq, hkv, d, dtname, p = cfg
    pages = math.ceil(l / p)
    kv_bytes = 2 * b * l * hkv * d * 2
    copies = max(1, min(32, math.ceil(400e6 / kv_bytes)))
    num_pages = copies * b * pages
    kc = cp.random.standard_normal((num_pages, p, hkv, d), dtype=cp.float32).astype(cp.float16)
    vc = cp.random.standard_normal((num_pages, p, hkv, d), dtype=cp.float32).astype(cp.float16)
    q = cp.random.standard_normal((b, hq, d), dtype=cp.float32).astype(cp.float16)
    if dtname == "bf16":  # any bits will do for timing
        kc, vc, q = kc.view(cp.uint16), vc.view(cp.uint16), q.view(cp.uint16)
    sl = cp.asarray(np.full(b, l, dtype=np.int32))
    bts = [cp.asarray((rng.permutation(b * pages) + c * b * pages)
                      .astype(np.int32).reshape(b, pages))
           for c in range(copies)]
    return kv_bytes, pages, kc, vc, q, sl, bts


def bench_one(cp, rng, kern, b, l):
    """Times `kern` at batch b and length l (time_launches)."""
    name, hq, hkv, d, dtname, p = kern.cfg
    kv_bytes, pages, kc, vc, q, sl, bts = timing_problem(cp, rng, kern.cfg, b, l)
    out = cp.empty_like(q)
    ms = kern.max_splits
    part_o = cp.empty((b, hq, ms, d), dtype=cp.float32)
    part_s = cp.empty((b, hq, ms, 2), dtype=cp.float32)
    counters = cp.zeros((b, kern.grid_y), dtype=cp.int32)
    ns = kern.model.default_num_splits(b, l)
    maps = kern.cache_maps(kc, vc)
    arg_sets = [(q, kc, vc, bt, sl, out, part_o, part_s, counters, *maps,
                 np.int32(b), np.int32(pages), np.int32(ns)) for bt in bts]
    t = time_launches(cp, kern.fn, (ns, kern.grid_y, b),
                      (kern.threads, 1, 1), arg_sets, kern.smem)
    print(f"bench {kern.label:20s} B={b:3d} L={l:6d} splits={ns:2d} "
          f"threads={kern.threads}: {t:8.1f} us  "
          f"{kv_bytes / t / 1e6:.2f} TB/s (K+V bytes)", flush=True)
    kern.encoded.clear()
    cp.get_default_memory_pool().free_all_blocks()


def time_launches(cp, fn, grid, block, arg_sets, smem=0, reps=5, per=20):
    """Median over `reps` of the mean time of `per` back-to-back launches
    with `smem` bytes of dynamic shared memory (rotating over arg_sets so
    that L2 holds none of the caches)."""
    for a in arg_sets[:2]:
        fn(grid, block, a, shared_mem=smem)
    res = []
    for _ in range(reps):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        for i in range(per):
            fn(grid, block, arg_sets[i % len(arg_sets)], shared_mem=smem)
        e.record()
        e.synchronize()
        res.append(cp.cuda.get_elapsed_time(s, e) * 1000 / per)
    return sorted(res)[len(res) // 2]


def check_variants(cp, sweep_dir, rng):
    """Correctness of every schedule variant (mixed lengths, 1..64 splits)."""
    ok_all = True
    for name, cfg, _ in SWEEP_VARIANTS:
        kern = Kernel(cp, sweep_dir, cfg, name)
        prob = build_problem(rng, cfg, [0, 1, 17, 1000, 4097])
        kc = upload_cache(cp, prob, cfg, prob["k_pages"])
        vc = upload_cache(cp, prob, cfg, prob["v_pages"])
        for ns in (1, 3, 16, 64):
            out = kern.run(prob, kc, vc, ns)
            cp.cuda.runtime.deviceSynchronize()
            ok, max_abs, rel, finite, zr = compare(prob, out)
            ok = ok and kern.counters_zero() and kern.partials_written(ns)
            ok_all &= ok
            print(f"{'ok  ' if ok else 'FAIL'} variant {name:14s} splits={ns:2d} "
                  f"max_abs={max_abs:.3e} rel={rel:.3e}", flush=True)
    return ok_all


def sweep(cp, sweep_dir, rng, json_path):
    rows = []
    groups = {}
    for name, cfg, _ in SWEEP_VARIANTS:
        groups.setdefault(cfg, []).append(name)
    for cfg, names in groups.items():
        _, hq, hkv, d, dtname, p = cfg
        kerns = {n: Kernel(cp, sweep_dir, cfg, n) for n in names}
        for b, l in SWEEP_SHAPES:
            kv_bytes, pages, kc, vc, q, sl, bts = timing_problem(cp, rng, cfg, b, l)
            out = cp.empty_like(q)
            best = None
            for n, k in kerns.items():
                ms = k.max_splits
                part_o = cp.empty((b, hq, ms, d), dtype=cp.float32)
                part_s = cp.empty((b, hq, ms, 2), dtype=cp.float32)
                counters = cp.zeros((b, k.grid_y), dtype=cp.int32)
                for ns in SWEEP_SPLITS:
                    if ns > ms or (ns > 1 and math.ceil(l / ns) < 16):
                        continue
                    arg_sets = [(q, kc, vc, bt, sl, out, part_o, part_s, counters,
                                 np.int32(b), np.int32(pages), np.int32(ns))
                                for bt in bts]
                    t = time_launches(cp, k.fn, (ns, k.grid_y, b), (k.threads, 1, 1),
                                      arg_sets)
                    tbs = kv_bytes / t / 1e6
                    rows.append(dict(variant=n, batch=b, len=l, splits=ns,
                                     us=t, tbs=tbs))
                    if best is None or t < best[0]:
                        best = (t, n, ns)
                if int(cp.count_nonzero(counters).get()) != 0:
                    print(f"FAIL counters not reset: {n}")
            line = " ".join(f"{r['variant'].split('_', 1)[1]}/{r['splits']}:{r['us']:.1f}"
                            for r in rows if r["batch"] == b and r["len"] == l
                            and r["variant"] in names)
            print(f"sweep {cfg[0]} B={b} L={l} ({kv_bytes/1e6:.0f} MB K+V): best "
                  f"{best[1]} splits={best[2]} {best[0]:.1f} us "
                  f"{kv_bytes / best[0] / 1e6:.2f} TB/s", flush=True)
            print("   ", line, flush=True)
            del kc, vc, bts
            cp.get_default_memory_pool().free_all_blocks()
    if json_path:
        with open(json_path + ".sweep.json", "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
