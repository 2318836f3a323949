"""Megatron-core layer specs contributed by a plugin, fetched by name, against megatron-core 0.16.1."""

from __future__ import annotations

import pytest

from reasonrl.testing.fresh_process import python_fresh

pytestmark = pytest.mark.integration

CODE = """
from reasonrl.api import megatron_layer_spec
from megatron.core.transformer.spec_utils import ModuleSpec
from megatron.core.transformer.transformer_layer import TransformerLayer

spec = megatron_layer_spec("fixture_local_gpt_layer")
print(isinstance(spec, ModuleSpec), spec.module is TransformerLayer)
try:
    megatron_layer_spec("nope")
except KeyError as exc:
    print("KeyError", "fixture_local_gpt_layer" in str(exc))
"""


def test_layer_spec_from_plugin_is_a_real_megatron_module_spec(megatron_spec_plugin_path):
    result = python_fresh(CODE, megatron_spec_plugin_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True", "KeyError", "True"]


PUZZLE_CHILD = """
import json
from reasonrl.api import megatron_layer_spec
from reasonrl.compat.megatron import init_single_process
init_single_process()
block = lambda attention, ffn: {"attention": attention, "ffn": ffn}
blocks = [block({"no_op": False, "replace_with_linear": False, "n_heads_in_group": 2}, {"no_op": False, "replace_with_linear": False, "ffn_mult": 2.0}),
          block({"no_op": True, "replace_with_linear": False, "n_heads_in_group": None}, {"no_op": False, "replace_with_linear": False, "ffn_mult": 1.0}),
          block({"no_op": False, "replace_with_linear": False, "n_heads_in_group": 4}, {"no_op": False, "replace_with_linear": True, "ffn_mult": None})]
hf_config = {"num_hidden_layers": 3, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128, "rms_norm_eps": 1e-5,
             "block_configs": blocks, "vocab_size": 32, "max_position_embeddings": 64}
spec = megatron_layer_spec("puzzle_child", hf_config=hf_config)
name = lambda part: part.module.__name__ if hasattr(part, "module") else type(part).__name__
print(json.dumps([[name(layer.submodules.self_attention), name(layer.submodules.mlp)] for layer in spec.layer_specs]))
"""


def test_the_puzzle_plugin_registers_a_childs_heterogeneous_layer_specs():
    """A built-in producer of the hook (the puzzle plugin): one megatron-core layer spec per block
    of a Puzzle child, following its block_configs — attention removed, a linear FFN, GQA kept."""
    import json

    result = python_fresh(PUZZLE_CHILD)
    assert result.returncode == 0, result.stderr[-3000:]
    layers = json.loads(result.stdout.strip().splitlines()[-1])
    assert layers == [
        ["SelfAttention", "MLP"],
        ["IdentityOp", "MLP"],
        ["SelfAttention", "ColumnParallelLinearGathered"],
    ]
