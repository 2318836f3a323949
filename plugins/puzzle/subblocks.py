"""Subblocks of one layer as standalone modules: the parent's and the library's.

A subblock is the attention half (input norm + attention) or the FFN half (post-attention
norm + MLP) of a decoder layer; its output is what it adds to the residual stream. It is a
one-layer ``NasDecoderLayer`` with the other half removed, so its weights carry the names
they have in a full heterogeneous model (``input_layernorm.weight``, ``self_attn.q_proj.weight``,
``post_attention_layernorm.weight``, ``mlp.gate_proj.weight``, ...).
"""

from __future__ import annotations

import copy

import torch
from transformers.masking_utils import create_causal_mask

from reasonrl.plugins.puzzle.block_config import AttentionConfig, BlockConfig, FFNConfig
from reasonrl.plugins.puzzle.compat import attention_implementation, set_attention_implementation
from reasonrl.plugins.puzzle.hf_config import NemotronNasConfig
from reasonrl.plugins.puzzle.library import AttentionVariant, FfnVariant, block_config
from reasonrl.plugins.puzzle.model import DeciLMForCausalLM, NasDecoderLayer

NO_ATTENTION = AttentionConfig(no_op=True)
NO_FFN = FFNConfig(no_op=True)


def nas_config(parent_config, blocks: list[BlockConfig]) -> NemotronNasConfig:
    """A NemotronNasConfig with the parent's shape and these blocks."""
    values = parent_config.to_dict()
    for key in (
        "model_type",
        "architectures",
        "num_key_value_heads",
        "intermediate_size",
        "block_configs",
        "transformers_version",
    ):
        values.pop(key, None)
    values["num_hidden_layers"] = len(blocks)
    config = NemotronNasConfig(block_configs=blocks, **values)
    set_attention_implementation(config, attention_implementation(parent_config) or "sdpa")
    return config


def split_layers(
    state: dict[str, torch.Tensor], layers: int
) -> tuple[dict[str, torch.Tensor], list[dict[str, torch.Tensor]]]:
    """A model's state dict as (what lies outside the layers, one dict per layer with names
    relative to the layer)."""
    base = {k: v for k, v in state.items() if not k.startswith("model.layers.")}
    per_layer: list[dict[str, torch.Tensor]] = [{} for _ in range(layers)]
    for key, value in state.items():
        if key.startswith("model.layers."):
            index, name = key.removeprefix("model.layers.").split(".", 1)
            per_layer[int(index)][name] = value
    return base, per_layer


def build_model(
    parent_config, blocks: list[BlockConfig], base: dict[str, torch.Tensor], layer_states: list[dict[str, torch.Tensor]]
) -> DeciLMForCausalLM:
    """The heterogeneous model of ``blocks`` with these weights (every one must be given)."""
    model = DeciLMForCausalLM(nas_config(parent_config, blocks))
    state = dict(base)
    for index, layer_state in enumerate(layer_states):
        state.update({f"model.layers.{index}.{k}": v for k, v in layer_state.items()})
    model.load_state_dict(state, strict=True)
    return model.eval()


def subblock(parent_config, part: str, variant) -> NasDecoderLayer:
    """A standalone attention or FFN subblock of ``variant`` (library or parent)."""
    heads, hidden = parent_config.num_attention_heads, parent_config.hidden_size
    if part == "attention":
        full = block_config(variant, FfnVariant("no_op"), heads, hidden)
    else:
        full = block_config(AttentionVariant("no_op"), variant, heads, hidden)
    return NasDecoderLayer(nas_config(parent_config, [full]), 0)


def subblock_state(layer_state: dict[str, torch.Tensor], part: str) -> dict[str, torch.Tensor]:
    """The entries of one decoder layer's state dict that belong to ``part``."""
    prefixes = ("input_layernorm.", "self_attn.") if part == "attention" else ("post_attention_layernorm.", "mlp.")
    return {k: v for k, v in layer_state.items() if k.startswith(prefixes)}


class AttentionContext:
    """Rotary embeddings and causal mask for full sequences of one length (teacher forcing)."""

    def __init__(self, nas_model, sequence_length: int):
        self.model, self.length = nas_model, sequence_length
        self._cache: dict = {}

    def __call__(self, hidden: torch.Tensor) -> dict:
        key = (hidden.shape[0], hidden.shape[1], hidden.dtype, hidden.device)
        if key not in self._cache:
            position_ids = torch.arange(hidden.shape[1], device=hidden.device).unsqueeze(0)
            mask = create_causal_mask(
                config=self.model.config,
                inputs_embeds=hidden,
                attention_mask=None,
                past_key_values=None,
                position_ids=position_ids,
            )
            self._cache[key] = {
                "position_embeddings": self.model.rotary_emb(hidden, position_ids=position_ids),
                "attention_mask": mask,
                "position_ids": position_ids,
            }
        return self._cache[key]


def run_subblock(module: NasDecoderLayer, part: str, inputs: torch.Tensor, context: AttentionContext) -> torch.Tensor:
    return module.attention_delta(inputs, **context(inputs)) if part == "attention" else module.ffn_delta(inputs)


def copy_layer(layer) -> NasDecoderLayer:
    return copy.deepcopy(layer)
