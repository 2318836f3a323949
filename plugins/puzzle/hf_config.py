"""Llama-Nemotron's config class for transformers (``model_type: nemotron-nas``, Llama-Nemotron
§2 Puzzle), apart from the model code so that registering it with ``AutoConfig`` imports no
modeling code."""

from __future__ import annotations

import copy

from transformers.models.llama.configuration_llama import LlamaConfig

from reasonrl.compat.transformers import finish_registrations, model_class_needed
from reasonrl.plugins.puzzle.block_config import BlockConfig, intermediate_size, parse_block_configs

MODEL_TYPE = "nemotron-nas"
ARCHITECTURE = "DeciLMForCausalLM"


class NemotronNasConfig(LlamaConfig):
    """LlamaConfig plus ``block_configs`` (one per layer); ``num_key_value_heads`` and
    ``intermediate_size`` of the base config are unused (each block has its own)."""

    model_type = MODEL_TYPE

    def __init__(self, block_configs=None, **kwargs):
        super().__init__(**kwargs)
        if block_configs is None:
            block_configs = [{"attention": {"n_heads_in_group": 1}, "ffn": {"ffn_mult": 1.0}}] * self.num_hidden_layers
        self.block_configs = parse_block_configs(block_configs, self.num_attention_heads, self.hidden_size)
        if len(self.block_configs) != self.num_hidden_layers:
            raise ValueError(
                f"block_configs has {len(self.block_configs)} entries for num_hidden_layers = {self.num_hidden_layers}"
            )
        model_class_needed(MODEL_TYPE)  # the bridge registers DeciLM's model class by name (compat.transformers)

    def __setstate__(self, state: dict) -> None:  # unpickled (a Ray worker's copy): as built
        self.__dict__.update(state)
        model_class_needed(MODEL_TYPE)

    def to_dict(self):
        out = super().to_dict()
        out["block_configs"] = [
            block.to_json() if isinstance(block, BlockConfig) else block for block in self.block_configs
        ]
        return out

    def layer_config(self, index: int) -> LlamaConfig:
        """A plain LlamaConfig for layer ``index`` (its KV heads and FFN width)."""
        block = self.block_configs[index]
        layer = copy.copy(self)
        if block.attention.kind == "attention":
            layer.num_key_value_heads = self.num_attention_heads // block.attention.n_heads_in_group
        if block.ffn.kind == "ffn":
            layer.intermediate_size = intermediate_size(block.ffn.ffn_mult, self.hidden_size)
        return layer


# a lazy registration (reasonrl.compat.transformers) that fired while this module was importing
# transformers' config class waits for this line
finish_registrations(__name__)
