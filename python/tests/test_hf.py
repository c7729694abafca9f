"""GPU test of the transformers drop-in (python/fusion/hf.py): greedy
generation with the fused op in every decoder layer gives the tokens of
transformers' own ``model.generate``, with and without the CUDA graph.

Needs PyTorch, transformers, a GPU, $FUSION_HF_CHECKPOINT (a Hugging Face
Llama directory, e.g. SmolLM2 from scripts/get-smollm2.sh) and
$FUSION_HF_LAYER (fusion-compile output for ``fusion-import
$FUSION_HF_CHECKPOINT/config.json --dtype=f16``); skipped otherwise.
scripts/hf_dropin.py is the same comparison with timings.
"""

import os

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)
if not {"FUSION_HF_CHECKPOINT", "FUSION_HF_LAYER"} <= os.environ.keys():
    pytest.skip("needs $FUSION_HF_CHECKPOINT and $FUSION_HF_LAYER", allow_module_level=True)

import fusion.hf  # noqa: E402

PROMPTS = ["The capital of France is", "Water boils at a temperature of",
           "Once upon a time, in a small village,"]


@pytest.fixture(scope="module")
def model():
    m = transformers.AutoModelForCausalLM.from_pretrained(
        os.environ["FUSION_HF_CHECKPOINT"], dtype=torch.float16).cuda().eval()
    m.generation_config.eos_token_id = None  # always the requested length
    return m


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("graph", [True, False])
def test_greedy_tokens_match_transformers(model, batch, graph):
    tokenizer = transformers.AutoTokenizer.from_pretrained(os.environ["FUSION_HF_CHECKPOINT"])
    ids = [tokenizer(p)["input_ids"] for p in PROMPTS[:batch]]
    length = min(len(i) for i in ids)
    input_ids = torch.tensor([i[:length] for i in ids], device="cuda")
    expected = model.generate(input_ids, attention_mask=torch.ones_like(input_ids),
                              max_new_tokens=32, do_sample=False,
                              pad_token_id=0)[:, length:]
    decoder = fusion.hf.LlamaDecoder(model, os.environ["FUSION_HF_LAYER"], max_batch=4,
                                     max_len=128, graph=graph)
    got = decoder.generate(input_ids, 32)
    assert torch.equal(got, expected), (tokenizer.batch_decode(got),
                                        tokenizer.batch_decode(expected))
    with pytest.raises(ValueError, match="exceed max_len 128"):
        decoder.generate(input_ids, 128)
