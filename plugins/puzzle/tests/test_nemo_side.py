"""The NeMo adapter's reasonrl side, without NeMo: the checks a checkpoint passes before
anything runs (errors name the file), the weight renaming both ways, the side environment's
status read from files, the settings. NeMo itself: integration_tests/puzzle/test_puzzle_pipeline.py."""

from __future__ import annotations

import json

import pytest
import torch

from reasonrl.plugins.puzzle.megatron_adapter import convert_state, hf_state_from_megatron
from reasonrl.plugins.puzzle.nemo_side import (
    NemoAdapterError,
    nemo_round_trip,
    nemo_status,
    read_export,
    rope_settings,
    same_tensors,
)
from reasonrl.plugins.puzzle.settings import PuzzleError, PuzzleSettings


def _block(attention: str, ffn: str | float) -> dict:
    """One block_configs entry: attention "no_op" | "linear" | "<n_heads_in_group>"; ffn "no_op" | "linear" | ffn_mult."""
    return {
        "attention": {
            "no_op": attention == "no_op",
            "replace_with_linear": attention == "linear",
            "n_heads_in_group": int(attention) if attention.isdigit() else None,
        },
        "ffn": {
            "no_op": ffn == "no_op",
            "replace_with_linear": ffn == "linear",
            "ffn_mult": ffn if isinstance(ffn, float) else None,
        },
    }


BLOCKS = [_block("no_op", 3.0), _block("2", "linear"), _block("linear", "no_op"), _block("4", 6.0)]
CONFIG = {
    "model_type": "nemotron-nas",
    "architectures": ["DeciLMForCausalLM"],
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "hidden_size": 128,
    "vocab_size": 40,
    "rms_norm_eps": 1e-5,
    "max_position_embeddings": 64,
    "block_configs": BLOCKS,
}


def _write(folder, config, weights=True):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if weights:
        from safetensors.torch import save_file

        save_file({"x": torch.zeros(1)}, str(folder / "model.safetensors"))
    return folder


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}, "not a DeciLM / nemotron-nas export"),
        ({"block_configs": BLOCKS[:3]}, "one block per layer (num_hidden_layers = 4)"),
        ({"tie_word_embeddings": True}, "tie_word_embeddings is true"),
        ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 1e4}}, "rope type 'yarn'"),
        ({"block_configs": [{"attention": {}}] + BLOCKS[1:]}, "block_configs[0] has no 'ffn' mapping"),
    ],
)
def test_a_checkpoint_that_is_not_a_puzzle_export_is_named_and_nothing_is_written(tmp_path, change, message):
    checkpoint = _write(tmp_path / "ckpt", {**CONFIG, **change})
    out = tmp_path / "nemo"
    with pytest.raises(NemoAdapterError) as error:
        nemo_round_trip(checkpoint, out, probe_file=tmp_path / "p.pt", back_dir=tmp_path / "back")  # before NeMo starts
    assert str(checkpoint / "config.json") in str(error.value) and message in str(error.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt"]


def test_missing_files_are_named(tmp_path):
    with pytest.raises(NemoAdapterError, match=r"ckpt/config.json: missing"):
        read_export(tmp_path / "ckpt")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json")
    with pytest.raises(NemoAdapterError, match=r"bad/config.json: not readable JSON"):
        read_export(tmp_path / "bad")
    with pytest.raises(NemoAdapterError, match=r"no \*.safetensors"):
        read_export(_write(tmp_path / "noweights", CONFIG, weights=False))
    assert read_export(_write(tmp_path / "ok", CONFIG))["num_hidden_layers"] == 4


def test_rope_is_read_from_transformers_4_and_5_configs():
    assert rope_settings({"rope_parameters": {"rope_theta": 5e5, "rope_type": "default"}})["rope_theta"] == 5e5
    llama3 = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192,
    }
    old = rope_settings({"rope_theta": 1e4, "rope_scaling": llama3})
    assert (old["rope_theta"], old["rope_type"], old["factor"]) == (1e4, "llama3", 8.0)
    assert rope_settings({})["factor"] == 1.0  # plain RoPE: NeMo's llama3 scaling with factor 1 changes nothing


def test_megatron_names_and_back_give_every_tensor_unchanged():
    torch.manual_seed(0)
    heads, hidden, head_dim = 4, 128, 32
    state = {
        "model.embed_tokens.weight": torch.randn(40, hidden),
        "model.norm.weight": torch.randn(hidden),
        "lm_head.weight": torch.randn(40, hidden),
    }
    for i, block in enumerate(BLOCKS):
        p = f"model.layers.{i}."
        attention, ffn = block["attention"], block["ffn"]
        if not attention["no_op"]:
            state[p + "input_layernorm.weight"] = torch.randn(hidden)
        if attention["replace_with_linear"]:
            state[p + "self_attn.linear_attn.weight"] = torch.randn(hidden, hidden)
        elif not attention["no_op"]:
            kv = heads // attention["n_heads_in_group"] * head_dim
            state[p + "self_attn.q_proj.weight"] = torch.randn(heads * head_dim, hidden)
            state[p + "self_attn.k_proj.weight"] = torch.randn(kv, hidden)
            state[p + "self_attn.v_proj.weight"] = torch.randn(kv, hidden)
            state[p + "self_attn.o_proj.weight"] = torch.randn(hidden, heads * head_dim)
        if not ffn["no_op"]:
            state[p + "post_attention_layernorm.weight"] = torch.randn(hidden)
        if ffn["replace_with_linear"]:
            state[p + "mlp.linear_mlp.weight"] = torch.randn(hidden, hidden)
        elif not ffn["no_op"]:
            width = 256 * round(2 * ffn["ffn_mult"] * hidden / 3 / 256)
            for name in ("gate_proj", "up_proj"):
                state[p + f"mlp.{name}.weight"] = torch.randn(width, hidden)
            state[p + "mlp.down_proj.weight"] = torch.randn(hidden, width)
    megatron = convert_state(state, CONFIG)
    assert megatron["decoder.layers.1.self_attention.linear_qkv.weight"].shape == ((4 + 2 * 2) * head_dim, hidden)
    # a padded vocabulary (NeMo pads to make_vocab_size_divisible_by) is cut back to vocab_size
    megatron["output_layer.weight"] = torch.cat([megatron["output_layer.weight"], torch.zeros(8, hidden)])
    back = hf_state_from_megatron(megatron, CONFIG)
    assert set(back) == set(state)
    assert all(torch.equal(back[k], state[k]) for k in state)


def test_same_tensors_tells_bit_identical_from_close(tmp_path):
    from safetensors.torch import save_file

    for name, value in (("a", 1.0), ("b", 1.0), ("c", 1.0 + 1e-7)):
        (tmp_path / name).mkdir()
        save_file({"w": torch.full((3,), value)}, str(tmp_path / name / "model.safetensors"))
    assert same_tensors(tmp_path / "a", tmp_path / "b") == (True, 0.0)
    identical, largest = same_tensors(tmp_path / "a", tmp_path / "c")
    assert not identical and 0 < largest < 1e-6


def test_side_environment_status_is_read_from_files(tmp_path, monkeypatch):
    monkeypatch.setenv("REASONRL_NEMO_VENV", str(tmp_path / "none"))
    assert nemo_status()["state"] == "absent" and "setup_env.sh nemo" in nemo_status()["hint"]
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    site = venv / "lib" / "python3.11" / "site-packages"
    for info in ("nemo_toolkit-2.7.3", "megatron_core-0.16.1", "transformers-4.57.6"):
        (site / f"{info}.dist-info").mkdir(parents=True)
    monkeypatch.setenv("REASONRL_NEMO_VENV", str(venv))
    status = nemo_status()
    assert status["state"] == "incomplete" and status["missing"] == ["reasonrl"]
    (site / "reasonrl-0.1.0.dist-info").mkdir()
    status = nemo_status()
    assert status["state"] == "untested versions" and status["untested"] == ["megatron-core 0.16.1 (tested: 0.15.3)"]


def test_distillation_in_nemo_needs_the_nemo_target():
    assert PuzzleSettings.from_dict({"nemo": True, "nemo_distill_steps": 5}).nemo_distill_steps == 5
    for bad in ({"nemo_distill_steps": 5}, {"nemo": True, "nemo_distill_steps": -1}):
        with pytest.raises(PuzzleError, match="nemo_distill_steps"):
            PuzzleSettings.from_dict(bad)
