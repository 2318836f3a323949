"""A heterogeneous Llama (Llama-Nemotron / DeciLM, ``model_type: nemotron-nas``) for Hugging
Face transformers, which has no class for it: each layer's attention is Llama attention with
its own KV-head count, a single linear layer, or nothing; each FFN is a SwiGLU MLP of its own
width, a single linear layer, or nothing (``block_config.py``). Built from transformers' own
Llama modules, so a layer whose block equals the parent's computes exactly what
``LlamaForCausalLM`` computes. Weight names follow the public checkpoints
(``self_attn.linear_attn``, ``mlp.linear_mlp`` for the linear replacements).
"""

from __future__ import annotations

import torch
from torch import nn
from transformers.cache_utils import DynamicCache
from transformers.masking_utils import create_causal_mask
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_utils import PreTrainedModel
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaMLP, LlamaRMSNorm, LlamaRotaryEmbedding

from reasonrl.plugins.puzzle.hf_config import MODEL_TYPE, NemotronNasConfig


class LinearAttention(nn.Module):
    """Attention replaced by one hidden × hidden linear map (Puzzle's 'linear' variant)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear_attn = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states, **_unused):
        return self.linear_attn(hidden_states), None


class LinearMLP(nn.Module):
    def __init__(self, hidden_size: int):
        super().__init__()
        self.linear_mlp = nn.Linear(hidden_size, hidden_size, bias=False)

    def forward(self, hidden_states):
        return self.linear_mlp(hidden_states)


class NasDecoderLayer(nn.Module):
    def __init__(self, config: NemotronNasConfig, layer_idx: int):
        super().__init__()
        block, layer = config.block_configs[layer_idx], config.layer_config(layer_idx)
        self.attention_kind, self.ffn_kind = block.attention.kind, block.ffn.kind
        if self.attention_kind != "no_op":
            self.input_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
            self.self_attn = (
                LlamaAttention(layer, layer_idx)
                if self.attention_kind == "attention"
                else LinearAttention(config.hidden_size)
            )
        if self.ffn_kind != "no_op":
            self.post_attention_layernorm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
            self.mlp = LlamaMLP(layer) if self.ffn_kind == "ffn" else LinearMLP(config.hidden_size)

    def attention_delta(self, hidden_states, **kwargs):
        """What the attention subblock adds to the residual stream."""
        if self.attention_kind == "no_op":
            return torch.zeros_like(hidden_states)
        return self.self_attn(hidden_states=self.input_layernorm(hidden_states), **kwargs)[0]

    def ffn_delta(self, hidden_states):
        if self.ffn_kind == "no_op":
            return torch.zeros_like(hidden_states)
        return self.mlp(self.post_attention_layernorm(hidden_states))

    def forward(self, hidden_states, **kwargs):
        hidden_states = hidden_states + self.attention_delta(hidden_states, **kwargs)
        return hidden_states + self.ffn_delta(hidden_states)


class NemotronNasPreTrainedModel(PreTrainedModel):
    config_class = NemotronNasConfig
    config: NemotronNasConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = False
    _no_split_modules = ["NasDecoderLayer"]
    _supports_sdpa = True
    _supports_attention_backend = True


class NemotronNasModel(NemotronNasPreTrainedModel):
    def __init__(self, config: NemotronNasConfig):
        super().__init__(config)
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, config.pad_token_id)
        self.layers = nn.ModuleList([NasDecoderLayer(config, i) for i in range(config.num_hidden_layers)])
        self.norm = LlamaRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = LlamaRotaryEmbedding(config=config)
        self.post_init()

    def _first_attention_layer(self) -> int:
        return next((i for i, layer in enumerate(self.layers) if layer.attention_kind == "attention"), 0)

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        past_key_values=None,
        inputs_embeds=None,
        use_cache=None,
        **kwargs,
    ):
        if (input_ids is None) == (inputs_embeds is None):
            raise ValueError("pass exactly one of input_ids or inputs_embeds")
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache(config=self.config)
        if position_ids is None:
            seen = past_key_values.get_seq_length(self._first_attention_layer()) if past_key_values is not None else 0
            position_ids = (torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device) + seen).unsqueeze(0)
        mask = create_causal_mask(
            config=self.config,
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            past_key_values=past_key_values,
            position_ids=position_ids,
        )
        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids=position_ids)
        for layer in self.layers:
            hidden_states = layer(
                hidden_states,
                attention_mask=mask,
                position_embeddings=position_embeddings,
                position_ids=position_ids,
                past_key_values=past_key_values,
                **kwargs,
            )
        return BaseModelOutputWithPast(last_hidden_state=self.norm(hidden_states), past_key_values=past_key_values)


class DeciLMForCausalLM(NemotronNasPreTrainedModel):
    """The causal LM; named like the public checkpoints' class, which vLLM maps to ``nemotron_nas``."""

    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}

    def __init__(self, config: NemotronNasConfig):
        super().__init__(config)
        self.model = NemotronNasModel(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    def get_input_embeddings(self):
        return self.model.embed_tokens

    def forward(
        self,
        input_ids=None,
        attention_mask=None,
        position_ids=None,
        past_key_values=None,
        inputs_embeds=None,
        labels=None,
        use_cache=None,
        logits_to_keep=0,
        **kwargs,
    ):
        outputs = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        hidden = outputs.last_hidden_state
        keep = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        logits = self.lm_head(hidden[:, keep, :])
        loss = (
            self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
            if labels is not None
            else None
        )
        return CausalLMOutputWithPast(loss=loss, logits=logits, past_key_values=outputs.past_key_values)


def register_with_transformers() -> None:
    """``AutoConfig`` / ``AutoModelForCausalLM`` learn ``nemotron-nas`` (idempotent)."""
    from reasonrl.compat.transformers import register_causal_lm

    register_causal_lm(MODEL_TYPE, NemotronNasConfig, DeciLMForCausalLM)


def vllm_unsupported(block_configs) -> list[str]:
    """Why vLLM's ``nemotron_nas`` would not run these blocks as written (empty: it will):
    it implements no-op and GQA blocks but not the linear replacements."""
    problems = []
    for index, block in enumerate(block_configs):
        for part, config in (("attention", block.attention), ("ffn", block.ffn)):
            if config.replace_with_linear:
                problems.append(
                    f"block_configs[{index}].{part}: replace_with_linear is not implemented by vLLM's nemotron_nas"
                )
    return problems
