"""fusion: run LLM decode steps compiled by the fusion MLIR compiler.

The C++ runtime (runtime/) bound with nanobind: ``Model`` inspects a compiled
manifest on any machine; ``Engine`` runs a whole model compiled from
``fusion-import --whole-model`` on a GPU; ``Function`` launches one compiled
function on the caller's device memory, and ``fusion.ops`` (needs PyTorch)
makes the decode-layer front half a PyTorch op on it::

    import fusion
    engine = fusion.Engine("build/example/smollm2.decode", "build/models/smollm2",
                           max_batch=2, max_tokens_per_seq=256)
    print(fusion.generate(engine, [[504, 3575, 314], [504]], max_new_tokens=16))

Errors are ``fusion.Error`` (a ``RuntimeError``) or one of its subclasses:
``InvalidArgumentError``, ``CapacityError``, ``FormatError``,
``UnsupportedError``, ``DeviceUnavailableError`` (no CUDA driver or device)
and ``CudaError``.
"""

from ._fusion import (
    CapacityError,
    CudaError,
    DeviceUnavailableError,
    Engine,
    Error,
    FormatError,
    Function,
    InvalidArgumentError,
    Model,
    UnsupportedError,
    cluster_x,
    device_name,
)

from importlib.metadata import version as _distribution_version

# The one home of the version is pyproject.toml.
__version__ = _distribution_version("fusion-decode")

__all__ = [
    "CapacityError", "CudaError", "DeviceUnavailableError", "Engine", "Error",
    "FormatError", "Function", "InvalidArgumentError", "Model", "UnsupportedError",
    "cluster_x", "device_name", "generate",
]


def generate(engine, prompts, max_new_tokens):
    """Greedy continuations of ``prompts`` (lists of token ids), batched.

    Starts one sequence per prompt (ids 0, 1, ... must be free), runs the
    prompts (``Engine.prefill``) and then ``max_new_tokens - 1`` decode steps
    (``Engine.generate``: enqueued back to back, downloaded once),
    removes the sequences, and returns the ``max_new_tokens`` generated ids of
    each prompt. Raises as ``Engine.prefill`` / ``Engine.generate`` do (e.g.
    ``CapacityError`` past ``max_tokens_per_seq``) after removing the
    sequences.
    """
    if max_new_tokens < 1:
        raise InvalidArgumentError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    seqs = list(range(len(prompts)))
    for s in seqs:
        engine.add_sequence(s)
    try:
        next_tokens = engine.prefill(seqs, [list(p) for p in prompts])
        out = [[t] for t in next_tokens]
        if max_new_tokens > 1:
            rest = engine.generate(seqs, next_tokens, max_new_tokens - 1)
            out = [first + more for first, more in zip(out, rest)]
        return out
    finally:
        for s in seqs:
            engine.remove_sequence(s)
