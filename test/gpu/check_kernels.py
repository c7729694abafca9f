#!/usr/bin/env python3
"""GPU check of the projection, elementwise and back-half kernels (fusion-compile output).

For every <name>.<strategy>.ptx / .manifest.json pair in --dir, this script
launches the kernels of each function in manifest order (skipping attention,
which test/gpu/check_attention.py covers, and the kernels that read its
results: the later layers of a multi-layer module, which the reference of
one front half does not model), each as the batch variant the
case's batch selects (docs/abi.md 3.2; batches 2 to 130 exercise the
tensor-core and GEMM-shaped projection variants), binding buffers exactly as the
manifest says (function arguments, earlier kernels' outputs), on fresh random
inputs with NaN-poisoned outputs and caches, and compares every output with a
float64 numpy reference of design.md 2.1 (the same math as
runtime/src/Reference.cpp):

  rmsnorm    h = round(x + r); y = round(h * (1/sqrt(mean(h^2) + eps)) * w)
             (w + 1 with unit_offset); layernorm with the biased variance
  qkv_proj   round(y @ W^T + b)
  rope       inv_freq in fp32 as Hugging Face computes it, angle =
             float32(pos) * inv_freq (one fp32 multiply), cos/sin in float64,
             (a, b) -> round(a cos - b sin), round(b cos + a sin)
  kv_append  cache[block_table[b, pos // P], pos % P, h, :] = k / v

A front half that starts with the token embedding (layer 0 of a whole
model: --fusion-form-kernels rule 7; Inputs/embedding_front_half.mlir)
takes x = table[clip(tokens, 0, V - 1)] (ids 0, V - 1 and four outside
[0, V) from batch 6) and checks the embedded rows it yields bit for bit;
unfused, the lone embedding kernel makes them.

Pass: ||out - ref|| / ||ref|| < 2e-3 (f16) or 1e-2 (bf16) for every output,
no NaN left in any output, every written cache slot right and every other
cache element still NaN, every zero_init workspace zero again after the
launch (the split-K arrival counters are reset for the next launch). It also checks that the fused (decode) and unfused
(none) kernels agree on the same inputs.

Functions whose kernels are all embedding, argmax or silu_mul (e.g.
test/Conversion/FusionToGPU/Inputs/embed_argmax_swiglu.mlir) run at
batches SMALL_BATCHES, each kernel checked against a reference of its own
inputs:

  embedding  rows clamp(tokens[b], 0, V - 1) of the table, bit for bit (the
             table is random bits, NaN payloads included; from batch 6 the
             ids include 0, V - 1 and four outside [0, V))
  argmax     the exact index (largest non-NaN value, lowest index of equal
             ones, -0 == +0, 0 for an all-NaN row), on random rows and on
             the crafted rows of ARGMAX_ROWS (ties within a vector and
             across threads, NaN, all NaN, -0/+0 both ways, infinities,
             many ties); the reference itself is checked against each
             crafted row's index by construction (also in a dry run)
  silu_mul   round(g / (1 + exp(-g)) * u) in float64, within the relative
             tolerance and one ulp of f16/bf16 everywhere (gates from -100
             to 100 included)

In a dry run no kernel runs: the plumbing (inputs, bindings, references)
runs, kernel outputs are reported as DRY (not evaluated), and only the
checks that need no GPU count.

Each kernel is launched as the runtime would launch it: the batch variant
and grid come from the fusion package (fusion.Model.launch), not from a
second reading of the manifest here.

Usage (on the GPU machine; CuPy, numpy and the fusion package):
  python3 test/gpu/check_kernels.py --dir .gpu/proj [--only NAME] [--bench]
  python3 test/gpu/check_kernels.py --dir .gpu/proj --dry-run   # no GPU: numpy + fusion,
                                                             # exercises the plumbing
Exit status 0 iff every case passes.
"""

import argparse
import functools
import glob
import json
import math
import os
import sys
import time

import numpy as np

# ---------------------------------------------------------------------------
# dtypes
# ---------------------------------------------------------------------------


def f32_to_bf16_bits(a):
    a = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    u = a.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    rounded[np.isnan(a)] = 0x7FC0
    return rounded


def bf16_bits_to_f64(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(
        np.float32).astype(np.float64)


class DType:
    def __init__(self, name):
        self.name = name
        self.storage = {"f16": np.float16, "bf16": np.uint16,
                        "f32": np.float32, "i32": np.int32}[name]
        self.tol = {"f16": 2e-3, "bf16": 1e-2}.get(name, 1e-6)

    def encode(self, values):
        """float64 values -> storage array (round to nearest even)."""
        values = np.asarray(values, dtype=np.float64)
        if self.name == "f16":
            return values.astype(np.float16)
        if self.name == "bf16":
            return f32_to_bf16_bits(values.astype(np.float32))
        return values.astype(self.storage)

    def decode(self, stored):
        stored = np.asarray(stored)
        if self.name == "bf16":
            return bf16_bits_to_f64(stored)
        return stored.astype(np.float64)

    def round(self, values):
        return self.decode(self.encode(values))

    def poison(self):
        """What fresh outputs and caches are filled with: NaN, or -1 for i32
        (which no kernel output here may keep)."""
        return {"f16": np.float16(np.nan), "bf16": np.uint16(0x7FC0),
                "f32": np.float32(np.nan), "i32": np.int32(-1)}[self.name]


# ---------------------------------------------------------------------------
# Reference (float64, rounding at op boundaries)
# ---------------------------------------------------------------------------


def ref_rmsnorm(dt, x, r, w, eps, unit_offset):
    h = dt.round(x + r) if r is not None else x
    ms = np.mean(h * h, axis=1, keepdims=True)
    ww = (1.0 + w) if unit_offset else w
    return dt.round(h * (1.0 / np.sqrt(ms + eps)) * ww), h


def ref_layernorm(dt, x, w, b, eps):
    mean = np.mean(x, axis=1, keepdims=True)
    var = np.mean((x - mean) ** 2, axis=1, keepdims=True)
    return dt.round((x - mean) * (1.0 / np.sqrt(var + eps)) * w + b)


def inv_freq_f32(theta, rd, scaling):
    """runtime/src/Reference.cpp invFreqF32 (Hugging Face's fp32 math)."""
    f32 = np.float32
    theta32 = f32(theta)
    out = []
    for i in range(rd // 2):
        exponent = f32(2 * i) / f32(rd)
        power = f32(float(theta32) ** float(exponent))
        inv = f32(1.0) / power
        if scaling:
            factor = f32(scaling["factor"])
            low = f32(scaling["low_freq_factor"])
            orig_d = float(scaling["original_max_position"])
            orig = f32(orig_d)
            low_wavelen = f32(orig_d / scaling["low_freq_factor"])
            high_wavelen = f32(orig_d / scaling["high_freq_factor"])
            span = f32(scaling["high_freq_factor"] - scaling["low_freq_factor"])
            wavelen = (f32(1.0) / inv) * f32(2.0 * math.pi)
            if wavelen > low_wavelen:
                inv = inv / factor
            elif not (wavelen < high_wavelen):
                smooth = ((f32(1.0) / wavelen) * orig - low) / span
                inv = (f32(1.0) - smooth) * inv / factor + smooth * inv
        out.append(f32(inv))
    return np.array(out, dtype=np.float32)


def ref_rope(dt, t, pos, attrs):
    """t: [B, heads, D] float64 (already rounded), pos: [B] int."""
    D = t.shape[2]
    rd = attrs.get("rotary_dim", D)
    inv = inv_freq_f32(attrs["theta"], rd, attrs.get("scaling"))
    angle = (pos.astype(np.float32)[:, None] * inv[None, :]).astype(np.float64)
    c = np.cos(angle)[:, None, :]
    s = np.sin(angle)[:, None, :]
    out = t.copy()
    half = rd // 2
    if attrs["pairing"] == "neox":
        ia, ib = np.arange(half), np.arange(half) + half
    else:
        ia, ib = 2 * np.arange(half), 2 * np.arange(half) + 1
    a, b = t[:, :, ia], t[:, :, ib]
    out[:, :, ia] = dt.round(a * c - b * s)
    out[:, :, ib] = dt.round(b * c + a * s)
    return out


# ---------------------------------------------------------------------------
# Manifest helpers
# ---------------------------------------------------------------------------


def resolve_shape(shape, env):
    return tuple(int(env[d]) if isinstance(d, str) else int(d) for d in shape)


def kernel_ops(kernel):
    return {op["op"]: op["attributes"] for op in kernel["ops"]}


@functools.lru_cache(maxsize=None)
def runtime_model(manifest_path, function):
    """The runtime's view of one function of a manifest (fusion.Model)."""
    try:
        import fusion
    except ImportError:
        sys.exit("this script needs the fusion package (scripts/python.sh, or "
                 "pip install .; docs/runtime.md for an offline machine)")
    return fusion.Model.load(manifest_path, function)


def runtime_launch(manifest_path, kernel, batch, env):
    """What the runtime launches for `kernel` (a manifest kernel) at `batch`:
    fusion.Model.launch, the batch variant of docs/abi.md 3.2 with its grid
    under env's max_pages / num_splits; a dict with entry, variant (-1: the
    kernel's own launch), grid, block, dynamic_shared_bytes and
    static_shared_bytes. The parameters are the kernel's either way."""
    return runtime_model(manifest_path, kernel["function"]).launch(
        kernel["entry"], batch, env.get("max_pages", 1), env.get("num_splits", 1))


def launch_label(kernel, launch):
    """The kernel's name, with the variant's entry where one ran and the
    cluster size where it ran in thread-block clusters."""
    label = kernel["name"] if launch["variant"] < 0 else \
        f"{kernel['name']}[{launch['entry']}]"
    cluster = launch.get("cluster_x", 1)
    return label if cluster <= 1 else f"{label} (cluster {cluster})"


def launch_in_clusters(cp, fn, grid, threads, smem, args, cluster_x):
    """Launches the CuPy function `fn` on the current stream in thread-block
    clusters of (cluster_x, 1, 1) CTAs (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    CuPy's own launch has no cluster option)."""
    import ctypes
    from cuda.bindings import driver as drv
    cfg = drv.CUlaunchConfig()
    cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
    cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = threads, 1, 1
    cfg.sharedMemBytes = smem
    cfg.hStream = drv.CUstream(cp.cuda.get_current_stream().ptr)
    attr = drv.CUlaunchAttribute()
    attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster_x, 1, 1
    cfg.attrs = [attr]
    cfg.numAttrs = 1
    pointer = [isinstance(a, cp.ndarray) for a in args]
    values = tuple(a.data.ptr if p else int(a) for a, p in zip(args, pointer))
    types = tuple(ctypes.c_void_p if p else ctypes.c_int32 for p in pointer)
    function = drv.CUfunction(fn.kernel.ptr)  # RawKernel -> cuda.Function
    (err,) = drv.cuLaunchKernelEx(cfg, function, (values, types), 0)
    if err != drv.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuLaunchKernelEx in clusters of {cluster_x}: {err}")


SUPPORTED_KINDS = {"projection", "norm_row", "rope", "kv_append",
                   "rope_kv_append", "embedding"}


class Case:
    """One (module, batch, positions) run."""

    def __init__(self, name, batch, positions, outlier=False, big_pages=False):
        self.name = name
        self.batch = batch
        self.positions = np.array(positions, dtype=np.int32)
        self.outlier = outlier
        self.big_pages = big_pages

    def label(self):
        shown = list(self.positions)
        if len(shown) > 8:  # keep the report narrow at large batches
            shown = shown[:4] + ["..."] + shown[-1:]
        pos = ",".join(str(p) for p in shown)
        extra = (" outlier" if self.outlier else "") + \
            (" pages>2^17" if self.big_pages else "")
        return f"B={self.batch} pos=[{pos}]{extra}"


def argument_roles(manifest, fn):
    """Function argument index -> the role of the first kernel parameter
    bound to it (the runtime's Model.argumentRole)."""
    roles = {}
    for k in manifest["kernels"]:
        if k["function"] != fn["name"]:
            continue
        for p in k["params"]:
            b = p.get("binding", {})
            if p["kind"] == "input" and "argument" in b:
                roles.setdefault(b["argument"], p["role"])
    return roles


def make_inputs(manifest, fn, case, rng):
    """Random function arguments (numpy), by the roles their users give them."""
    roles = argument_roles(manifest, fn)
    B = case.batch
    page_size = None
    for a in fn["arguments"]:
        if roles.get(a["index"]) == "key_cache":
            page_size = a["shape"][1]
    max_pos = int(case.positions.max())
    max_pages = (max_pos // page_size + 1) if page_size else 1
    num_pages = 140000 if case.big_pages else 4 * B + 8
    env = {"batch": B, "max_pages": max_pages, "num_pages": num_pages}
    args = {}
    hidden = None
    for a in fn["arguments"]:
        role = roles.get(a["index"], "unused")
        dt = DType(a["dtype"])
        shape = resolve_shape(a["shape"], env)
        if role in ("input", "residual"):
            v = rng.standard_normal(shape)
            hidden = shape[1]
            if case.outlier and role == "input":
                v[min(2, B - 1)] *= 300.0   # squares overflow fp16
                v[:, 7] = 500.0              # an outlier channel
            args[a["index"]] = dt.encode(v)
        elif role == "norm_weight":
            args[a["index"]] = dt.encode(1.0 + 0.1 * rng.standard_normal(shape))
        elif role == "norm_bias":
            args[a["index"]] = dt.encode(0.1 * rng.standard_normal(shape))
        elif role == "qkv_weight":
            args[a["index"]] = dt.encode(
                rng.standard_normal(shape) / math.sqrt(shape[1]))
        elif role == "qkv_bias":
            args[a["index"]] = dt.encode(0.5 * rng.standard_normal(shape))
        elif role == "positions":
            args[a["index"]] = case.positions.copy()
        elif role == "seq_lens":
            args[a["index"]] = (case.positions + 1).astype(np.int32)
        elif role == "block_table":
            # Distinct pages for the page each sequence writes; the rest
            # random. With big_pages the last sequence writes page 139999
            # (element offsets past 2^31).
            table = rng.integers(0, num_pages, size=shape, dtype=np.int64)
            pages = rng.permutation(num_pages - 1)[:B]
            if case.big_pages:
                pages[-1] = num_pages - 1
            for b in range(B):
                table[b, case.positions[b] // page_size] = pages[b]
            args[a["index"]] = table.astype(np.int32)
        elif role in ("key_cache", "value_cache"):
            args[a["index"]] = ("nan", dt, shape)  # allocated on the device
        else:
            args[a["index"]] = np.zeros(shape, dtype=dt.storage)
    embedding_inputs(fn, roles, case, rng, args)
    return args, env


def embedding_inputs(fn, roles, case, rng, args):
    """The embedding table (role weight: the only weight of a front half)
    and the token ids (role tokens), where the function has them: random ids
    in [0, V), from batch 6 with 0, V - 1 and four outside [0, V) (the
    kernels clamp them); the table's rows the x of check_kernels' other
    inputs (with the outlier row and channel of an outlier case)."""
    by_role = {roles.get(a["index"]): a for a in fn["arguments"]}
    if "tokens" not in by_role or "weight" not in by_role:
        return
    tokens, table = by_role["tokens"], by_role["weight"]
    V, H = table["shape"]
    B = case.batch
    ids = rng.integers(0, V, size=B, dtype=np.int64)
    if B >= 6:
        ids[:6] = [0, V - 1, -1, V, -2**31, 2**31 - 1]
    args[tokens["index"]] = ids.astype(np.int32)
    rows = rng.standard_normal((V, H))
    if case.outlier:
        rows[np.clip(ids[min(2, B - 1)], 0, V - 1)] *= 300.0
        rows[:, 7] = 500.0
    args[table["index"]] = DType(table["dtype"]).encode(rows)


def reference(manifest, fn, args, case):
    """The float64 reference of the function's front half."""
    kernels = [k for k in manifest["kernels"] if k["function"] == fn["name"]]
    ops = {}
    for k in kernels:
        ops.update(kernel_ops(k))
    # Argument index of each role.
    arg_of = {}
    for k in kernels:
        for p in k["params"]:
            b = p.get("binding", {})
            if p["kind"] == "input" and "argument" in b:
                arg_of.setdefault(p["role"], b["argument"])
    x_role = "weight" if "embedding" in ops else "input"
    dtype = DType(fn["arguments"][arg_of[x_role]]["dtype"])
    val = lambda role: dtype.decode(args[arg_of[role]]) if role in arg_of else None
    ref = {}
    if "embedding" in ops:
        table = val("weight")
        ids = np.clip(args[arg_of["tokens"]].astype(np.int64), 0,
                      table.shape[0] - 1)
        x = ref["embedding"] = table[ids]
    else:
        x = val("input")
    if "rmsnorm" in ops:
        a = ops["rmsnorm"]
        y, h = ref_rmsnorm(dtype, x, val("residual"), val("norm_weight"),
                           a["epsilon"], a.get("unit_offset", False))
        ref["normed"], ref["residual_out"] = y, h
    elif "layernorm" in ops:
        a = ops["layernorm"]
        y = ref_layernorm(dtype, x, val("norm_weight"), val("norm_bias"),
                          a["epsilon"])
        ref["normed"] = y
    else:
        y = x
    a = ops["qkv_proj"]
    hq, hkv, D = a["num_heads"], a["num_kv_heads"], a["head_dim"]
    out = y @ val("qkv_weight").T
    if "qkv_bias" in arg_of:
        out = out + val("qkv_bias")
    out = dtype.round(out)
    B = x.shape[0]
    q = out[:, :hq * D].reshape(B, hq, D)
    k = out[:, hq * D:(hq + hkv) * D].reshape(B, hkv, D)
    v = out[:, (hq + hkv) * D:].reshape(B, hkv, D)
    ref["query_raw"], ref["key_raw"], ref["value"] = q, k, v
    if "rope" in ops:
        pos = args[arg_of["positions"]]
        ref["query_rot"] = ref_rope(dtype, q, pos, ops["rope"])
        ref["key_rot"] = ref_rope(dtype, k, pos, ops["rope"])
    else:
        ref["query_rot"], ref["key_rot"] = q, k
    ref["cache_key"] = ref["key_rot"]
    ref["cache_value"] = v
    return ref, dtype, arg_of


# ---------------------------------------------------------------------------
# Device
# ---------------------------------------------------------------------------


class Device:
    def __init__(self, dry_run):
        self.dry = dry_run
        if dry_run:
            self.xp = np
        else:
            import cupy
            self.xp = cupy
        self.modules = {}

    def function(self, ptx, launch):
        """The function of `launch`'s entry (a kernel or one of its variants),
        allowed its dynamic shared memory when the total exceeds 48 KiB."""
        if self.dry:
            return None
        if ptx not in self.modules:
            self.modules[ptx] = self.xp.RawModule(path=ptx)
        fnc = self.modules[ptx].get_function(launch["entry"])
        dynamic = launch.get("dynamic_shared_bytes", 0)
        if dynamic + launch.get("static_shared_bytes", 0) > 48 * 1024:
            fnc.max_dynamic_shared_size_bytes = dynamic
        return fnc

    def launch(self, ptx, launch, args):
        """Launches `launch`'s entry of `ptx` (self.function; nothing in a
        dry run) as the runtime would: on launch's grid and block, in
        thread-block clusters of launch["cluster_x"] CTAs where that is above
        1 (docs/abi.md 3.4)."""
        fnc = self.function(ptx, launch)
        if fnc is None:
            return
        cluster = launch.get("cluster_x", 1)
        if cluster > 1:
            launch_in_clusters(self.xp, fnc, tuple(launch["grid"]),
                               launch["block"][0],
                               launch["dynamic_shared_bytes"], args, cluster)
        else:
            fnc(launch["grid"], launch["block"], tuple(args),
                shared_mem=launch["dynamic_shared_bytes"])

    def to_device(self, a):
        return self.xp.asarray(a)

    def to_host(self, a):
        return a if self.dry else a.get()

    def full(self, shape, value, dtype):
        return self.xp.full(shape, value, dtype=dtype)

    def sync(self):
        if not self.dry:
            self.xp.cuda.Device().synchronize()

    def tensor_map(self, p, array):
        """A tensor_map parameter's CUtensorMap for the device array `array`
        bound to its `of` input (encode_tensor_map), or zeros in a dry run."""
        if self.dry:
            tensor_map_dims(p, array)
            return self.xp.zeros(128, dtype=np.uint8)
        return encode_tensor_map(self.xp, p, array)


def encode_tensor_map(xp, p, array):
    """A tensor_map parameter `p`'s CUtensorMap (docs/abi.md section 3.3) for
    the device array `array` bound to its `of` input, encoded here with the
    driver's cuTensorMapEncodeTiled (through ctypes, independently of the
    runtime) over tensor_map_dims and copied to a 128-byte device buffer."""
    rows, cols = tensor_map_dims(p, array)
    import ctypes
    box_rows, box_cols = p["tensor_map"]["box"]
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    # cuda.h: CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6, _BFLOAT16 = 9;
    # INTERLEAVE_NONE = 0, SWIZZLE_128B = 3, L2_PROMOTION_L2_256B = 3,
    # FLOAT_OOB_FILL_NONE = 0.
    dtype = {"f16": 6, "bf16": 9}[p["dtype"]]
    # CUtensorMap is 64-byte aligned (cuda.h): the map at the first
    # 64-byte boundary of a larger buffer.
    raw = (ctypes.c_uint8 * 192)()
    at = -ctypes.addressof(raw) % 64
    host = (ctypes.c_uint8 * 128).from_buffer(raw, at)
    err = ctypes.CDLL("libcuda.so.1").cuTensorMapEncodeTiled(
        host, ctypes.c_int(dtype), u32(2), ctypes.c_void_p(array.data.ptr),
        (u64 * 2)(cols, rows), (u64 * 1)(cols * 2),
        (u32 * 2)(box_cols, box_rows), (u32 * 2)(1, 1), ctypes.c_int(0),
        ctypes.c_int(3), ctypes.c_int(3), ctypes.c_int(0))
    if err != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed ({err}) for "
                           f"{p['role']} {p['shape']} ({rows} rows)")
    return xp.asarray(np.frombuffer(bytes(host), dtype=np.uint8))


def tensor_map_dims(p, array):
    """The [rows, cols] a tensor_map parameter `p` describes over `array`,
    the buffer bound to its `of` input (docs/abi.md section 3.3): a KV
    cache ["num_pages", P, Hkv, D] is read as [pages * P, Hkv * D], any
    other input as its 2-D shape. cols is the manifest's (constants), rows
    the manifest's where it is a constant (a weight_map's) and otherwise
    ("batch" or "num_pages") the rows `array` holds. Asserts that the array
    holds whole rows of cols elements (its dimensions past the row ones
    make cols where it has the manifest's rank) and at least the constant
    rows."""
    shape = p["shape"]
    row_dims = 2 if len(shape) == 4 else 1
    cols = int(np.prod([int(d) for d in shape[row_dims:]]))
    row_bytes = cols * 2  # f16 / bf16
    if array.ndim == len(shape):
        row = int(np.prod(array.shape[row_dims:]))
        assert row == cols, (
            f"{p['role']} {shape}: the buffer's rows are {row} elements "
            f"({list(array.shape)}), the manifest's {cols}")
    assert array.nbytes % row_bytes == 0, (
        f"{p['role']} {shape}: the buffer's {array.nbytes} bytes are not "
        f"whole rows of {cols} elements")
    held = array.nbytes // row_bytes
    if len(shape) == 2 and str(shape[0]) != "batch":
        rows = int(shape[0])
        assert held >= rows, (
            f"{p['role']} {shape}: the buffer holds {held} rows, not {rows}")
        return rows, cols
    return held, cols


def launch_kernel(dev, ptx, k, env, batch, device_args, outputs):
    """Launches kernel `k` as the variant `batch` selects, its parameters
    bound as the manifest says: inputs to `device_args` (function arguments
    by index) or `outputs` ((kernel, result) -> buffer, which gets k's
    outputs, fresh and poisoned), zeroed workspaces, scalars from `env`.
    Returns the name the report shows (with the variant's entry where one
    ran), [(param, buffer)] of its outputs and of its zero_init
    workspaces."""
    launch_args = []
    kernel_outputs = []
    zero_init = []  # workspaces the kernel must leave zero
    for p in k["params"]:
        dt = DType(p["dtype"])
        if p["kind"] == "input":
            b = p["binding"]
            if "argument" in b:
                buf = device_args[b["argument"]]
            else:
                buf = outputs[(b["kernel"], b["result"])]
            launch_args.append(buf)
        elif p["kind"] == "output":
            shape = resolve_shape(p["shape"], env)
            buf = dev.full(shape, dt.poison(), dt.storage)
            outputs[(k["index"], p["binding"]["result"])] = buf
            kernel_outputs.append((p, buf))
            launch_args.append(buf)
        elif p["kind"] == "workspace":
            shape = resolve_shape(p["shape"], env)
            buf = dev.xp.zeros(shape, dtype=dt.storage)
            if p.get("zero_init"):
                zero_init.append((p, buf))
            launch_args.append(buf)
        elif p["kind"] == "tensor_map":
            launch_args.append(
                dev.tensor_map(p, launch_args[p["tensor_map"]["of"]]))
        else:
            launch_args.append(np.int32(env[p["role"]]))
    launch = runtime_launch(os.path.splitext(ptx)[0] + ".manifest.json", k,
                            batch, env)
    dev.launch(ptx, launch, launch_args)
    # Name the variant that ran, so that the report shows it was tested.
    return launch_label(k, launch), kernel_outputs, zero_init


def judge(dev, passed):
    """A check's verdict: None (not evaluated) in a dry run, where no kernel
    ran and the outputs hold their poison."""
    return None if dev.dry else bool(passed)


def run_function(dev, ptx, manifest, fn, case, seed, report):
    rng = np.random.default_rng(seed)
    args, env = make_inputs(manifest, fn, case, rng)
    ref, dtype, arg_of = reference(manifest, fn, args, case)
    device_args = {}
    for index, a in args.items():
        if isinstance(a, tuple) and a[0] == "nan":
            device_args[index] = dev.full(a[2], a[1].poison(), a[1].storage)
        else:
            device_args[index] = dev.to_device(np.ascontiguousarray(a))
    outputs = {}  # (kernel index, result index) -> device array
    checks = []
    kernels = [k for k in manifest["kernels"] if k["function"] == fn["name"]]
    # Kernels not launched: attention (check_attention.py covers it), and
    # every kernel that reads the result of one not launched (the later
    # layers of a multi-layer module, which the reference of one front half
    # does not model).
    skipped = set()
    for k in kernels:
        kind = k.get("schedule", {}).get("kind")
        reads_skipped = any(p["kind"] == "input" and
                            p["binding"].get("kernel") in skipped
                            for p in k["params"])
        if kind not in SUPPORTED_KINDS or reads_skipped:
            skipped.add(k["index"])
            continue
        kname, kernel_outputs, zero_init = launch_kernel(
            dev, ptx, k, env, case.batch, device_args, outputs)
        has_rope = "rope" in kernel_ops(k)
        for p, buf in zero_init:
            checks.append((kname, p["role"], "zero_init", buf))
        for p, buf in kernel_outputs:
            role = p["role"]
            if role in ("query", "key"):
                key = role + ("_rot" if has_rope else "_raw")
            elif role == "output" and "embedding" in kernel_ops(k):
                key = "embedding"  # the embedded rows (a front half's only
                                   # "output")
            else:
                key = role
            checks.append((kname, role, key, buf))
    dev.sync()
    ok = True
    results = {}
    for kname, role, key, buf in checks:
        if key == "zero_init":
            # The split-K arrival counters: reset by the last CTA of each
            # tile, so that the next launch (a graph replay) finds zeros.
            nonzero = int(np.count_nonzero(dev.to_host(buf)))
            err = {"rel": float(nonzero), "max_abs": float(nonzero),
                   "nan": False}
            if nonzero:
                err["note"] = f"{nonzero} nonzero entries left"
            passed = judge(dev, nonzero == 0)
            report.append((case.label(), f"{kname}:{role}", err, passed))
            ok &= passed is not False
            continue
        got = dtype.decode(dev.to_host(buf)).reshape(ref[key].shape)
        err = compare(got, ref[key])
        if key == "embedding":  # a bit copy of finite table rows: exact
            wrong = int(np.count_nonzero(got != ref[key]))
            if wrong:
                err["note"] = f"{wrong} elements not bit-identical"
            passed = judge(dev, wrong == 0)
        else:
            passed = judge(dev, err["rel"] < dtype.tol and not err["nan"])
        ok &= passed is not False
        results[key] = got
        report.append((case.label(), f"{kname}:{role}", err, passed))
    # Caches: written slots and untouched NaN elsewhere.
    for cache_role, ref_key in (("key_cache", "cache_key"),
                                ("value_cache", "cache_value")):
        if cache_role not in arg_of:
            continue
        cache = device_args[arg_of[cache_role]]
        table = args[arg_of["block_table"]]
        pos = case.positions
        P = cache.shape[1]
        pages = table[np.arange(case.batch), pos // P]
        slots = pos % P
        if dev.dry:
            got = cache[pages, slots]
            untouched_nan = True
        else:
            import cupy
            got = cache[cupy.asarray(pages), cupy.asarray(slots)].get()
            expected_nan = cache.size - case.batch * cache.shape[2] * cache.shape[3]
            if dtype.name == "bf16":
                nan_count = int(((cache & 0x7FFF) > 0x7F80).sum())
            else:
                nan_count = int(cupy.isnan(cache).sum())
            untouched_nan = nan_count == expected_nan
        err = compare(dtype.decode(got), ref[ref_key])
        passed = judge(dev, err["rel"] < dtype.tol and not err["nan"]
                       and untouched_nan)
        if not untouched_nan:
            err["note"] = "cache elements outside the written slots changed"
        ok &= passed is not False
        results[ref_key] = dtype.decode(got)
        report.append((case.label(), f"{fn['name']}:{cache_role}", err, passed))
    return ok, results


def compare(got, ref):
    diff = got - ref
    nan = bool(np.isnan(got).any())
    denom = np.linalg.norm(ref)
    rel = float(np.linalg.norm(np.nan_to_num(diff, nan=1e30)) / denom) \
        if denom > 0 else float(np.abs(diff).max())
    return {"rel": rel, "max_abs": float(np.nanmax(np.abs(diff))) if diff.size else 0.0,
            "nan": nan}


# ---------------------------------------------------------------------------
# embedding, argmax and silu_mul (kernels fed by function arguments)
# ---------------------------------------------------------------------------

SMALL_KINDS = {"embedding", "argmax", "silu_mul"}
# Batch 13 holds every crafted argmax row (ARGMAX_ROWS) once, 130 ten times.
SMALL_BATCHES = (1, 3, 13, 64, 130)


def ref_embedding(tokens, table_bits):
    """Rows tokens[b] of the table, as raw bits (a bit copy). Ids outside
    [0, V) are clamped to [0, V - 1], the lowering's memory-safety rule."""
    ids = np.clip(tokens.astype(np.int64), 0, table_bits.shape[0] - 1)
    return table_bits[ids]


def ref_argmax(x):
    """fusion.argmax of the float64 rows of x: the index of the largest
    non-NaN value, the lowest of equal ones (-0 == +0); 0 for an all-NaN
    row."""
    numbers = np.where(np.isnan(x), -np.inf, x)
    best = numbers.max(axis=1, keepdims=True)
    candidates = ~np.isnan(x) & (numbers == best)
    return np.argmax(candidates, axis=1).astype(np.int32)  # first True, or 0


def ref_silu_mul(dt, gate_up):
    """round(silu(g) * u), silu(g) = g / (1 + exp(-g)), in float64."""
    inter = gate_up.shape[1] // 2
    g, u = gate_up[:, :inter], gate_up[:, inter:]
    with np.errstate(over="ignore"):
        return dt.round(g / (1.0 + np.exp(-g)) * u)


def ulp(dt, v):
    """The spacing of f16 / bf16 values at |v| (v float64, finite), at least
    2^-126: below the smallest normal fp32 value the fp32 arithmetic the op
    specifies itself underflows (silu(-100) * u is -0 in fp32, a bf16
    subnormal in float64)."""
    if dt.name == "f16":
        spacing = np.spacing(np.abs(v).astype(np.float16)).astype(np.float64)
    else:  # bf16 keeps 7 of f32's 23 fraction bits
        spacing = np.spacing(np.abs(v).astype(np.float32)).astype(np.float64) \
            * 2.0**16
    return np.maximum(spacing, 2.0**-126)


def _peaks(row, at, value):
    row[list(at)] = value
    return row


# Crafted argmax rows: (what, build(row of negative numbers, V) -> row, the
# index fusion.argmax gives by construction). Row b of a case is
# ARGMAX_ROWS[b % len]; the first is random data, checked against
# ref_argmax only.
ARGMAX_ROWS = [
    ("random", None, None),
    ("ties in three threads", lambda r, V: _peaks(r, (V - 1, V // 2 + 3, 5), 8.0),
     lambda V: 5),
    ("ties in one vector", lambda r, V: _peaks(r, (14, 9, 10), 8.0),
     lambda V: 9),
    ("NaN skipped", lambda r, V: _peaks(_peaks(r, (0, 3, V // 3 - 1, V - 2),
                                               np.nan), (V // 3,), 5.0),
     lambda V: V // 3),
    ("all NaN", lambda r, V: np.full(V, np.nan), lambda V: 0),
    ("-0 before +0", lambda r, V: _peaks(_peaks(r, (V // 4,), -0.0),
                                         (V // 4 + 1, V - 1), 0.0),
     lambda V: V // 4),
    ("+0 before -0", lambda r, V: _peaks(_peaks(r, (2,), 0.0), (7, V - 1), -0.0),
     lambda V: 2),
    ("all -inf after NaN", lambda r, V: _peaks(np.full(V, -np.inf), (0,), np.nan),
     lambda V: 1),
    ("+inf among NaN and -inf", lambda r, V: _peaks(_peaks(_peaks(
        r, (1, V // 2), -np.inf), (0, V - 1), np.nan), (V - 3,), np.inf),
     lambda V: V - 3),
    ("one number, last", lambda r, V: _peaks(np.full(V, np.nan), (V - 1,), -7.0),
     lambda V: V - 1),
    ("ties at a large value", lambda r, V: _peaks(r, (V - 2, V // 2), 60000.0),
     lambda V: V // 2),
    ("many ties (integers)", lambda r, V: np.floor(-r) % 7, None),
    ("random, max last", lambda r, V: _peaks(r, (V - 1,), 9.0), lambda V: V - 1),
]


def small_inputs(manifest, fn, batch, rng):
    """Function arguments by role: random table bits and token ids (with ids
    0, V - 1 and out-of-range ones from batch 6), ARGMAX_ROWS logits, and
    gate/up rows with extremes. Returns (args, env, crafted), crafted a list
    of (argument, row, what, expected index)."""
    roles, vocab_of = {}, {}
    for k in manifest["kernels"]:
        if k["function"] != fn["name"]:
            continue
        bound = {p["role"]: p for p in k["params"] if p["kind"] == "input"}
        for p in bound.values():
            roles.setdefault(p["binding"].get("argument"), p["role"])
        if "tokens" in bound and "weight" in bound:
            vocab_of[bound["tokens"]["binding"]["argument"]] = \
                bound["weight"]["shape"][0]
    env = {"batch": batch}
    args, crafted = {}, []
    for a in fn["arguments"]:
        i, dt = a["index"], DType(a["dtype"])
        shape = resolve_shape(a["shape"], env)
        role = roles.get(i, "unused")
        if role == "weight":
            bits = rng.integers(0, 1 << 16, size=shape, dtype=np.uint16)
            args[i] = bits.view(dt.storage)
        elif role == "tokens":
            V = vocab_of[i]
            ids = rng.integers(0, V, size=shape, dtype=np.int64)
            if batch >= 6:
                ids[:6] = [0, V - 1, -1, V, -2**31, 2**31 - 1]
            args[i] = ids.astype(np.int32)
        elif role == "logits":
            rows = -np.abs(rng.standard_normal(shape)) * 4.0
            for b in range(batch):
                what, build, expected = ARGMAX_ROWS[b % len(ARGMAX_ROWS)]
                if build is not None:
                    rows[b] = build(rows[b], shape[1])
                if expected is not None:
                    crafted.append((i, b, what, expected(shape[1])))
            args[i] = dt.encode(rows)
        elif role == "input":
            values = 3.0 * rng.standard_normal(shape)
            inter = shape[1] // 2
            extremes = [-100.0, -30.0, -10.0, -0.0, 0.0, 10.0, 30.0, 100.0]
            values[:, :len(extremes)] = extremes  # gates
            values[:, inter:inter + len(extremes)] = 100.0  # their ups
            args[i] = dt.encode(values)
        else:
            args[i] = np.zeros(shape, dtype=dt.storage)
    return args, env, crafted


def check_small_output(k, p, host_input, got):
    """Compares output `p` of small kernel `k` (got: host storage) with its
    reference from the kernel's inputs (host_input(role) -> storage).
    Returns (err, passed) as compare() and the report use them."""
    kind = k["schedule"]["kind"]
    if kind == "embedding":
        table = host_input("weight")
        ref = ref_embedding(host_input("tokens"), table.view(np.uint16))
        wrong = int(np.count_nonzero(got.view(np.uint16) != ref))
        err = {"rel": wrong / ref.size, "max_abs": float(wrong), "nan": False}
        if wrong:
            err["note"] = f"{wrong} elements not bit-identical"
        return err, wrong == 0
    if kind == "argmax":
        dtype = next(q["dtype"] for q in k["params"] if q["role"] == "logits")
        logits = DType(dtype).decode(host_input("logits"))
        ref = ref_argmax(logits)
        rows = np.flatnonzero(got != ref)
        err = {"rel": rows.size / ref.size, "max_abs": float(rows.size),
               "nan": False}
        if rows.size:
            err["note"] = "rows " + ", ".join(
                f"{r}: {got[r]} not {ref[r]}" for r in rows[:4])
        return err, rows.size == 0
    dt = DType(p["dtype"])
    ref = ref_silu_mul(dt, dt.decode(host_input("input")))
    out = dt.decode(got).reshape(ref.shape)
    err = compare(np.nan_to_num(out, nan=1e30), ref)
    err["nan"] = bool(np.isnan(out).any())
    ulps = float(np.max(np.abs(out - ref) / ulp(dt, ref))) \
        if not err["nan"] else math.inf
    err["note"] = f"max {ulps:.3g} ulp"
    return err, err["rel"] < dt.tol and not err["nan"] and ulps <= 1.0


def run_small_function(dev, ptx, manifest, fn, batch, seed, report):
    """Launches the embedding / argmax / silu_mul kernels of `fn` on
    small_inputs and checks each output against its float64 reference (bit
    copy, exact index, one ulp of f16/bf16), and ref_argmax against the
    crafted rows' known indices (also in a dry run). Appends to `report`;
    returns whether everything evaluated passed."""
    rng = np.random.default_rng(seed)
    args, env, crafted = small_inputs(manifest, fn, batch, rng)
    label = f"B={batch}"
    wrong = []
    for i, b, what, expected in crafted:
        dt = DType(fn["arguments"][i]["dtype"])
        got = int(ref_argmax(dt.decode(args[i][b:b + 1]))[0])
        if got != expected:
            wrong.append(f"row {b} ({what}): {got}, by construction {expected}")
    if crafted:
        err = {"rel": len(wrong) / len(crafted), "max_abs": float(len(wrong)),
               "nan": False, "note": "; ".join(wrong[:3]) or
               f"{len(crafted)} crafted rows"}
        report.append((label, f"{fn['name']}:argmax reference", err, not wrong))
    ok = not wrong
    device_args = {i: dev.to_device(np.ascontiguousarray(a))
                   for i, a in args.items()}
    outputs = {}
    launched = []
    for k in manifest["kernels"]:
        if k["function"] == fn["name"]:
            launched.append((k,) + launch_kernel(dev, ptx, k, env, batch,
                                                 device_args, outputs)[:2])
    dev.sync()
    for k, kname, kernel_outputs in launched:
        def host_input(role):
            p = next(p for p in k["params"]
                     if p["kind"] == "input" and p["role"] == role)
            b = p["binding"]
            return args[b["argument"]] if "argument" in b else \
                dev.to_host(outputs[(b["kernel"], b["result"])])
        for p, buf in kernel_outputs:
            err, passed = check_small_output(k, p, host_input,
                                             dev.to_host(buf))
            passed = judge(dev, passed)
            report.append((label, f"{kname}:{p['role']}", err, passed))
            ok &= passed is not False
    return ok


# ---------------------------------------------------------------------------
# Benchmark (fused projection vs the unfused chain), weights rotated
# ---------------------------------------------------------------------------


def bench(dev, directory, name, batches, copies=8, iters=50, extra_ptx=None):
    """Median time per front half (all copies' launches in one event pair).
    `extra_ptx`: extra PTX files with the decode manifest's entries (e.g.
    other schedules or ptxas hints) timed the same way."""
    import cupy
    lines = []
    runs = [("decode", None), ("none", None)]
    runs += [("decode", v) for v in (extra_ptx or [])]
    for strategy, ptx_override in runs:
        path = os.path.join(directory, f"{name}.{strategy}")
        ptx = ptx_override or path + ".ptx"
        manifest = json.load(open(path + ".manifest.json"))
        fn = manifest["functions"][0]
        for B in batches:
            case = Case(name, B, [1000 + 37 * b for b in range(B)])
            rng = np.random.default_rng(7)
            sets = []
            for _ in range(copies):
                args, env = make_inputs(manifest, fn, case, rng)
                sets.append(args)
            dev_sets = []
            for args in sets:
                d = {}
                for i, a in args.items():
                    if isinstance(a, tuple):
                        d[i] = cupy.zeros(a[2], dtype=a[1].storage)
                    else:
                        d[i] = cupy.asarray(np.ascontiguousarray(a))
                dev_sets.append(d)
            kernels = [k for k in manifest["kernels"]
                       if k.get("schedule", {}).get("kind") in SUPPORTED_KINDS]
            launches = []
            for d in dev_sets:
                outs = {}
                seq = []
                for k in kernels:
                    la = []
                    for p in k["params"]:
                        dt = DType(p["dtype"])
                        if p["kind"] == "input":
                            b = p["binding"]
                            la.append(d[b["argument"]] if "argument" in b
                                      else outs[(b["kernel"], b["result"])])
                        elif p["kind"] == "output":
                            buf = cupy.zeros(resolve_shape(p["shape"], env),
                                             dtype=dt.storage)
                            outs[(k["index"], p["binding"]["result"])] = buf
                            la.append(buf)
                        elif p["kind"] == "workspace":
                            # Zero once: the kernels leave zero_init ones zero
                            # for every later launch.
                            la.append(cupy.zeros(resolve_shape(p["shape"], env),
                                                 dtype=dt.storage))
                        elif p["kind"] == "tensor_map":
                            la.append(dev.tensor_map(p, la[p["tensor_map"]["of"]]))
                        else:
                            la.append(np.int32(env[p["role"]]))
                    launch = runtime_launch(path + ".manifest.json", k, B, env)
                    seq.append((dev.function(ptx, launch), launch["grid"],
                                launch["block"], tuple(la),
                                launch["dynamic_shared_bytes"]))
                launches.append(seq)
            weight_bytes = sum(a.nbytes for i, a in sets[0].items()
                               if not isinstance(a, tuple))
            for seq in launches:  # warm up
                for f, g, bl, la, sm in seq:
                    f(g, bl, la, shared_mem=sm)
            start, stop = cupy.cuda.Event(), cupy.cuda.Event()
            times = []
            for _ in range(iters):
                start.record()
                for seq in launches:
                    for f, g, bl, la, sm in seq:
                        f(g, bl, la, shared_mem=sm)
                stop.record()
                stop.synchronize()
                times.append(cupy.cuda.get_elapsed_time(start, stop) * 1e3 / copies)
            t = float(np.median(times))
            label = strategy if not ptx_override else os.path.basename(ptx_override)
            lines.append(f"{name} {label:22s} B={B:3d}: {t:8.2f} us per "
                         f"front half ({len(kernels)} launches), "
                         f"{weight_bytes / t / 1e6:6.2f} TB/s of input bytes")
    return lines


# ---------------------------------------------------------------------------


def cases_for(name):
    # Batch 1 runs each kernel's own entry; larger batches run the batch
    # variants where a kernel has them (docs/abi.md 3.2): the tensor-core
    # projection from batch 2 in tiles of 16 to 32 tokens, or the GEMM-shaped
    # one in tiles of 16 (from batch 2), 32 (from 17) and 64 (from 33, larger
    # batches in several tiles): the smallest batch of each, partial and
    # full tiles, and several tiles plus a remainder.
    cases = [Case(name, 1, [0]), Case(name, 1, [1000]), Case(name, 1, [131071]),
             Case(name, 2, [7, 131070]),
             Case(name, 3, [5, 1, 17]),
             Case(name, 5, [0, 1, 1000, 100003, 131071], outlier=True),
             Case(name, 8, [(7919 * i + 3) % 131072 for i in range(8)]),
             Case(name, 13, [(4099 * i) % 9000 for i in range(13)],
                  outlier=True),
             Case(name, 16, [(977 * i) % 40000 for i in range(16)]),
             Case(name, 17, [(3001 * i + 5) % 50000 for i in range(17)]),
             Case(name, 32, [(1009 * i + 2) % 131072 for i in range(32)]),
             Case(name, 33, [(2053 * i + 11) % 131072 for i in range(33)]),
             Case(name, 64, [(4013 * i + 7) % 131072 for i in range(64)]),
             Case(name, 130, [(6007 * i + 13) % 131072 for i in range(130)],
                  outlier=True)]
    if name.startswith("llama3_8b") and "32layers" not in name:
        cases.append(Case(name, 5, [3, 100000, 31, 7, 2047], big_pages=True))
    return cases


def check_small_functions(dev, directory, name, keep, report):
    """Runs run_small_function on every function of module `name` (both
    strategies) whose kernels are all embedding / argmax / silu_mul, at
    SMALL_BATCHES (those in `keep` if given). Returns whether all passed."""
    ok = True
    for strategy in ("decode", "none"):
        path = os.path.join(directory, f"{name}.{strategy}")
        if not os.path.exists(path + ".manifest.json"):
            continue
        manifest = json.load(open(path + ".manifest.json"))
        for fn in manifest["functions"]:
            kinds = {k.get("schedule", {}).get("kind")
                     for k in manifest["kernels"] if k["function"] == fn["name"]}
            if not kinds or not kinds <= SMALL_KINDS:
                continue
            for ci, batch in enumerate(SMALL_BATCHES):
                if keep and batch not in keep:
                    continue
                sub = []
                ok &= run_small_function(dev, path + ".ptx", manifest, fn,
                                         batch, 2000 + ci, sub)
                report.extend((f"{name} {strategy}",) + r for r in sub)
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--only", default=None, help="module name prefix")
    parser.add_argument("--batches", default=None,
                        help="comma-separated batch sizes to keep")
    parser.add_argument("--dry-run", action="store_true")
    parser.add_argument("--bench", action="store_true")
    parser.add_argument("--no-big-pages", action="store_true")
    parser.add_argument("--bench-batches", default="1,16")
    parser.add_argument("--bench-variants", default=None,
                        help="folder of extra PTX files for llama3_8b.decode")
    args = parser.parse_args()
    dev = Device(args.dry_run)
    names = sorted({os.path.basename(p).rsplit(".", 3)[0]
                    for p in glob.glob(os.path.join(args.dir, "*.manifest.json"))})
    if args.only:
        names = [n for n in names if n.startswith(args.only)]
    keep = {int(b) for b in args.batches.split(",")} if args.batches else None
    all_ok = True
    report = []
    agree = []
    for name in names:
        for ci, case in enumerate(cases_for(name)):
            if keep and case.batch not in keep:
                continue
            if case.big_pages and args.no_big_pages:
                continue
            per_strategy = {}
            for strategy in ("decode", "none"):
                path = os.path.join(args.dir, f"{name}.{strategy}")
                if not os.path.exists(path + ".manifest.json"):
                    continue
                manifest = json.load(open(path + ".manifest.json"))
                for fn in manifest["functions"]:
                    if not any(k.get("schedule", {}).get("kind") == "projection"
                               for k in manifest["kernels"]
                               if k["function"] == fn["name"]):
                        continue
                    sub = []
                    ok, results = run_function(dev, path + ".ptx", manifest, fn,
                                               case, 1000 + ci, sub)
                    report += [(f"{name} {strategy}",) + r for r in sub]
                    all_ok &= ok
                    per_strategy[strategy] = results
            if "decode" in per_strategy and "none" in per_strategy:
                d, n = per_strategy["decode"], per_strategy["none"]
                common = sorted(set(d) & set(n))
                diffs = {c: float(np.nanmax(np.abs(d[c] - n[c]))) for c in common}
                agree.append((name, case.label(), diffs))
        all_ok &= check_small_functions(dev, args.dir, name, keep, report)
    width = max((len(r[0]) + len(r[1]) for r in report), default=20) + 2
    owidth = max([44] + [len(r[2]) for r in report])
    print(f"{'module / case':{width}s} {'output':{owidth}s} {'rel err':>9s} "
          f"{'max abs':>9s}")
    for mod, label, what, err, passed in report:
        status = {True: "PASS", False: "FAIL", None: "DRY"}[passed]
        note = (" NaN" if err["nan"] else "") + (" " + err["note"] if "note" in err else "")
        print(f"{mod + ' ' + label:{width}s} {what:{owidth}s} {err['rel']:9.2e} "
              f"{err['max_abs']:9.2e} {status}{note}")
    print()
    print("fused (decode) vs unfused (none), max |difference| per output:")
    for name, label, diffs in agree:
        text = ", ".join(f"{k}={v:.3g}" for k, v in diffs.items())
        print(f"  {name} {label}: {text}")
    passed = sum(1 for r in report if r[4])
    evaluated = sum(1 for r in report if r[4] is not None)
    dry = len(report) - evaluated
    print(f"\n{passed}/{evaluated} checks passed" +
          (f", {dry} not evaluated (dry run: no kernel ran)" if dry else ""))
    if args.bench and not args.dry_run:
        print()
        extra_ptx = sorted(glob.glob(os.path.join(args.bench_variants, "*.ptx"))) \
            if args.bench_variants else None
        batches = [int(b) for b in args.bench_batches.split(",")]
        for line in bench(dev, args.dir, "llama3_8b", batches,
                          extra_ptx=extra_ptx):
            print(line)
    print("RESULT:", "PASS" if all_ok else "FAIL")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
