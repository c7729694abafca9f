"""GPU tests of the PyTorch op (python/fusion/ops.py); skipped without
PyTorch or a GPU.

Every compiled front half under test (runtime/test/data/tiny_decode, and
each <prefix>.manifest.json in $FUSION_OPS_MODELS) runs on random inputs
with a history already in a paged cache (NaN in every slot no row may read)
and is checked against float64: test/gpu/check_kernels.py's reference for the
norm, projection and RoPE (rounded at op boundaries, design.md 2.1) and
test/gpu/check_model.py's paged attention over the history plus the
appended token.
Pass: ||got - ref|| / ||ref|| below that script's bound (2e-3 f16, 1e-2
bf16) for the output, residual_out and the appended K/V; every other cache
element bit-for-bit unchanged.
"""

import json
import math
import os
import pathlib
import re
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import fusion  # noqa: E402
import fusion.ops  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "test" / "gpu"))
import check_kernels as ck  # noqa: E402
import check_model as cm  # noqa: E402

PREFIXES = [str(REPO / "runtime" / "test" / "data" / "tiny_decode")]
if "FUSION_OPS_MODELS" in os.environ:
    PREFIXES += sorted(str(p)[:-len(".manifest.json")] for p in
                       pathlib.Path(os.environ["FUSION_OPS_MODELS"]).glob("*.manifest.json"))
TORCH_DTYPE = {"f16": torch.float16, "bf16": torch.bfloat16, "i32": torch.int32}
_layers = {}


def layer(prefix):
    if prefix not in _layers:
        _layers[prefix] = fusion.ops.FrontHalf(prefix, max_batch=64)
    return _layers[prefix]


def to_torch(a, dtype):
    """A numpy array in check_kernels' storage format -> CUDA tensor."""
    a = np.ascontiguousarray(a)
    if dtype == "bf16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).cuda()
    return torch.from_numpy(a).cuda()


def to_numpy(t):
    """A CUDA tensor -> numpy in check_kernels' storage format."""
    t = t.detach().cpu()
    return (t.view(torch.int16).numpy().view(np.uint16) if t.dtype == torch.bfloat16
            else t.numpy())


class Problem:
    """Random inputs of one call: history lengths below `max_len`, rows
    with pages of their own, NaN in every cache slot outside the history.
    The shapes depend on (prefix, batch, max_len) only."""

    def __init__(self, prefix, batch, seed, max_len=300):
        self.manifest = json.loads(pathlib.Path(prefix + ".manifest.json").read_text())
        (self.fn,) = self.manifest["functions"]
        rng = np.random.default_rng(seed)
        roles = {a["role"]: dict(a, index=i)
                 for i, a in enumerate(layer(prefix).model.arguments)}
        self.dtype = ck.DType(roles["input"]["dtype"])
        _, P, hkv, d = roles["key_cache"]["shape"]
        self.positions = rng.integers(0, max_len, size=batch).astype(np.int32)
        max_pages = max_len // P + 2
        num_pages = batch * max_pages + 3
        table = rng.permutation(num_pages)[:batch * max_pages].reshape(batch, max_pages)
        self.args = {}
        for role, a in roles.items():
            shape = ck.resolve_shape(a["shape"], {"batch": batch, "max_pages": max_pages,
                                                  "num_pages": num_pages})
            if role in ("input", "residual"):
                v = rng.standard_normal(shape)
            elif role == "norm_weight":
                v = 1.0 + 0.1 * rng.standard_normal(shape)
            elif role in ("norm_bias", "qkv_bias"):
                v = 0.3 * rng.standard_normal(shape)
            elif role == "qkv_weight":
                v = rng.standard_normal(shape) / math.sqrt(shape[1])
            elif role in ("key_cache", "value_cache"):
                v = np.full(shape, np.nan)
                for b in range(batch):
                    t = np.arange(self.positions[b])
                    v[table[b, t // P], t % P] = rng.standard_normal((len(t), hkv, d))
            else:
                v = {"positions": self.positions, "seq_lens": self.positions + 1,
                     "block_table": table}[role]
                self.args[a["index"]] = np.asarray(v, dtype=np.int32)
                continue
            self.args[a["index"]] = self.dtype.encode(v)
        self.roles = {role: a["index"] for role, a in roles.items()}
        self.table = table
        # (page, slot) of the token each row appends
        self.appended = (table[np.arange(batch), self.positions // P], self.positions % P)

    def tensors(self):
        """{op keyword: fresh CUDA tensor}."""
        names = {"input": "x", "key_cache": "k_cache", "value_cache": "v_cache"}
        return {names.get(role, role): to_torch(self.args[i], self.dtype.name
                                                if self.args[i].dtype != np.int32 else "i32")
                for role, i in self.roles.items()}

    def reference(self):
        ref, dt, _ = ck.reference(self.manifest, self.fn, self.args, None)
        ops = {}
        for k in self.manifest["kernels"]:
            ops.update(ck.kernel_ops(k))
        scale = ops["decode_attention"]["scale"]
        pages, slots = self.appended
        caches = []
        for role, key in (("key_cache", "key_rot"), ("value_cache", "value")):
            cache = dt.decode(self.args[self.roles[role]])
            cache[pages, slots] = ref[key]  # the appended token
            caches.append(cache)
        ref["output"] = cm.ref_attention(dt, ref["query_rot"], *caches, self.table,
                                         self.positions + 1, scale)
        return ref

    def check(self, got, k_cache, v_cache):
        """Asserts got (output, residual_out) and the caches against float64."""
        ref, dt = self.reference(), self.dtype
        pairs = [("output", to_numpy(got[0]), ref["output"])]
        if "residual" in self.roles:
            pairs.append(("residual_out", to_numpy(got[1]), ref["residual_out"]))
        pages, slots = self.appended
        for name, cache, key in (("k_cache", k_cache, "key_rot"), ("v_cache", v_cache, "value")):
            after = to_numpy(cache)
            pairs.append((name, after[pages, slots], ref[key]))
            before = self.args[self.roles["key_cache" if name == "k_cache" else "value_cache"]].copy()
            before[pages, slots] = after[pages, slots]
            assert np.array_equal(before.view(np.uint16), after.view(np.uint16)), \
                f"{name}: elements outside the appended slots changed"
        for name, stored, expected in pairs:
            value = dt.decode(stored).reshape(expected.shape)
            err = ck.compare(value, expected)
            assert err["rel"] < dt.tol and not err["nan"], (name, err)


@pytest.mark.parametrize("prefix", PREFIXES, ids=lambda p: pathlib.Path(p).name)
@pytest.mark.parametrize("batch", [1, 3, 16, 40])
def test_front_half_matches_float64(prefix, batch):
    problem = Problem(prefix, batch, seed=batch)
    t = problem.tensors()
    got = layer(prefix)(**t)
    torch.cuda.synchronize()
    problem.check(got, t["k_cache"], t["v_cache"])


def test_cuda_graph_capture_and_replay():
    prefix = PREFIXES[0]
    first, second = Problem(prefix, 4, seed=11), Problem(prefix, 4, seed=12)
    static = first.tensors()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up outside the capture
        layer(prefix)(**first.tensors())
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = layer(prefix)(**static)
    for problem in (first, second):  # replay on new contents of the same tensors
        for name, t in problem.tensors().items():
            static[name].copy_(t)
        graph.replay()
        torch.cuda.synchronize()
        problem.check(out, static["k_cache"], static["v_cache"])


def test_torch_compile():
    prefix = PREFIXES[0]
    problem = Problem(prefix, 3, seed=21)
    half = layer(prefix)

    @torch.compile(fullgraph=True)
    def step(x, **rest):
        out, residual_out = half(x * 1, **rest)
        return out.float().sum(-1), out, residual_out

    t = problem.tensors()
    x = t.pop("x")
    _, out, residual_out = step(x, **t)
    torch.cuda.synchronize()
    problem.check((out, residual_out), t["k_cache"], t["v_cache"])


def test_vllm_cache_layout_and_int64_positions_and_lengths():
    prefix = PREFIXES[0]
    problem = Problem(prefix, 2, seed=31)
    t = problem.tensors()
    kv = torch.stack([t["k_cache"], t["v_cache"]])  # [2, num_blocks, P, Hkv, D]
    t["k_cache"], t["v_cache"] = kv[0], kv[1]
    t["positions"], t["seq_lens"] = t["positions"].long(), t["seq_lens"].long()
    got = layer(prefix)(**t)
    torch.cuda.synchronize()
    problem.check(got, kv[0], kv[1])


def test_bad_tensors_name_the_argument():
    prefix = PREFIXES[0]
    half = layer(prefix)
    t = Problem(prefix, 2, seed=41).tensors()
    cases = [
        (dict(x=t["x"].cpu()), "input: a cpu tensor"),
        (dict(qkv_weight=t["qkv_weight"].float()), 'argument "qkv_w" (qkv_weight)'),
        (dict(qkv_weight=t["qkv_weight"].t().contiguous().t()), "not row-major contiguous"),
        (dict(residual=t["residual"][:1]), "gives batch = 1"),
        (dict(k_cache=torch.stack([t["k_cache"], t["v_cache"]], 1)[:, 0]),
         "dimension 0 has stride"),
        (dict(block_table=t["block_table"].long()), "block_table: dtype torch.int64"),
        (dict(qkv_bias=torch.zeros(8, device="cuda")), "takes no qkv_bias"),
    ]
    for change, text in cases:
        with pytest.raises(fusion.Error, match=re.escape(text)):
            half(**{**t, **change})
