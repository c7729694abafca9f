"""Hugging Face transformers Llama models decoding through the fused front half.

``LlamaDecoder`` takes a loaded ``LlamaForCausalLM`` (SmolLM2, Llama, ...)
and runs its decode steps with ``torch.ops.fusion.front_half`` in place of
each decoder layer's input RMSNorm, q/k/v projections, RoPE, cache update
and attention; o_proj, the residual adds, the MLP, the final norm and the LM
head stay the model's own modules. The prompt runs through the model's own
forward, and its keys and values are copied into the paged caches::

    import torch, transformers, fusion.hf
    model = transformers.AutoModelForCausalLM.from_pretrained(
        "build/models/smollm2", dtype=torch.float16).cuda()
    decoder = fusion.hf.LlamaDecoder(model, "build/models/smollm2.layer",
                                     max_batch=4, max_len=512)
    tokens = decoder.generate(input_ids, max_new_tokens=32)  # greedy, [B, 32]

``layer_prefix`` is ``fusion-compile`` output for ``fusion-import
<config.json> --dtype=<the model's dtype>`` (the front half with the fused
residual add, which every layer shares). Each decode step is one CUDA graph
(``graph=True``), captured once per batch size.
"""

import math

try:
    import torch
    import transformers  # noqa: F401 (the models this module takes)
except ImportError as e:
    raise ImportError("fusion.hf needs PyTorch and transformers: pip install "
                      "torch transformers (or the package's extra: pip "
                      "install '.[transformers]')") from e

from .ops import FrontHalf


def _layer_kv(cache, i):
    """Keys and values [B, Hkv, T, D] of layer i in a transformers cache."""
    if hasattr(cache, "layers"):  # transformers >= 4.56
        return cache.layers[i].keys, cache.layers[i].values
    return cache.key_cache[i], cache.value_cache[i]


def _check_compiled_for(signature, config, head_dim):
    """Raises ValueError unless the compiled front half (its
    Model.front_half() signature) is for the model's config."""
    rope = getattr(config, "rope_parameters", None) or {}
    expected = {"hidden": config.hidden_size, "num_heads": config.num_attention_heads,
                "num_kv_heads": config.num_key_value_heads, "head_dim": head_dim,
                "eps": config.rms_norm_eps,
                "rope_theta": getattr(config, "rope_theta", None) or rope.get("rope_theta")}
    wrong = [f"{k} {signature[k]} (the model has {v})" for k, v in expected.items()
             if v is not None and k in signature and
             not math.isclose(signature[k], v, rel_tol=1e-6)]
    if wrong:
        raise ValueError("the front half was compiled for another model: " + ", ".join(wrong))


class LlamaDecoder:
    """Greedy decoding of a transformers Llama model with the fused op.

    The paged caches hold ``max_batch`` sequences of up to ``max_len`` tokens
    each (sequence b owns pages [b * pages_per_seq, (b + 1) * pages_per_seq)).
    """

    def __init__(self, model, layer_prefix, max_batch, max_len, graph=True):
        self.model, self.graph, self.max_len = model, graph, max_len
        self.layers = model.model.layers
        self.front = FrontHalf(layer_prefix, max_batch=max_batch, device=model.device)
        config = model.config
        hkv = config.num_key_value_heads
        d = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        _check_compiled_for(self.front.signature, config, d)
        page = self.front.page_size
        self.pages_per_seq = math.ceil(max_len / page)
        device, dtype = model.device, model.dtype
        self.qkv_weight, self.qkv_bias, self.kv = [], [], []
        for layer in self.layers:
            a = layer.self_attn
            self.qkv_weight.append(torch.cat([a.q_proj.weight, a.k_proj.weight,
                                              a.v_proj.weight]).contiguous())
            self.qkv_bias.append(None if a.q_proj.bias is None else
                                 torch.cat([a.q_proj.bias, a.k_proj.bias, a.v_proj.bias]))
            self.kv.append(torch.empty(2, max_batch * self.pages_per_seq, page, hkv, d,
                                       device=device, dtype=dtype))
        self.block_table = torch.arange(max_batch * self.pages_per_seq, dtype=torch.int32,
                                        device=device).view(max_batch, self.pages_per_seq)
        self._graphs = {}

    @torch.no_grad()
    def prefill(self, input_ids):
        """Runs the prompts [B, T] through the model; returns the next tokens."""
        batch, length = input_ids.shape
        out = self.model(input_ids, use_cache=True)
        for i, kv in enumerate(self.kv):
            keys, values = _layer_kv(out.past_key_values, i)
            rows = kv.view(2, -1, self.pages_per_seq * kv.shape[2], *kv.shape[3:])
            rows[0, :batch, :length] = keys.transpose(1, 2)
            rows[1, :batch, :length] = values.transpose(1, 2)
        return out.logits[:, -1].argmax(-1)

    @torch.no_grad()
    def step(self, tokens, positions):
        """One decode step: tokens [B] at positions [B] (int32); next tokens."""
        batch = tokens.shape[0]
        x = self.model.model.embed_tokens(tokens)
        residual = torch.zeros_like(x)
        seq_lens = positions + 1
        table = self.block_table[:batch]
        for i, layer in enumerate(self.layers):
            attention, residual = self.front(
                x, layer.input_layernorm.weight, self.qkv_weight[i], positions, seq_lens,
                table, self.kv[i][0], self.kv[i][1], residual=residual,
                qkv_bias=self.qkv_bias[i], max_seq_len=self.max_len)
            residual = residual + layer.self_attn.o_proj(attention.view(batch, -1))
            x = layer.mlp(layer.post_attention_layernorm(residual))
        return self.model.lm_head(self.model.model.norm(x + residual)).argmax(-1)

    def _graph_step(self, tokens, positions):
        batch = tokens.shape[0]
        if batch not in self._graphs:
            static = (tokens.clone(), positions.clone())
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up: cuBLAS handles, workspaces
                self.step(*static)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                out = self.step(*static)
            self._graphs[batch] = (graph, static, out)
        graph, (static_tokens, static_positions), out = self._graphs[batch]
        static_tokens.copy_(tokens)
        static_positions.copy_(positions)
        graph.replay()
        return out.clone()

    @torch.no_grad()
    def generate(self, input_ids, max_new_tokens):
        """Greedy continuations [B, max_new_tokens] of the prompts [B, T]."""
        batch, length = input_ids.shape
        if length + max_new_tokens > self.max_len:
            raise ValueError(f"prompt {length} + {max_new_tokens} new tokens exceed "
                             f"max_len {self.max_len}")
        tokens = self.prefill(input_ids)
        out = [tokens]
        positions = torch.full((batch,), length, dtype=torch.int32, device=input_ids.device)
        for _ in range(max_new_tokens - 1):
            tokens = (self._graph_step if self.graph else self.step)(tokens, positions)
            positions += 1
            out.append(tokens)
        return torch.stack(out, 1)
