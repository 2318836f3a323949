"""The CPU judge (issue 46): built through ``reasonrl bench model-rewards --judge-only`` (cached by spec),
its agreement with Math-Verify on held-apart pairs printed and checked, and ``reasonrl bench
model-rewards`` on it — served by ``vllm serve`` (vLLM's CPU build), asked over HTTP by the
product's verdict reward — with the cache saving requests and changing no verdict's correctness
more than the judge's own variance. Opt-in (slow): see below."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

#: opt-in (pytest --run-slow): building the judge took 13 minutes here (801 s for its 3,000 training
#: steps, the cores shared with other work), past CI's time budget; with the judge cached, ~40 s.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(2400)]


def _build(*flags: str):
    done = subprocess.run(
        [sys.executable, "-m", "reasonrl.cli.main", "bench", "model-rewards", "--judge-only", *flags],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("tiny judge ")]
    folder = line.split()[2].rstrip(":")
    return folder, json.loads(open(os.path.join(folder, "tiny_judge.json")).read()), line


@pytest.fixture(scope="module")
def judge():
    return _build()


@pytest.fixture(scope="module")
def science_judge():
    """The judge of the science-style rows: references in digits or words."""
    return _build("--science")


def test_the_judge_agrees_with_math_verify_on_held_apart_pairs(judge):
    _folder, summary, line = judge
    print(line)
    assert summary["held_apart_pairs"] == 600 and summary["mathverify_readable_pairs"] > 300
    assert summary["agreement_with_mathverify"] >= AGREEMENT
    assert summary["accuracy_on_word_pairs"] >= WORDS
    assert summary["unparsed_replies"] == 0


def test_the_science_judge_reads_worded_references_far_better_than_chance(science_judge):
    _folder, summary, line = science_judge
    print(line)
    # readable: a digit reference (half) and a digit or expression answer (two forms of three): ~200
    assert summary["held_apart_pairs"] == 600 and summary["mathverify_readable_pairs"] > 150
    assert summary["agreement_with_mathverify"] >= SCIENCE and summary["accuracy_on_word_pairs"] >= SCIENCE
    assert summary["unparsed_replies"] == 0


def test_bench_model_rewards_serves_the_judge_and_the_cache_saves_requests(judge, tmp_path):
    folder, _summary, _line = judge
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, "-m", "reasonrl.cli.main", "bench", "model-rewards", "--judge", folder, "--groups", "8",
         "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=540,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(done.stdout)
    result = json.loads(out.read_text())
    plain, cached = result["without cache"], result["with cache"]
    assert plain["requests"] == plain["verdicts"] == 64
    assert cached["requests"] < plain["requests"] and cached["metrics"]["cache"] == 64 - cached["requests"]
    assert plain["metrics"]["unparsed"] == cached["metrics"]["unparsed"] == 0
    assert plain["accuracy"] >= WORDS and cached["accuracy"] >= WORDS
    assert "verdicts/s" in done.stdout


#: two builds of the judge measured 0.990 / 0.940 and 0.937 / 0.871 (plugins/model_rewards/README.md:
#: builds on two fresh machines differ), the bench's accuracy 0.965-0.984 on the first
AGREEMENT = 0.9
WORDS = 0.85
#: the science judge (references in words too) measured 0.847 / 0.842 in its one build: right on 96-98 %
#: of equal pairs, on 70-78 % of near misses. The bar says "far better than chance (0.5)", not "a good
#: judge" (3,000 training steps; a longer build did not fit in the session that added it)
SCIENCE = 0.8


def test_nemotron_scores_with_the_judge_on_verls_own_reward_model_server(science_judge, tmp_path):
    """Two CPU steps of ``nemotron`` with ``+reasonrl/model_rewards=nemotron_judge`` and the preset
    ``cpu_tiny_judge``: verl serves the tiny judge on its own reward-model server (its own pool),
    the verdict reward asks it through the router verl hands the reward function, Math-Verify first.
    Half the rows are science-style: their reference is free-form (written in words), which
    Math-Verify cannot read, so the judge decides them."""
    folder, _summary, _line = science_judge
    data = tmp_path / "science"
    made = subprocess.run(
        [sys.executable, "-m", "benchmarks.model_rewards.tiny_judge", "--science-data", str(data)],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )  # fmt: skip
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    done = subprocess.run(
        [sys.executable, "-m", "reasonrl.cli.main", "train", "recipe=nemotron", "+preset=cpu_tiny_judge",
         "+reasonrl/model_rewards=nemotron_judge", f"reward.reward_model.model_path={folder}",
         "reasonrl.model_rewards.template=smoke_judge", f"reasonrl.model_rewards.template_file={folder}/judge_templates.yaml",
         "reasonrl.model_rewards.judge_max_tokens=40", "trainer.total_training_steps=2", "trainer.test_freq=-1",
         f"data.train_files={data / 'train.parquet'}", f"data.val_files={data / 'val.parquet'}",
         f"trainer.default_local_dir={tmp_path / 'run'}"],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (metrics_file,) = (tmp_path / "run" / "metrics").glob("*.jsonl")
    steps = {
        row["step"]: row["data"] for row in map(json.loads, metrics_file.read_text().splitlines()) if row["step"] > 0
    }
    assert sorted(steps) == [1, 2]
    for step, metrics in steps.items():
        counts = {k.removeprefix("model_rewards/"): v for k, v in metrics.items() if k.startswith("model_rewards/")}
        print(f"step {step}: {counts}")
        assert counts["judge_model"] > 0 and counts["judge_rule"] > 0, "the judge answered where Math-Verify said no"
        assert counts["judge_timeout"] == counts["judge_error"] == 0, "the judge's server answered every request"
        # a reply without a verdict is counted and scored (unparsed_score), never raised: the tiny judge on
        # the policy's sampled answers left 0 and 1 of 64 unparsed in two runs
        assert counts["judge_unparsed"] <= 3, "rarely: at most 5 % of a step's responses"
        judged = sum(counts[f"judge_{k}"] for k in ("rule", "empty", "model", "cache", "unparsed", "timeout", "error"))
        assert judged == 64, "every response of the step was judged (64 = the preset's batch)"
