"""Bad ``reasonrl puzzle`` settings are refused before any stage, named, exit 2, no traceback
(issue 42): a value of the wrong type (``params_fraction: abc``), invalid YAML (``file:line``),
and a menu the parent cannot take — found from the parent's config alone, before the toy parent
trains (the user's bad menu used to surface after the parent had trained for over 120 s)."""

from __future__ import annotations

import pytest
import yaml

from reasonrl.cli.main import main as reasonrl_main
from reasonrl.errors import DEBUG_ENV

#: were a check missing, the toy parent would train one step and the run fail a few seconds later
FAST = {"toy_layers": 1, "toy_steps": 1, "calibration_sequences": 2, "distill_sequences": 2, "heldout_sequences": 2}


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv(DEBUG_ENV, raising=False)


def puzzle(tmp_path, capsys, settings: dict | str, *extra: str) -> tuple[int, str]:
    config = tmp_path / "puzzle.yaml"
    config.write_text(settings if isinstance(settings, str) else yaml.safe_dump({**FAST, **settings}))
    code = reasonrl_main(
        ["puzzle", "build-library", "--run-dir", str(tmp_path / "run"), "--config", str(config), *extra]
    )
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert not (tmp_path / "run" / "parent").exists(), "refused before the parent stage"
    return code, err


@pytest.mark.parametrize(
    "settings, said",
    [
        ({"params_fraction": "abc"}, "params_fraction: 'abc' is not a number or null; allowed: a fraction of"),
        ({"params_fraction": 1.5}, "params_fraction: 1.5 is not in (0, 1]"),
        ({"toy_steps": 2.5}, "toy_steps: 2.5 is not an integer"),
        ({"distill_lr": "1e-3"}, "distill_lr: '1e-3' is not a number (YAML reads a number such as 1e-3 as text"),
        ({"ffn_fusion": "yes please"}, "ffn_fusion: 'yes please' is not true or false"),
        ({"distill_batch": 0}, "distill_batch: 0 must be >= 1"),
        ({"hardware": {"peak_flop": 1e15}}, "hardware: unknown key 'peak_flop'"),
        ({"device": "gpu0"}, "device: 'gpu0' is not a torch device"),
    ],
)
def test_a_bad_setting_is_refused_naming_the_key(tmp_path, capsys, settings, said):
    code, err = puzzle(tmp_path, capsys, settings)
    assert code == 2 and err.startswith("reasonrl puzzle: ") and said in err, err


def test_a_bad_set_override_is_refused_naming_the_key(tmp_path, capsys):
    code, err = puzzle(tmp_path, capsys, {}, "--set", "params_fraction=abc")
    assert code == 2 and "reasonrl puzzle: params_fraction: 'abc' is not a number" in err, err


def test_invalid_yaml_is_named_with_its_line(tmp_path, capsys):
    code, err = puzzle(tmp_path, capsys, "toy_steps: 1\nmenu: {attention: [parent, ffn: [1.0]\n")
    assert code == 2 and err.startswith(f"reasonrl puzzle: {tmp_path / 'puzzle.yaml'}:3: invalid YAML"), err


@pytest.mark.parametrize(
    "menu, said",
    [
        ({"ffn": [1.0, 0.3]}, "menu.ffn: fraction 0.3: 307 channels of the parent's 1024 is not a multiple of 256"),
        ({"attention": ["parent", {"kv_heads": 3}]}, "menu.attention: kv_heads=3: must be a whole number dividing"),
        ({"attention": ["parent", "mamba"]}, "menu.attention: entry 'mamba': use 'parent', 'linear', 'no_op'"),
        ({"ffn": [0.5, "no_op"]}, "menu.ffn: must keep the parent's own FFN (1.0 or 'parent')"),
        ({"attention": [{"kv_heads": 2}]}, "menu.attention: must keep the parent's own attention"),
        ({"atention": ["parent"], "ffn": [1.0]}, "menu: unknown key 'atention'"),
        ({"ffn": []}, "menu.ffn: [] is not a non-empty list"),
        ({"ffn": [1.0, 1.0]}, "menu: lists a variant twice"),
    ],
)
def test_a_bad_menu_is_refused_before_the_parent_trains(tmp_path, capsys, menu, said):
    code, err = puzzle(tmp_path, capsys, {"menu": menu})
    assert code == 2 and said in err, err


def test_a_real_parents_missing_text_files_are_refused_before_any_stage(tmp_path, capsys):
    from transformers import LlamaConfig, LlamaForCausalLM

    parent = tmp_path / "llama"
    config = LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=256, num_hidden_layers=1, num_attention_heads=2
    )
    LlamaForCausalLM(config).save_pretrained(parent)
    settings = {"parent": str(parent), "menu": {"attention": ["parent"], "ffn": [1.0, "no_op"]}}
    code, err = puzzle(tmp_path, capsys, {**settings, "text_files": [str(tmp_path / "corpus.txt")]})
    assert code == 2 and f"reasonrl puzzle: text_files: {tmp_path / 'corpus.txt'}: no such file" in err, err
    code, err = puzzle(tmp_path, capsys, {**settings, "parent": str(tmp_path / "nowhere")})
    assert code == 2 and "cannot read a Hugging Face config" in err, err
