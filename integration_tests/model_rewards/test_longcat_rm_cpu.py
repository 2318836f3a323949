"""LongCat §3.4.3's general stage on CPU (issue 46): ``reasonrl train recipe=longcat
+preset=cpu_tiny_judge +reasonrl/model_rewards=longcat_rm`` — verl serves the tiny discriminative
reward model (``benchmarks/model_rewards/tiny_rm.py``: the smoke policy's body with a score head,
Bradley-Terry on right vs near-miss sums) on its own reward-model server; the general rows get its
``/classify`` score through verl's router, the other rows keep Math-Verify."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from reasonrl.testing.cpu_runs import launch_metrics, run_to_end, tail, train_args

REPO = Path(__file__).resolve().parents[2]
#: opt-in (pytest --run-slow): a second vLLM engine (the reward model's) and two steps, ~6 minutes
#: here, beside CI's ~51 of its 60-minute budget; the reward model's build is ~1 minute.
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1800)]

RESPONSES = 64  # the preset's batch: 16 prompts x 4
#: measured 0.905 on 400 held-apart pairs (tiny_rm.json); a fresh head is at chance (0.515)
PAIRWISE = 0.8


@pytest.fixture(scope="module")
def reward_model(tmp_path_factory):
    data = tmp_path_factory.mktemp("general")
    done = subprocess.run(
        [sys.executable, "-m", "benchmarks.model_rewards.tiny_rm", "--data", str(data)],
        capture_output=True, text=True, timeout=900, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("tiny rm ")]
    folder = Path(line.split()[2].rstrip(":"))
    return folder, json.loads((folder / "tiny_rm.json").read_text()), data


def test_the_reward_model_ranks_right_sums_above_near_misses(reward_model):
    _folder, summary, _data = reward_model
    print(summary)
    assert summary["pairwise_accuracy"] >= PAIRWISE > summary["pairwise_accuracy_before"]


def test_longcat_general_rows_are_scored_by_the_reward_model_on_verls_server(reward_model, tmp_path, run_tag):
    folder, _summary, data = reward_model
    run_dir, log = tmp_path / "run", tmp_path / "launch.log"
    args = train_args(
        "longcat",
        run_dir,
        "+reasonrl/model_rewards=longcat_rm",
        f"reward.reward_model.model_path={folder}",
        f"data.train_files={data / 'train.parquet'}",
        f"data.val_files={data / 'val.parquet'}",
        "trainer.total_training_steps=2",
        "trainer.test_freq=-1",
        "trainer.val_before_train=false",
    )
    args[args.index("+preset=cpu_tiny")] = "+preset=cpu_tiny_judge"
    done = run_to_end(args, run_tag, log)
    assert done.returncode == 0, tail(log)
    (steps,) = launch_metrics(run_dir)
    trained = {s: m for s, m in steps.items() if s >= 1}
    assert sorted(trained) == [1, 2], tail(log)
    for step, metrics in trained.items():
        counts = {k.removeprefix("model_rewards/"): v for k, v in metrics.items() if k.startswith("model_rewards/")}
        print(f"step {step}: {json.dumps(counts)}")
        # the general rows (half the prompts; longcat's filters may drop whole groups first)
        assert counts["rm_scored"] > 0 and counts["rm_error"] == counts["rm_timeout"] == 0, counts
        assert counts["rm_scored"] % 4 == 0 and counts["rm_scored"] < RESPONSES, "whole groups, not every row"
        assert metrics["reward/math_graded"] > 0, "the other rows kept Math-Verify"
