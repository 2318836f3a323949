"""One generation → (the answer it gives, correct?), with the project's rewards: Math-Verify
(``reasonrl.api.math_reward``) for math, the letter for multiple choice, the sandboxed judge
(``reasonrl.api.run_code_tests``) for code: correct when every test passes."""

from __future__ import annotations

import re

from reasonrl.answer_text import last_boxed
from reasonrl.plugins.evaluation.eval_sets import LETTERS, Problem

_CODE_BLOCK = re.compile(r"```(?:python|py)?\s*\n(.*?)```", re.S)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:/\d+)?")


def after_thinking(text: str) -> str:
    return text.rsplit("</think>", 1)[-1]


def final_answer(problem: Problem, text: str) -> str:
    """The answer a generation gives (what cons@k votes on): math — the last ``\\boxed{}``, else
    the last number; choice — the boxed letter, else the last standalone letter among the choices,
    else the one choice whose text the answer is; code — the last fenced code block."""
    body = after_thinking(text)
    if problem.kind == "choice":
        boxed = last_boxed(body)
        boxed = boxed.strip() if boxed is not None else None
        letters = LETTERS[: len(problem.choices)]
        if boxed and boxed.strip("() ").upper() in letters:
            return boxed.strip("() ").upper()
        found = re.findall(rf"\b([{letters}])\b", body)
        if found:
            return found[-1]
        said = (boxed if boxed is not None else body).strip()  # the option's text instead of its letter
        same = [letters[i] for i, choice in enumerate(problem.choices) if choice.strip() == said]
        return same[0] if len(same) == 1 else ""
    if problem.kind == "code":
        blocks = _CODE_BLOCK.findall(body)
        return blocks[-1] if blocks else ""
    boxed = last_boxed(body)
    if boxed is not None:
        return boxed.strip()
    numbers = _NUMBER.findall(body)
    return numbers[-1] if numbers else ""


def correct(problem: Problem, answer: str, text: str | None = None) -> bool:
    """Is ``answer`` (from :func:`final_answer`) right? Math through Math-Verify on the answer."""
    if problem.kind == "choice":
        return answer == problem.reference
    if problem.kind == "math":
        from reasonrl.api import math_reward

        return bool(answer) and math_reward(f"\\boxed{{{answer}}}", problem.reference) >= 1.0
    raise ValueError("code answers are judged in batches: judge_code")


def judge_code(problem: Problem, programs: list[str]) -> list[bool]:
    """Every program on the problem's tests in the sandboxed judge: passed all?"""
    from reasonrl.api import CodeJudgeError, run_code_tests

    runnable = [(i, p) for i, p in enumerate(programs) if p.strip()]
    results = [False] * len(programs)
    if runnable:
        try:
            matrix = run_code_tests([p for _, p in runnable], problem.tests)
        except CodeJudgeError as error:  # an infrastructure failure is no wrong answer: stop, named
            raise RuntimeError(f"problem {problem.id}: {error}") from error
        for (i, _), passed in zip(runnable, matrix):
            results[i] = bool(passed) and all(passed)
    return results
