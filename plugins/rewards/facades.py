"""The rewards plugin's public functions, offered as ``reasonrl.api.<name>`` (hook
``reasonrl_api_functions``): MiMo §3.3.1 test-difficulty calibration and reward, and the math
reward (the reward manager's own grading path)."""

from __future__ import annotations

from reasonrl.plugins.rewards.math_reward import math_reward


def calibrate_difficulty(verdicts, levels: int = 3, level_scores=None):
    """MiMo §3.3.1 calibration of one problem from a solutions × tests matrix of booleans:
    tests clustered by pass rate into ``levels`` levels, easiest first."""
    from reasonrl.plugins.rewards.difficulty import calibrate

    return calibrate(verdicts, levels=levels, level_scores=level_scores)


def test_difficulty_reward(passed, calibration, scheme: str = "strict") -> float:
    """One solution's test-difficulty reward: ``scheme`` ∈ {strict, soft, all_or_nothing};
    ``calibration`` is what :func:`calibrate_difficulty` returned (or its JSON)."""
    from reasonrl.plugins.rewards.difficulty import TestDifficulty, reward

    if isinstance(calibration, dict):
        calibration = TestDifficulty.from_json(calibration)
    return reward(passed, calibration, scheme)


test_difficulty_reward.__test__ = False  # a facade, not a pytest test

FUNCTIONS = {
    "calibrate_difficulty": calibrate_difficulty,
    "test_difficulty_reward": test_difficulty_reward,
    "math_reward": math_reward,
}
