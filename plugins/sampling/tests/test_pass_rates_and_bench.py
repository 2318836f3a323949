"""``reasonrl sampling pass-rates`` on a verl parquet and judge/rollout records, and
``reasonrl bench sampling`` end to end at a small size."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from reasonrl.plugins.sampling.pass_rates import pass_rate_column, tally


def test_tally_reads_numbers_booleans_and_judge_verdict_lists():
    records = [
        {"extra_info": {"index": 0}, "acc": 1.0},
        {"extra_info": {"index": 0}, "acc": 0.0},
        {"extra_info": {"index": 1}, "acc": True},
        {"extra_info": {"index": 2}, "acc": ["passed", "passed"]},
        {"extra_info": {"index": 2}, "acc": ["passed", "wrong_answer"]},
    ]
    assert tally(records, "extra_info.index", "acc") == {0: (1, 2), 1: (1, 1), 2: (1, 2)}
    assert tally([{"k": "a", "s": 0.6}], "k", "s", success_at=0.5) == {"a": (1, 1)}
    with pytest.raises(KeyError, match="record 1 has no field 'acc'"):
        tally([{"extra_info": {"index": 0}}], "extra_info.index", "acc")


def test_rows_without_enough_samples_fail_unless_a_fill_value_is_given():
    counts = {0: (3, 4), 1: (1, 2)}
    assert pass_rate_column([0, 1], counts, min_samples=2) == [0.75, 0.5]
    with pytest.raises(ValueError, match="1 of 2 rows have fewer than 4"):
        pass_rate_column([0, 1], counts, min_samples=4)
    assert pass_rate_column([0, 1], counts, min_samples=3, missing=-1.0) == [0.75, -1.0]


def test_cli_writes_the_column(tmp_path):
    dataset = tmp_path / "train.parquet"
    pd.DataFrame(
        {
            "prompt": [[{"role": "user", "content": f"q{i}"}] for i in range(3)],
            "extra_info": [{"index": i} for i in range(3)],
        }
    ).to_parquet(dataset)
    logs = tmp_path / "rollouts.jsonl"
    rows = [(0, 1.0), (0, 1.0), (1, 0.0), (1, 1.0), (2, 0.0), (2, 0.0)]
    logs.write_text("".join(json.dumps({"extra_info": {"index": i}, "acc": a}) + "\n" for i, a in rows))
    out = tmp_path / "out.parquet"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reasonrl.cli.main",
            "sampling",
            "pass-rates",
            "--logs",
            str(logs),
            "--dataset",
            str(dataset),
            "--out",
            str(out),
            "--min-samples",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert pd.read_parquet(out)["pass_rate"].tolist() == [1.0, 0.5, 0.0]
    bad = subprocess.run(
        [
            sys.executable,
            "-m",
            "reasonrl.cli.main",
            "sampling",
            "pass-rates",
            "--logs",
            str(logs),
            "--dataset",
            str(dataset),
            "--out",
            str(out),
            "--min-samples",
            "3",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "fewer than 3 logged responses" in bad.stderr


def test_bench_prints_the_comparison_and_the_overhead(tmp_path):
    plot = tmp_path / "sim.png"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "reasonrl.cli.main",
            "bench",
            "sampling",
            "--prompts",
            "2000",
            "--steps",
            "20",
            "--batch",
            "32",
            "--pool",
            "20000",
            "--overhead-batches",
            "5",
            "--plot",
            str(plot),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for label in ("dynamic ", "+ easy pool", "+ prioritized", "rollouts per trained rollout", "median", "epoch fill"):
        assert label in done.stdout, done.stdout
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
