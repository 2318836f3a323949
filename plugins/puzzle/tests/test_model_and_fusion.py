"""The heterogeneous Llama for transformers, its block_configs format, and FFN Fusion."""

from __future__ import annotations

import json

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

from reasonrl.plugins.puzzle.block_config import BlockConfigError, ffn_mult_for, intermediate_size, parse_block_configs
from reasonrl.plugins.puzzle.fusion import fusable_runs, fuse, parallel_run_output
from reasonrl.plugins.puzzle.library import AttentionVariant, FfnVariant, block_config
from reasonrl.plugins.puzzle.model import DeciLMForCausalLM, register_with_transformers
from reasonrl.plugins.puzzle.subblocks import build_model, nas_config, split_layers

BASE = dict(
    vocab_size=40,
    hidden_size=128,
    num_attention_heads=4,
    num_hidden_layers=4,
    max_position_embeddings=64,
    rms_norm_eps=1e-5,
)


def llama(seed=0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(**BASE, num_key_value_heads=4, intermediate_size=512)
    config._attn_implementation = "sdpa"
    return LlamaForCausalLM(config).eval()


def blocks(*pairs):
    return [block_config(a, f, 4, 128) for a, f in pairs]


PARENT = (AttentionVariant("attention", 4), FfnVariant("ffn", 512))


def test_an_all_parent_child_computes_what_llama_computes():
    parent = llama()
    child = DeciLMForCausalLM(nas_config(parent.config, blocks(*[PARENT] * 4))).eval()
    child.load_state_dict(parent.state_dict(), strict=True)
    tokens = torch.randint(0, 40, (3, 20))
    assert torch.allclose(parent(tokens).logits, child(tokens).logits, atol=1e-5)


def test_ffn_mult_round_trips_and_refuses_what_the_format_cannot_hold():
    for hidden in (128, 4096, 8192):
        for size in (256, 768, 14336, 28672):
            assert intermediate_size(ffn_mult_for(size, hidden), hidden) == size
    with pytest.raises(BlockConfigError, match="not a positive multiple of 256"):
        ffn_mult_for(300, 128)


def test_block_configs_round_trip_through_config_json(tmp_path):
    register_with_transformers()
    parent = llama()
    chosen = blocks(
        PARENT,
        (AttentionVariant("attention", 1), FfnVariant("ffn", 256)),
        (AttentionVariant("linear"), FfnVariant("linear")),
        (AttentionVariant("no_op"), FfnVariant("no_op")),
    )
    child = DeciLMForCausalLM(nas_config(parent.config, chosen)).eval()
    child.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["model_type"] == "nemotron-nas" and saved["architectures"] == ["DeciLMForCausalLM"]
    assert (
        saved["block_configs"][1]["attention"]["n_heads_in_group"] == 4
        and saved["block_configs"][1]["ffn"]["ffn_mult"] == 3.0
    )
    assert saved["block_configs"][3]["attention"]["no_op"] and saved["block_configs"][2]["ffn"]["replace_with_linear"]
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert loaded.config.block_configs == chosen
    tokens = torch.randint(0, 40, (2, 16))
    assert torch.allclose(loaded(tokens).logits, child(tokens).logits, atol=1e-6)
    assert {"model.layers.2.self_attn.linear_attn.weight", "model.layers.2.mlp.linear_mlp.weight"} <= set(
        loaded.state_dict()
    )
    assert not any(k.startswith("model.layers.3.") for k in loaded.state_dict()), "no-op blocks hold no weights"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (
            [{"attention": {"n_heads_in_group": 1, "flash": True}, "ffn": {"ffn_mult": 1.0}}],
            r"block_configs\[0\].attention: unknown key 'flash'",
        ),
        ([{"attention": {"n_heads_in_group": 3}, "ffn": {"ffn_mult": 1.0}}], "must divide num_attention_heads"),
        ([{"attention": {"n_heads_in_group": 1}, "mlp": {}}], r"block_configs\[0\]: unknown key 'mlp'"),
        (
            [{"attention": {"no_op": True, "window_length": 128}, "ffn": {"no_op": True}}],
            "window_length = 128 is not supported",
        ),
        ([{"attention": {"no_op": True}, "ffn": {"ffn_mult": -1}}], "ffn_mult = -1 must be a positive number"),
    ],
)
def test_bad_block_configs_name_the_entry_and_key(raw, message):
    with pytest.raises(BlockConfigError, match=message):
        parse_block_configs(raw, num_attention_heads=4, hidden_size=128)


def test_ffn_fusion_equals_the_parallel_run_exactly():
    parent = llama(seed=3)
    no_attention = AttentionVariant("no_op")
    chosen = blocks(
        PARENT,
        (no_attention, FfnVariant("ffn", 512)),
        (no_attention, FfnVariant("ffn", 256)),
        (no_attention, FfnVariant("ffn", 512)),
    )
    child = DeciLMForCausalLM(nas_config(parent.config, chosen)).eval()
    with torch.no_grad():
        for name, tensor in child.named_parameters():
            tensor.copy_(torch.randn_like(tensor) * 0.05 + (1.0 if "layernorm" in name else 0.0))
    assert fusable_runs(chosen) == [(1, 4)]
    base, states = split_layers(child.state_dict(), 4)
    new_blocks, new_states = fuse(chosen, states, 128)
    assert len(new_blocks) == 2 and intermediate_size(new_blocks[1].ffn.ffn_mult, 128) == 1280
    fused = build_model(parent.config, new_blocks, base, new_states)
    hidden = torch.randn(2, 10, 128)
    with torch.no_grad():
        expected = parallel_run_output(child.model.layers[1:4], hidden)
        got = fused.model.layers[1](hidden)
        sequential = child.model.layers[3](child.model.layers[2](child.model.layers[1](hidden)))
    assert (got - expected).abs().max() < 1e-5
    assert (sequential - expected).abs().max() > 1e-3, "parallel execution is an approximation of the sequential run"


def test_verls_bridge_registers_nemotron_nas_by_name_and_transformers_finds_it_on_lookup(tmp_path):
    """``import verl`` registers DeciLM with transformers without importing it (issue 48); the
    first config lookup imports the config class, the first model lookup the model."""
    from reasonrl.testing.fresh_process import python_fresh

    DeciLMForCausalLM(nas_config(llama().config, blocks(*[PARENT] * 4))).save_pretrained(tmp_path)
    code = (
        "import sys, verl\nprint('reasonrl.plugins.puzzle.model' in sys.modules)\n"
        f"from transformers import AutoConfig, AutoModelForCausalLM\nc = AutoConfig.from_pretrained({str(tmp_path)!r})\n"
        "m = AutoModelForCausalLM.from_config(c)\nfrom reasonrl.manager import load_errors\n"
        "print(type(c).__name__, type(m).__name__, load_errors())\n"
    )
    result = python_fresh(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.splitlines()[-2:] == ["False", "NemotronNasConfig DeciLMForCausalLM []"], result.stdout[-500:]
