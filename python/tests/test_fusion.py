"""Tests of the fusion Python package (python/, the nanobind bindings).

CPU tests run everywhere: the package imports, inspects a compiled manifest
(checked against the manifest's JSON read here with the json module) and
reports bad input and a missing GPU as fusion exceptions. The engine's host
side runs on the mock driver (runtime/test/MockCudaDriver.cpp) where
scripts/test.sh points $FUSION_TEST_MOCK_DRIVER and $FUSION_TEST_MOCK_MODELS
at the build; on a GPU, test_engine_gpu needs $FUSION_ENGINE_MODELS (the
whole tiny models ctest compiles, runtime/test/CMakeLists.txt).
"""

import importlib
import importlib.util
import json
import math
import os
import pathlib
import subprocess
import sys

import pytest

import fusion

REPO = pathlib.Path(__file__).resolve().parents[2]
TINY = REPO / "runtime" / "test" / "data" / "tiny_decode"
TINY_CONFIG = REPO / "runtime" / "test" / "data" / "configs" / "tiny_model.json"


def has_gpu():
    try:
        fusion.device_name()
        return True
    except fusion.DeviceUnavailableError:
        return False


def manifest_json():
    with open(f"{TINY}.manifest.json") as f:
        return json.load(f)


def test_version_and_exceptions():
    assert fusion.__version__ == "0.1.0"
    assert issubclass(fusion.Error, RuntimeError)
    for name in ("InvalidArgumentError", "CapacityError", "FormatError",
                 "UnsupportedError", "DeviceUnavailableError", "CudaError"):
        assert issubclass(getattr(fusion, name), fusion.Error)


def test_model_matches_the_manifest_json():
    raw = manifest_json()
    (fn,) = raw["functions"]
    model = fusion.Model.load(f"{TINY}.manifest.json")
    assert model.function == fn["name"]
    assert [a["name"] for a in model.arguments] == [a["name"] for a in fn["arguments"]]
    assert [a["dtype"] for a in model.arguments] == [a["dtype"] for a in fn["arguments"]]
    assert [a["shape"] for a in model.arguments] == [a["shape"] for a in fn["arguments"]]
    kernels = [k for k in raw["kernels"] if k["function"] == fn["name"]]
    assert [k["entry"] for k in model.kernels] == [k["entry"] for k in kernels]
    assert [[v["min_batch"] for v in k["variants"]] for k in model.kernels] == \
        [[v["min_batch"] for v in k.get("variants", [])] for k in kernels]


def test_launch_follows_the_documented_variant_rule():
    # docs/abi.md 3.2: the last variant whose min_batch <= batch, else the
    # kernel's own launch; symbolic grid dimensions take the step's sizes.
    raw = manifest_json()
    model = fusion.Model.load(f"{TINY}.manifest.json")
    sizes = {"batch": None, "max_pages": 3, "num_splits": 5}
    for k in raw["kernels"]:
        for batch in (1, 2, 16, 17, 33, 200):
            chosen, variant = k, -1
            for i, v in enumerate(k.get("variants", [])):
                if v["min_batch"] <= batch:
                    chosen, variant = v, i
            sizes["batch"] = batch
            got = model.launch(k["entry"], batch, max_pages=3, num_splits=5)
            assert got["entry"] == chosen["entry"] and got["variant"] == variant
            assert got["grid"] == tuple(sizes[g] if isinstance(g, str) else g
                                        for g in chosen["grid"])
            assert got["block"] == tuple(chosen["block"])
            assert got["dynamic_shared_bytes"] == chosen.get("dynamic_shared_bytes", 0)
            # docs/abi.md 3.4: the 5 splits as one cluster where the launch's
            # schedule has cluster_splits >= 5 (the attention kernel's is 8).
            clustered = 2 <= 5 <= chosen.get("schedule", {}).get("cluster_splits", 0)
            assert got["cluster_x"] == (5 if clustered else 1)
    attention = raw["kernels"][1]
    assert attention["schedule"]["cluster_splits"] == 8
    for splits, cluster_x in ((1, 1), (8, 8), (9, 1)):
        got = model.launch(attention["entry"], 1, num_splits=splits)
        assert got["cluster_x"] == cluster_x
    with pytest.raises(fusion.InvalidArgumentError, match="no kernel with entry"):
        model.launch("missing", 1)
    with pytest.raises(fusion.InvalidArgumentError, match="must be >= 1, got 0"):
        model.launch(raw["kernels"][0]["entry"], 0)


def test_front_half_signature():
    # tiny_decode: hidden 64, 4 query heads, 2 KV heads, head_dim 16, pages
    # of 4 tokens, RMSNorm eps 1e-5, rope theta 500000 (tiny_decode.mlir).
    sig = fusion.Model.load(f"{TINY}.manifest.json").front_half()
    assert sig == {"hidden": 64, "num_heads": 4, "num_kv_heads": 2, "head_dim": 16,
                   "page_size": 4, "norm": "rmsnorm", "eps": 1e-5, "rope_theta": 500000.0}


def test_num_splits_follows_the_documented_policy():
    # docs/abi.md: max(1, min(max_splits, floor(target_ctas / (batch *
    # grid_y)), ceil(max_seq_len / min_chunk_tokens))) for the split-KV
    # kernel's primary launch at batch 1.
    raw = manifest_json()
    (attention,) = [k for k in raw["kernels"] if "max_splits" in k.get("schedule", {})]
    sched = attention["schedule"]
    grid_y = int(attention["grid"][1])
    model = fusion.Model.load(f"{TINY}.manifest.json")
    assert model.max_splits == sched["max_splits"]
    for length in (0, 1, 64, 65, 1000, 100000):
        expected = max(1, min(sched["max_splits"], sched["target_ctas"] // grid_y,
                              math.ceil(length / sched["min_chunk_tokens"])))
        assert model.default_num_splits(1, length) == expected, length


def test_bad_manifests_raise(tmp_path):
    with pytest.raises(fusion.Error, match="cannot open manifest .*missing.json"):
        fusion.Model.load(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.manifest.json"
    bad.write_text("{")
    with pytest.raises(fusion.FormatError, match="bad.manifest.json"):
        fusion.Model.load(str(bad))
    with pytest.raises(fusion.InvalidArgumentError, match="no function \"nope\""):
        fusion.Model.load(f"{TINY}.manifest.json", "nope")


def test_engine_rejects_what_is_not_a_whole_model_before_the_gpu():
    # tiny_decode is one layer's front half, not fusion-import --whole-model.
    with pytest.raises(fusion.FormatError, match="has no argument embed_w"):
        fusion.Engine(str(TINY), str(TINY_CONFIG.parent), function="decode_layer")


@pytest.mark.skipif(importlib.util.find_spec("torch") is not None,
                    reason="PyTorch is installed")
def test_the_torch_modules_say_what_is_missing():
    for module, text in (("fusion.ops", "fusion.ops needs PyTorch"),
                         ("fusion.hf", "fusion.hf needs PyTorch and transformers")):
        with pytest.raises(ImportError, match=text):
            importlib.import_module(module)


@pytest.mark.skipif(has_gpu(), reason="a GPU is present")
def test_no_gpu_is_a_clear_error():
    with pytest.raises(fusion.DeviceUnavailableError, match="CUDA"):
        fusion.device_name()


# The engine on a GPU, in a subprocess: a crash there is this test's failure,
# not the end of the pytest run.
ENGINE_SCRIPT = r"""
import sys
import fusion
models, config_dir = sys.argv[1], sys.argv[2]
# On the mock driver no kernel runs: generate's ids are then whatever the
# next step's input slot held (each step's argmax writes them there on a
# GPU), so only the relations that hold without kernels are checked.
mock = sys.argv[3] == "mock"
engine = fusion.Engine(models + "/tiny_model", config_dir, max_batch=2,
                       max_tokens_per_seq=32, random_weights=1)
assert engine.dtype in ("f16", "bf16")
prompt = [1, 5, 9, 2]
a, b = fusion.generate(engine, [prompt, prompt], max_new_tokens=6)
assert len(a) == len(b) == 6 and (mock or a == b), (a, b)
# The greedy token is the argmax of the logits the engine returns.
engine.add_sequence(7)
next_tokens, logits = engine.prefill([7], [prompt], logits=True)
assert next_tokens == [int(logits[0].argmax())] == [a[0]], (next_tokens, a)
engine.remove_sequence(7)
# Steps of 3 rows (prompt tokens 0-2, then 3) give the one-step prefill's
# token; a step smaller than the batch is refused.
chunked = fusion.Engine(models + "/tiny_model", config_dir, max_batch=2,
                        max_tokens_per_seq=32, random_weights=1, max_step_rows=3)
assert chunked.max_step_rows == 3 and engine.max_step_rows >= 2
chunked.add_sequence(7)
assert chunked.prefill([7], [prompt]) == [a[0]]
# Every kernel launched without a thread-block cluster: the same tokens.
flat = fusion.Engine(models + "/tiny_model", config_dir, max_batch=2,
                     max_tokens_per_seq=32, random_weights=1, clusters=False)
flat_ids = fusion.generate(flat, [prompt, prompt], max_new_tokens=6)
assert mock or flat_ids == [a, b], (flat_ids, a)
try:
    fusion.Engine(models + "/tiny_model", config_dir, max_batch=2,
                  random_weights=1, max_step_rows=1)
    raise AssertionError("max_step_rows below max_batch did not raise")
except fusion.InvalidArgumentError:
    pass
log_probs = engine.score(prompt + a)
assert log_probs.shape == (len(prompt) + len(a) - 1,) and (log_probs <= 0).all()
# Engine.generate (what fusion.generate decodes with) gives what step does.
engine.add_sequence(8)
stepped = engine.prefill([8], [prompt])
for _ in range(5):
    stepped.append(engine.step([8], stepped[-1:])[0])
assert len(stepped) == len(a) and (mock or stepped == a), (stepped, a)
engine.remove_sequence(8)
engine.add_sequence(8)
ids = engine.generate([8], [a[0]], 3)
assert len(ids) == 1 and len(ids[0]) == 3 and engine.length(8) == 3, ids
for bad, error in (([8], [1], 0), fusion.InvalidArgumentError), \
                  (([8], [400], 2), fusion.InvalidArgumentError), \
                  (([8], [1], 30), fusion.CapacityError):
    try:
        engine.generate(*bad)
        raise AssertionError(f"generate{bad} did not raise")
    except error:
        pass
assert engine.length(8) == 3
engine.remove_sequence(8)
try:
    engine.step([3], [1])  # no sequence 3
    raise AssertionError("step of an unknown sequence did not raise")
except fusion.InvalidArgumentError:
    pass
print("engine ok")
"""


def run_engine_script(models, tmp_path, env=None, mock=False):
    config_dir = tmp_path / "tiny"
    config_dir.mkdir()
    (config_dir / "config.json").write_text(TINY_CONFIG.read_text())
    return subprocess.run([sys.executable, "-c", ENGINE_SCRIPT, str(models),
                           str(config_dir), "mock" if mock else "gpu"],
                          capture_output=True, text=True, timeout=300, env=env)


@pytest.mark.skipif("FUSION_TEST_MOCK_DRIVER" not in os.environ,
                    reason="needs $FUSION_TEST_MOCK_DRIVER and $FUSION_TEST_MOCK_MODELS "
                    "(scripts/test.sh sets them)")
def test_engine_plumbing_on_the_mock_driver(tmp_path):
    # The engine's host side through the bindings (construction, sequences,
    # prefill/step with logits, score, errors) on libfusion_mock_cuda.so:
    # no kernel runs, so only shapes, types and errors are checked here
    # (ENGINE_SCRIPT skips the relations between values in mock mode).
    env = dict(os.environ, FUSION_CUDA_DRIVER=os.environ["FUSION_TEST_MOCK_DRIVER"])
    run = run_engine_script(os.environ["FUSION_TEST_MOCK_MODELS"], tmp_path, env,
                            mock=True)
    assert run.returncode == 0 and "engine ok" in run.stdout, run.stderr[-3000:]


# fusion.Function on tensors described as python/fusion/ops.py describes
# torch tensors, here numpy arrays in the mock driver's host "device" memory:
# the checks run, the launches do nothing.
FUNCTION_SCRIPT = r"""
import sys
import numpy as np
import fusion
f = fusion.Function(sys.argv[1], max_batch=4)
assert f.model.function == "decode_layer" and f.device == 0
assert [r["role"] for r in f.model.results] == ["output", "residual_out"]
keep = []
def tensor(dtype, shape):
    a = np.zeros(shape, dtype=np.float16 if dtype in ("f16", "bf16") else np.int32)
    keep.append(a)
    return (a.ctypes.data, dtype, list(shape), [s // a.itemsize for s in a.strides], 0)
def call(batch, qkv_dtype="f16", device=0, output_on_cache=False):
    args = [tensor("f16", (batch, 64)), tensor("f16", (batch, 64)), tensor("f16", (64,)),
            tensor(qkv_dtype, (128, 64)), tensor("i32", (batch,)), tensor("i32", (batch,)),
            tensor("i32", (batch, 3)), tensor("f16", (9, 4, 2, 16)), tensor("f16", (9, 4, 2, 16))]
    args[0] = args[0][:4] + (device,)
    results = [tensor("f16", (batch, 4, 16)), tensor("f16", (batch, 64))]
    if output_on_cache:
        results[0] = (args[7][0],) + results[0][1:]
    f.call(args, results, 2, 0)
call(3)
for bad, error, text in ((dict(batch=3, qkv_dtype="bf16"), fusion.InvalidArgumentError,
                          'argument "qkv_w" (qkv_weight) of "decode_layer": dtype bf16'),
                         (dict(batch=5), fusion.CapacityError, "loaded for batch 4"),
                         (dict(batch=3, device=1), fusion.InvalidArgumentError,
                          "on CUDA device 1; the compiled function was loaded on device 0"),
                         (dict(batch=3, output_on_cache=True), fusion.InvalidArgumentError,
                          'result 0 (output) of "decode_layer" overlaps argument "k_cache"')):
    try:
        call(**bad)
        raise AssertionError(f"no error for {bad}")
    except error as e:
        assert text in str(e), str(e)
# num_splits: the tiny policy's 8 splits at 4096 tokens (ceil(4096 / 512)),
# 2 clusters of 8 at batch 1, lowered to 7 on a device of 15 resident CTAs in
# clusters (the mock's hook: 15 / 8 = 1 cluster, 15 / 7 = 2); a batch above
# max_batch gets the policy unasked.
import ctypes, os
ctypes.CDLL(os.environ["FUSION_CUDA_DRIVER"]).fusionMockClusterCtas(15)
assert f.model.default_num_splits(1, 4096) == 8
assert f.num_splits(1, 4096) == 7, f.num_splits(1, 4096)
assert f.num_splits(5, 4096) == 8
print("function ok")
"""


@pytest.mark.skipif("FUSION_TEST_MOCK_DRIVER" not in os.environ,
                    reason="needs $FUSION_TEST_MOCK_DRIVER (scripts/test.sh sets it)")
def test_function_checks_tensors_on_the_mock_driver():
    env = dict(os.environ, FUSION_CUDA_DRIVER=os.environ["FUSION_TEST_MOCK_DRIVER"])
    run = subprocess.run([sys.executable, "-c", FUNCTION_SCRIPT, str(TINY)],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0 and "function ok" in run.stdout, run.stderr[-3000:]


@pytest.mark.skipif(not has_gpu() or "FUSION_ENGINE_MODELS" not in os.environ,
                    reason="needs a GPU and $FUSION_ENGINE_MODELS")
def test_engine_gpu(tmp_path):
    run = run_engine_script(os.environ["FUSION_ENGINE_MODELS"], tmp_path)
    assert run.returncode == 0 and "engine ok" in run.stdout, run.stderr[-3000:]
