"""One response → its rewards: the framework-free scorer behind the verl reward manager.

Task reward by the ground truth's shape:
- code: the ground truth holds tests (``{"inputs","outputs"}`` or ``{"assertions"}``, dict or
  JSON string) and optionally the problem's calibration under ``"difficulty"`` (also read from
  ``extra_info["test_difficulty"]``); the response's last fenced code block is judged and
  scored with ``code_scheme`` (an uncalibrated problem falls back to all_or_nothing);
- math: anything else; Math-Verify equivalence with the ground truth.
Then the thinking-toggle format reward (when weighted and the prompt sets the toggle) and the
incomplete-signal flags. The length penalty needs the whole group: ``verl_group.py``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from reasonrl.plugins.rewards.code_extraction import extract_code
from reasonrl.plugins.rewards.config import RewardsConfig
from reasonrl.plugins.rewards.difficulty import TestDifficulty, levels_passed, reward
from reasonrl.plugins.rewards.incomplete_signal import is_incomplete, is_repetitive, is_truncated
from reasonrl.plugins.rewards.judge import JudgeLimits, Problem, Submission, parse_tests
from reasonrl.plugins.rewards.math_reward import verify_math
from reasonrl.plugins.rewards.thinking_format import format_ok

#: Every response reports the same keys (verl takes the key list from the first sample).
EXTRA_KEYS = (
    "score",
    "acc",
    "task_kind",
    "task_score",
    "format_ok",
    "judge_error",
    "truncated",
    "repetitive",
    "incomplete",
    "code_judged",
    "code_tests_passed",
    "code_levels_passed",
    "code_level_pass",
    "math_timeout",
    "math_failed",
)


def code_spec(ground_truth: Any, extra_info: dict | None) -> tuple[Problem, TestDifficulty | None] | None:
    """The tests (and calibration) if ``ground_truth`` describes a code problem, else None."""
    spec = ground_truth
    if isinstance(spec, str):
        if not spec.lstrip().startswith("{"):
            return None
        try:
            spec = json.loads(spec)
        except ValueError:
            return None
    if not isinstance(spec, dict) or not ({"inputs", "assertions"} & set(spec)):
        return None
    problem = Problem(
        str(spec.get("problem_id", "")),
        parse_tests({k: v for k, v in spec.items() if k in ("inputs", "outputs", "assertions")}),
        spec.get("setup", ""),
    )
    difficulty = spec.get("difficulty") or (extra_info or {}).get("test_difficulty")
    if isinstance(difficulty, str):
        difficulty = json.loads(difficulty)
    return problem, (TestDifficulty.from_json(difficulty) if difficulty else None)


def make_judge(settings: RewardsConfig, reward_workers: int = 1, probe: bool = True):
    """The judge ``settings`` select: local sandboxes or a SandboxFusion server.

    With ``probe`` (the default) a local judge has run a known-good program in a sandbox before
    it is returned; a sandbox that cannot start here raises :class:`SandboxUnavailable` (the
    run stops) instead of scoring every code response as a ``judge_error``.
    """
    from reasonrl.plugins.rewards.judge import LocalJudge, SandboxUnavailable
    from reasonrl.plugins.rewards.judge.sandbox_fusion import SandboxFusionJudge

    limits = JudgeLimits(
        time_s=settings.time_limit_s,
        memory_mb=settings.memory_limit_mb,
        max_processes=settings.max_processes,
        float_tolerance=settings.float_tolerance,
    )
    if settings.judge_backend == "sandbox_fusion":
        return SandboxFusionJudge(settings.sandbox_fusion_url, limits)
    workers = settings.judge_workers or max(1, (os.cpu_count() or 1) // max(1, reward_workers))
    judge = LocalJudge(limits, workers=workers)
    if probe:
        try:
            judge.probe()
        except SandboxUnavailable as error:
            judge.close()
            raise SandboxUnavailable(
                "reasonrl.rewards.judge_backend=local: the code judge's sandbox cannot start here "
                f"(requirements: docs/judge.md): {error}"
            ) from error
    return judge


@dataclass
class Scored:
    task_score: float
    correct: bool
    judge_error: bool = False
    tests_passed: float = 0.0
    levels_passed: int = 0
    level_pass: str = ""
    math_status: str = ""  # verified | timeout | failed (math answers only)
    kind: str = "math"  # which reward graded it: math | code | custom
    judged: bool = False  # code: the judge ran the extracted program (and gave verdicts)


async def score_code(judge, problem: Problem, calibration: TestDifficulty | None, response: str, scheme: str) -> Scored:
    extracted = extract_code(response)
    if extracted is None or not problem.tests:
        return Scored(0.0, False, kind="code")
    code, language = extracted
    (result,) = await judge.judge([Submission(problem, code, language)])
    if result.judge_error:
        return Scored(0.0, False, judge_error=True, kind="code")
    passed = result.passed
    fraction = sum(passed) / len(passed)
    if calibration is None or len(calibration.levels) != len(passed):
        return Scored(float(all(passed)), all(passed), tests_passed=fraction, kind="code", judged=True)
    per_level = levels_passed(passed, calibration)
    consecutive = next((g for g, ok in enumerate(per_level) if not ok), len(per_level))
    return Scored(
        reward(passed, calibration, scheme),
        all(passed),
        tests_passed=fraction,
        levels_passed=consecutive,
        level_pass="".join("1" if ok else "0" for ok in per_level),
        kind="code",
        judged=True,
    )


def incomplete_flags(
    settings: RewardsConfig,
    response_ids: list[int],
    max_response_length: int | None,
    judge_error: bool,
    stop_ids: frozenset[int] = frozenset(),
) -> dict[str, float]:
    truncated = max_response_length is not None and is_truncated(response_ids, max_response_length, stop_ids)
    repetitive = truncated and is_repetitive(response_ids, settings.repetition_window, settings.repetition_min_repeats)
    incomplete = is_incomplete(judge_error, truncated, repetitive)
    return {
        "truncated": float(truncated),
        "repetitive": float(repetitive),
        "incomplete": float(incomplete),
        "judge_error": float(judge_error),
    }


def thinking_format(response: str, mode: str | None) -> float | None:
    """1.0/0.0 for the toggle's format when ``mode`` is known (the caller passes None when the
    format reward has no weight or the prompt sets no toggle), else None."""
    return None if mode is None else float(format_ok(response, mode))


def combine(
    task: Scored, format_score: float | None, flags: dict[str, float], settings: RewardsConfig
) -> dict[str, Any]:
    score = task.task_score + (settings.thinking_format_weight * format_score if format_score is not None else 0.0)
    extra = {
        "score": score,
        "acc": float(task.correct),
        "task_kind": task.kind,
        "task_score": task.task_score,
        "format_ok": -1.0 if format_score is None else format_score,
        "code_judged": float(task.judged),
        "code_tests_passed": task.tests_passed,
        "code_levels_passed": float(task.levels_passed),
        "code_level_pass": task.level_pass,
        "math_timeout": float(task.math_status == "timeout"),
        "math_failed": float(task.math_status == "failed"),
        **flags,
    }
    assert tuple(sorted(extra)) == tuple(sorted(EXTRA_KEYS))
    return extra


def math_scored(response: str, ground_truth: Any) -> Scored:
    """Math-Verify in this process's bounded verifier (the path ``reasonrl.api.math_reward`` takes)."""
    outcome = verify_math(response, str(ground_truth))
    return Scored(outcome.score, outcome.score >= 1.0, math_status=outcome.status)


__all__ = [
    "EXTRA_KEYS",
    "Scored",
    "code_spec",
    "combine",
    "incomplete_flags",
    "make_judge",
    "math_scored",
    "score_code",
    "thinking_format",
]
