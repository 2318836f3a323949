"""``reasonrl mtp``: help labels each option with the actions that read it; missing inputs are
named before a model loads (issue 42.8)."""

from __future__ import annotations

import pytest

from reasonrl.cli.main import main


def test_help_names_attach_for_the_options_attach_reads(capsys):
    with pytest.raises(SystemExit):
        main(["mtp", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for option in ("--checkpoint", "--layers", "--data", "--held-out"):
        after = text.split(option, 2)[-1][:80]
        assert "attach" in after, (option, after)
    assert "reasonrl smoke sequences --out DIR" in text  # where the smoke model's --data comes from


def test_a_missing_input_is_named_before_a_model_loads(tmp_path, capsys):
    data = tmp_path / "t.jsonl"
    data.write_text('{"input_ids": [1, 2]}\n')
    missing = tmp_path / "none"
    args = ["mtp", "attach", "--out", str(tmp_path / "out"), "--checkpoint", str(missing)]
    assert main([*args, "--data", str(data), "--held-out", str(data)]) == 2
    assert capsys.readouterr().err == f"reasonrl mtp: --checkpoint: {missing}: no such file or folder\n"
