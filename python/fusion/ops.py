"""The decode-layer front half as a PyTorch op: ``torch.ops.fusion.front_half``.

A function ``fusion-compile`` made from ``fusion-import`` (without
``--whole-model``) runs RMSNorm (or LayerNorm) with the optional residual
add, the QKV projection, RoPE, the KV-cache append and paged decode attention
for one layer. ``FrontHalf`` loads one on a GPU and calls it on torch
tensors, on torch's current stream::

    import torch, fusion.ops
    layer = fusion.ops.FrontHalf("build/models/smollm2.layer")  # <prefix>.ptx + .manifest.json
    out, residual_out = layer(x, norm_weight, qkv_weight, positions, seq_lens,
                              block_table, k_cache, v_cache, residual=residual)

Shapes (Hq query heads, Hkv KV heads, head_dim D, page size P; the compiled
function fixes everything but batch, max_pages and num_pages): ``x`` and
``residual`` [batch, hidden]; ``norm_weight`` [hidden]; ``qkv_weight``
[(Hq + 2 Hkv) D, hidden] (q, k, v rows stacked, as vLLM's ``qkv_proj``);
``positions`` and ``seq_lens`` [batch] (int32; int64 ones are converted, one
small copy each); ``block_table`` int32 [batch, max_pages];
``k_cache``/``v_cache`` [num_pages, P, Hkv, D], appended to in place. vLLM's
cache ``kv = torch.empty(2, num_blocks, P, Hkv, D)`` is taken as
``kv[0], kv[1]`` without a copy; a layout whose K pages are not contiguous
(K and V interleaved per page, ``[num_blocks, 2, P, Hkv, D]``) is refused
with the stride named. Returns ``output`` [batch, Hq, D] and ``residual_out``
(x + residual, [batch, hidden]; an empty tensor when the function has no
residual). Semantics: docs/abi.md and design.md 2.1; ``seq_lens[b]`` counts
the appended token, whose position is ``positions[b]``.

The op never synchronizes or allocates outside torch, so it runs inside
``torch.cuda.graph`` capture and ``torch.compile`` (a fake implementation
gives the output shapes). Keep a ``FrontHalf`` alive while its op is in use,
including every CUDA graph that captured it: a graph holds the kernels and
buffers, not the object. Every tensor is checked before anything runs (a
``fusion.InvalidArgumentError`` naming the argument); the device contents
of positions, seq_lens and the block table are the caller's to keep in
range (docs/runtime.md, "Launch preconditions"), as with FlashInfer.
"""

import itertools
import weakref
from typing import Optional, Tuple

try:
    import torch
except ImportError as e:  # the package itself does not need torch
    raise ImportError("fusion.ops needs PyTorch: pip install torch (or the "
                      "package's extra: pip install '.[torch]')") from e

from . import _fusion
from ._fusion import InvalidArgumentError

_DTYPE_NAMES = {torch.float16: "f16", torch.bfloat16: "bf16",
                torch.float32: "f32", torch.int32: "i32"}
_TORCH_DTYPES = {name: dtype for dtype, name in _DTYPE_NAMES.items()}

# The live FrontHalf objects by handle (the op's first argument names one);
# a FrontHalf lives as long as its owner keeps it.
_loaded = weakref.WeakValueDictionary()
_handles = itertools.count()


def _front_half(handle):
    layer = _loaded.get(handle)
    if layer is None:
        raise InvalidArgumentError(f"no live fusion.ops.FrontHalf has handle {handle} "
                                   "(keep the FrontHalf while its op is in use)")
    return layer


def _describe(name, t, expected):
    """(address, dtype, shape, strides, device) of tensor argument `name`."""
    if not isinstance(t, torch.Tensor):
        raise InvalidArgumentError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if t.device.type != "cuda":
        raise InvalidArgumentError(f"{name}: a {t.device} tensor; the op takes CUDA tensors")
    if t.dtype not in _DTYPE_NAMES:
        raise InvalidArgumentError(f"{name}: dtype {t.dtype}; the compiled function takes "
                                   f"{_TORCH_DTYPES[expected]}")
    return (t.data_ptr(), _DTYPE_NAMES[t.dtype], list(t.shape), list(t.stride()),
            t.device.index)


class FrontHalf:
    """One compiled decode-layer front half loaded on a GPU.

    ``prefix``: fusion-compile's output path prefix (``<prefix>.ptx``,
    ``<prefix>.manifest.json``); ``function``: its function (empty: the
    only one); ``max_batch``: the largest batch a call may have (the
    runtime's intermediate buffers are sized for it); ``device``: a CUDA
    device (default: torch's current one). Raises fusion.Error subclasses
    (FormatError for a bad manifest, DeviceUnavailableError, ...).
    """

    def __init__(self, prefix, function="", max_batch=256, device=None):
        device = torch.device("cuda" if device is None else device)
        self.device_index = torch.cuda.current_device() if device.index is None \
            else device.index
        with torch.cuda.device(self.device_index):  # restores torch's device
            self._function = _fusion.Function(prefix, function, max_batch,
                                              self.device_index)
        model = self._function.model
        # The runtime's check that this is a front half (names what is missing).
        self.signature = model.front_half()
        self.page_size = self.signature["page_size"]
        self._arguments = model.arguments
        self._results = model.results
        self._roles = {a["role"] for a in self._arguments}
        self.model = model
        self.handle = next(_handles)
        _loaded[self.handle] = self

    def __call__(self, x, norm_weight, qkv_weight, positions, seq_lens, block_table,
                 k_cache, v_cache, *, residual=None, norm_bias=None, qkv_bias=None,
                 max_seq_len=-1):
        """``torch.ops.fusion.front_half`` on this function (see the module
        docstring); ``max_seq_len`` bounds seq_lens and picks the split-KV
        attention's num_splits (default: the block table's capacity,
        max_pages * page_size, right for every length it can hold)."""
        return torch.ops.fusion.front_half(
            self.handle, x, residual, norm_weight, norm_bias, qkv_weight, qkv_bias,
            positions, seq_lens, block_table, k_cache, v_cache, max_seq_len)

    def empty_results(self, x):
        """Uninitialised (output, residual_out) for a call on ``x``."""
        out = []
        for r in self._results:
            shape = [x.shape[0] if d == "batch" else d for d in r["shape"]]
            out.append(x.new_empty(shape, dtype=_TORCH_DTYPES[r["dtype"]]))
        by_role = dict(zip((r["role"] for r in self._results), out))
        return by_role["output"], by_role.get("residual_out", x.new_empty(0))

    def launch(self, tensors, max_seq_len):
        """Checks and launches on {role: tensor or None}; returns the results."""
        for role, t in tensors.items():
            if t is not None and role not in self._roles:
                raise InvalidArgumentError(f"{role}: this compiled function takes no {role} "
                                           f"(its arguments: {sorted(self._roles)})")
        for role in ("positions", "seq_lens"):
            t = tensors[role]
            if isinstance(t, torch.Tensor) and t.dtype == torch.int64:
                tensors[role] = t.to(torch.int32)
        arguments = []
        for a in self._arguments:
            t = tensors.get(a["role"])
            if t is None:
                raise InvalidArgumentError(f"{a['role']}: the compiled function takes "
                                           f"{a['name']} {a['dtype']}{a['shape']}; none given")
            arguments.append(_describe(a["role"], t, a["dtype"]))
        x, block_table = tensors["input"], tensors["block_table"]
        results = self.empty_results(x)
        by_role = {"output": results[0], "residual_out": results[1]}
        described = [_describe(r["role"], by_role[r["role"]], r["dtype"]) for r in self._results]
        if max_seq_len < 0:
            max_seq_len = block_table.shape[1] * self.page_size if block_table.dim() == 2 else 0
        with torch.cuda.device(self.device_index):  # restores torch's device
            num_splits = self._function.num_splits(max(x.shape[0], 1),
                                                   max_seq_len)
            self._function.call(arguments, described, num_splits,
                                torch.cuda.current_stream(x.device).cuda_stream)
        return results


@torch.library.custom_op("fusion::front_half", mutates_args=("k_cache", "v_cache"))
def front_half(handle: int, x: torch.Tensor, residual: Optional[torch.Tensor],
               norm_weight: torch.Tensor, norm_bias: Optional[torch.Tensor],
               qkv_weight: torch.Tensor, qkv_bias: Optional[torch.Tensor],
               positions: torch.Tensor, seq_lens: torch.Tensor, block_table: torch.Tensor,
               k_cache: torch.Tensor, v_cache: torch.Tensor,
               max_seq_len: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """The front half loaded as FrontHalf ``handle``: (output, residual_out)."""
    return _front_half(handle).launch(
        {"input": x, "residual": residual, "norm_weight": norm_weight,
         "norm_bias": norm_bias, "qkv_weight": qkv_weight, "qkv_bias": qkv_bias,
         "positions": positions, "seq_lens": seq_lens, "block_table": block_table,
         "key_cache": k_cache, "value_cache": v_cache}, max_seq_len)


@front_half.register_fake
def _(handle, x, residual, norm_weight, norm_bias, qkv_weight, qkv_bias, positions,
      seq_lens, block_table, k_cache, v_cache, max_seq_len):
    return _front_half(handle).empty_results(x)
