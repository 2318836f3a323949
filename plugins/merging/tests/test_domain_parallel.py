"""The domain-parallel pipeline's spec, demo domains and stage bookkeeping (the RL runs themselves:
`python -m benchmarks.merging.domain_parallel_demo`, see the README)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from benchmarks.merging.domain_parallel_demo import write_demo
from reasonrl.config import ConfigError
from reasonrl.plugins.merging.domain_parallel import DONE, load_spec, run_rl


def spec_file(tmp_path, **change):
    values = {
        "recipe": "longcat",
        "workdir": "runs",
        "domains": {
            "a": {"train_files": "a.parquet", "val_files": "av.parquet"},
            "b": {"train_files": "b.parquet", "val_files": "bv.parquet"},
        },
        **change,
    }
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in values.items() if v is not None}))
    return path


@pytest.mark.parametrize(
    "change, key",
    [
        ({"domains": {"a": {"train_files": "a", "val_files": "b"}}}, "domain_parallel.domains"),
        (
            {"domains": {"a": {"train_files": "a"}, "b": {"train_files": "b", "val_files": "c"}}},
            "domain_parallel.domains.a",
        ),
        ({"drop_rate": 1.0}, "domain_parallel.drop_rate"),
        ({"eval_models": ["experts", "teacher"]}, "domain_parallel.eval_models"),
        ({"eval_models": []}, "domain_parallel.eval_models"),
        ({"recipe": None}, "domain_parallel.recipe"),
    ],
)
def test_bad_pipelines_fail_naming_the_key(tmp_path, change, key):
    with pytest.raises(ConfigError) as error:
        load_spec(spec_file(tmp_path, **change))
    assert error.value.key == key


def test_a_finished_stage_is_skipped_on_the_next_launch(tmp_path):
    spec = load_spec(spec_file(tmp_path))
    folder = tmp_path / "runs" / "experts" / "a"
    folder.mkdir(parents=True)
    (folder / DONE).write_text(json.dumps({"checkpoint": "/ckpt/a", "step": 3}))
    said = []
    assert str(run_rl(spec, folder, spec.domains["a"], [], said.append)) == "/ckpt/a"
    assert said == ["a: done, skipped"]


def test_demo_domains_split_the_sums_by_carry(tmp_path):
    spec = load_spec(write_demo(tmp_path, steps=1))
    assert sorted(spec.domains) == ["carry", "no_carry"] and spec.recipe == "longcat"
    seen = {}
    for name, files in spec.domains.items():
        for split in ("train_files", "val_files"):
            frame = pd.read_parquet(files[split])
            for prompt in frame["prompt"]:
                a, b = (int(x) for x in prompt[-1]["content"].split("=")[0].split("+"))
                assert ((a % 10 + b % 10) >= 10) == (name == "carry")
            seen[(name, split)] = len(frame)
    assert all(count > 0 for count in seen.values()), seen
