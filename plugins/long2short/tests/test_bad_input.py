"""``reasonrl long2short sample`` / ``dpo`` refuse a missing model or data file before vLLM or a
trainer starts: named, exit 2, no traceback (issue 42)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from reasonrl.cli.main import main as reasonrl_main
from reasonrl.errors import DEBUG_ENV


@pytest.fixture(autouse=True)
def _nothing_starts(monkeypatch):
    """Generation and DPO training would start only past the checks: here they must not."""
    from reasonrl.plugins.long2short import dpo, rejection

    def started(*args, **kwargs):
        raise AssertionError("vLLM / the trainer started before the inputs were checked")

    monkeypatch.setattr(rejection, "generate", started)
    monkeypatch.setattr(dpo, "trainer", started)
    monkeypatch.delenv(DEBUG_ENV, raising=False)


@pytest.fixture
def files(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "qwen2"}))
    data = tmp_path / "train.parquet"
    prompt = [{"role": "user", "content": "1+1="}]
    pd.DataFrame({"prompt": [prompt], "reward_model": [{"ground_truth": "2"}]}).to_parquet(data)
    pairs = tmp_path / "pairs.parquet"
    answer = [{"role": "assistant", "content": "2"}]
    pd.DataFrame({"prompt": [prompt], "chosen": [answer], "rejected": [answer]}).to_parquet(pairs)
    return {"model": model, "data": data, "pairs": pairs, "tmp": tmp_path}


def sample(files, capsys, **change) -> tuple[int, str]:
    values = {
        "--model": files["model"],
        "--data": files["data"],
        "--sft-out": files["tmp"] / "sft.parquet",
        "--dpo-out": files["tmp"] / "dpo.parquet",
        **change,
    }
    code = reasonrl_main(["long2short", "sample", *[str(x) for item in values.items() for x in item]])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert not (files["tmp"] / "sft.parquet").exists()
    return code, err


def test_a_missing_model_is_refused_before_vllm_starts(files, capsys):
    missing = files["tmp"] / "no_such_model"
    code, err = sample(files, capsys, **{"--model": missing})
    assert code == 2 and err.startswith(f"reasonrl long2short: {missing}: no such folder (--model"), err


def test_a_folder_without_config_json_is_refused(files, capsys):
    (files["model"] / "config.json").unlink()
    code, err = sample(files, capsys)
    assert code == 2 and f"{files['model']}: not a Hugging Face checkpoint folder: no config.json" in err, err


@pytest.mark.parametrize(
    "change, said",
    [
        ({"--data": "missing.parquet"}, "missing.parquet: no such file (--data)"),
        ({"--data": "not_parquet"}, "not_parquet: not a readable parquet file (--data)"),
        ({"--data": "pairs"}, "has no column 'reward_model' (--data needs prompt, reward_model)"),
        ({"--n": 1}, "--n: 1; allowed: at least 2"),
        ({"--max-tokens": 0}, "--max-tokens: 0; allowed: >= 1"),
    ],
)
def test_bad_data_or_numbers_are_refused(files, capsys, change, said):
    (files["tmp"] / "not_parquet").write_text("prompt,reward_model\n")
    change = {k: files.get(v, files["tmp"] / str(v)) if k == "--data" else v for k, v in change.items()}
    code, err = sample(files, capsys, **change)
    assert code == 2 and said in err, err


def test_dpo_refuses_a_missing_model_and_pairs(files, capsys):
    out = files["tmp"] / "dpo_out"
    missing = files["tmp"] / "gone"
    args = ["long2short", "dpo", "--pairs", str(files["pairs"]), "--out", str(out)]
    assert reasonrl_main([*args, "--model", str(missing)]) == 2
    assert f"{missing}: no such folder (--model" in capsys.readouterr().err
    assert (
        reasonrl_main(["long2short", "dpo", "--model", str(files["model"]), "--pairs", str(missing), "--out", str(out)])
        == 2
    )
    assert f"{missing}: no such file (--pairs)" in capsys.readouterr().err
    assert not out.exists()
