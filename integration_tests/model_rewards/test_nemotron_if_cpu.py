"""Llama-Nemotron §6.1 on CPU (issue 46): ``reasonrl train recipe=nemotron_if +preset=cpu_tiny``
— verl's RLOO over the smoke instruction-following rows (``reasonrl.smoke.data``: the sum as a
keyword, fewer than two words), scored by the model_rewards plugin's constraint reward (IFEval's
checks) through verl's custom-reward extension point, the toggle's format reward on top."""

from __future__ import annotations

import json

import pytest
from omegaconf import OmegaConf

from reasonrl.testing.cpu_runs import assert_steps_trained, launch_metrics, run_to_end, tail, train_args

# opt-in (CI's time): the constraint reward and its verl wiring are unit tests of the plugin, the
# recipe's composition and values are checked in integration_tests/test_recipes.py
pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1500)]

#: the preset's batch: 16 prompts x 4 responses
RESPONSES = 64


def test_nemotron_if_trains_with_rloo_on_the_constraint_verifier(tmp_path, run_tag):
    run_dir, log = tmp_path / "run", tmp_path / "launch.log"
    args = train_args("nemotron_if", run_dir, "trainer.total_training_steps=2", "trainer.test_freq=-1")
    done = run_to_end(args, run_tag, log)
    assert done.returncode == 0, tail(log)
    (steps,) = launch_metrics(run_dir)
    # constraint reward (0/1) + the toggle's format reward (0/1)
    assert_steps_trained(steps, range(1, 3), log, reward_range=(0.0, 2.0))
    (saved,) = sorted((run_dir / "configs").glob("*.yaml"))
    assert OmegaConf.load(saved).algorithm.adv_estimator == "rloo"
    for step in (1, 2):
        metrics = steps[step]
        counts = {k.removeprefix("model_rewards/"): v for k, v in metrics.items() if k.startswith("model_rewards/")}
        print(f"step {step}: {json.dumps(counts)}")
        assert counts["constraints_checked"] == RESPONSES, "every response was checked against its constraints"
        # the warm-started model answers the sum alone about a quarter of the time: groups differ
        assert 0 < counts["constraints_followed"] < RESPONSES, counts
        assert counts["judge_model"] == counts["rm_scored"] == 0, "no model asked in this recipe"
