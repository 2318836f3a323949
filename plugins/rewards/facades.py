"""The rewards plugin's public functions, offered as ``reasonrl.api.<name>`` (hook
``reasonrl_api_functions``): MiMo §3.3.1 test-difficulty calibration and reward, and the math
reward (the reward manager's own grading path), and programs run against tests in the sandboxed
local judge."""

from __future__ import annotations

import atexit
import functools

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


def run_code_tests(programs, tests, language: str = "python", time_s: float = 2.0) -> list[list[bool]]:
    """Each program run against ``tests`` (``{"inputs", "outputs"}`` or ``{"assertions"}``, as the
    judge reads them) in the sandboxed local judge: a programs × tests matrix of passed booleans.
    The judge's sandboxes stay warm in this process for the next call.

    Raises ``SandboxUnavailable`` when the sandbox cannot start here, and :class:`CodeJudgeError`
    when the judge itself failed on a program (a runner that crashed or hung, a test the judge cannot
    run): an infrastructure failure is never reported as a failed test.

    Example: ``run_code_tests(["print(int(input()) * 2)"], {"inputs": ["2"], "outputs": ["4"]})``
    → ``[[True]]``.
    """
    from reasonrl.plugins.rewards.judge.formats import Problem, Submission, parse_tests

    problem = Problem("run_code_tests", parse_tests(tests))
    judge = _local_judge(float(time_s))
    results = judge.judge_sync(Submission(problem, code, language, str(i)) for i, code in enumerate(programs))
    failed = [(i, result.message) for i, result in enumerate(results) if result.judge_error]
    if failed:
        raise CodeJudgeError(f"the judge failed on program(s) {[i for i, _ in failed]}: {failed[0][1] or 'no message'}")
    return [result.passed for result in results]


class CodeJudgeError(RuntimeError):
    """The judge, not the program, failed (``judge_error``): no verdict to report."""


@functools.cache
def _local_judge(time_s: float):
    from reasonrl.plugins.rewards.judge.local import JudgeLimits, LocalJudge

    judge = LocalJudge(JudgeLimits(time_s=time_s))
    judge.probe()
    atexit.register(judge.close)
    return judge


run_code_tests.__test__ = False  # a facade, not a pytest test

FUNCTIONS = {
    "run_code_tests": run_code_tests,
    "calibrate_difficulty": calibrate_difficulty,
    "test_difficulty_reward": test_difficulty_reward,
    "math_reward": math_reward,
}
