"""An exported Puzzle child (nemotron-nas checkpoint) run by the three engines on the same
tokens: Hugging Face transformers (the class the plugin registers), megatron-core's own
heterogeneous layer specs (0.16.1, CPU), and vLLM's native ``nemotron_nas`` (CPU build).
Each runs in a fresh process, as a user's would (``reasonrl.plugins.puzzle.engines``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reasonrl.plugins.puzzle.engines import compare
from reasonrl.testing.fresh_process import python_fresh

pytestmark = pytest.mark.integration

MAKE_CHILD = """
import sys, torch
from transformers import LlamaConfig
from reasonrl.plugins.puzzle.library import AttentionVariant as A, FfnVariant as F, block_config
from reasonrl.plugins.puzzle.model import DeciLMForCausalLM
from reasonrl.plugins.puzzle.subblocks import nas_config
torch.manual_seed(0)
base = LlamaConfig(vocab_size=40, hidden_size=128, num_attention_heads=4, num_key_value_heads=4, intermediate_size=512,
                   num_hidden_layers={layers}, max_position_embeddings=64)
pairs = {pairs}
child = DeciLMForCausalLM(nas_config(base, [block_config(a, f, 4, 128) for a, f in pairs])).eval()
with torch.no_grad():
    for name, p in child.named_parameters():
        p.copy_(torch.randn_like(p) * 0.05 + (1.0 if "norm" in name else 0.0))
child.save_pretrained({out!r})
"""

EVERY_KIND = (
    '[(A("attention", 4), F("ffn", 512)), (A("attention", 2), F("ffn", 256)), (A("attention", 1), F("linear")), '
    '(A("linear"), F("ffn", 768)), (A("no_op"), F("no_op")), (A("no_op"), F("ffn", 256))]'
)
VLLM_KINDS = '[(A("attention", 4), F("ffn", 512)), (A("attention", 2), F("ffn", 256)), (A("no_op"), F("ffn", 768)), (A("attention", 1), F("no_op"))]'


def _child(tmp_path, pairs: str, layers: int) -> str:
    out = str(tmp_path / "child")
    made = python_fresh(MAKE_CHILD.format(layers=layers, pairs=pairs, out=out))
    assert made.returncode == 0, made.stderr[-3000:]
    return out


def _probe(out: str) -> Path:
    import torch

    from reasonrl.plugins.puzzle.engines import write_probe

    torch.manual_seed(1)
    write_probe(Path(out), torch.randint(0, 40, (2, 20)))
    return Path(out)


def test_megatron_core_heterogeneous_specs_match_transformers(tmp_path):
    out = _child(tmp_path, EVERY_KIND, 6)
    blocks = json.loads((tmp_path / "child" / "config.json").read_text())["block_configs"]
    assert {b["attention"]["no_op"] for b in blocks} == {True, False} and any(
        b["ffn"]["replace_with_linear"] for b in blocks
    )
    assert compare("megatron", _probe(out)) < 1e-4


def test_vllm_nemotron_nas_matches_transformers(tmp_path):
    assert compare("vllm", _probe(_child(tmp_path, VLLM_KINDS, 4))) < 1e-4


def test_vllm_limits_are_reported_for_linear_replacements():
    from reasonrl.plugins.puzzle.block_config import parse_block_configs
    from reasonrl.plugins.puzzle.model import vllm_unsupported

    blocks = parse_block_configs([{"attention": {"replace_with_linear": True}, "ffn": {"ffn_mult": 6.0}}], 4, 128)
    assert vllm_unsupported(blocks) == [
        "block_configs[0].attention: replace_with_linear is not implemented by vLLM's nemotron_nas"
    ]
