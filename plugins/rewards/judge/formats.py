"""What the judge reads and returns: problems, solutions, verdicts (``docs/judge.md``).

Test kinds (MiMo §3.3.1 / Kimi / LongCat sandboxes):
- stdin/stdout: ``{"inputs": [...], "outputs": [...]}`` as in APPS / TACO / CodeContests and
  verl's code scorers (also accepted as a JSON string, e.g. APPS' ``input_output`` column);
- assertion snippets: ``{"assertions": ["assert f(1) == 2", ...]}`` (MBPP / HumanEval style),
  each one test, run after the solution in the same namespace.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from enum import Enum


class Verdict(str, Enum):
    PASSED = "passed"
    WRONG_ANSWER = "wrong_answer"
    RUNTIME_ERROR = "runtime_error"
    TIME_LIMIT = "time_limit"
    MEMORY_LIMIT = "memory_limit"
    COMPILE_ERROR = "compile_error"
    JUDGE_ERROR = "judge_error"  # the infrastructure failed, not the program


LANGUAGES = ("python", "cpp")


@dataclass(frozen=True)
class TestCase:
    __test__ = False  # not a pytest class

    stdin: str | None = None
    expected_stdout: str | None = None
    assertion: str | None = None


@dataclass(frozen=True)
class Problem:
    problem_id: str
    tests: tuple[TestCase, ...]
    #: optional code run before each assertion test (imports, helpers), trusted like the tests
    setup: str = ""

    def test_code(self, test: TestCase) -> str:
        """What runs after the solution for an assertion test: the setup, then the assertion."""
        return "\n".join(part for part in (self.setup, test.assertion) if part)


@dataclass(frozen=True)
class Submission:
    problem: Problem
    code: str
    language: str = "python"
    solution_id: str = ""

    def __post_init__(self):
        if self.language not in LANGUAGES:
            raise ValueError(f"language {self.language!r} is not supported; use one of {LANGUAGES}")


@dataclass
class JudgeResult:
    problem_id: str
    solution_id: str
    language: str
    verdicts: list[Verdict]
    times_s: list[float] = field(default_factory=list)
    message: str = ""  # compile error text, or what went wrong for judge_error
    compilations: int = 0  # compiler runs for this solution (C++: one, whatever the number of tests)

    @property
    def passed(self) -> list[bool]:
        return [v is Verdict.PASSED for v in self.verdicts]

    @property
    def judge_error(self) -> bool:
        return any(v is Verdict.JUDGE_ERROR for v in self.verdicts)

    def to_json(self) -> dict:
        record = asdict(self)
        record["verdicts"] = [v.value for v in self.verdicts]
        record["passed"], record["total"] = sum(self.passed), len(self.verdicts)
        return record

    @classmethod
    def from_json(cls, record: dict) -> "JudgeResult":
        return cls(
            record["problem_id"],
            record.get("solution_id", ""),
            record.get("language", "python"),
            [Verdict(v) for v in record["verdicts"]],
            list(record.get("times_s", [])),
            record.get("message", ""),
        )


def parse_tests(tests) -> tuple[TestCase, ...]:
    """Tests in any accepted shape (dict, JSON string, list of assertions) → TestCase tuple."""
    if isinstance(tests, str):
        tests = json.loads(tests)
    if isinstance(tests, list):
        tests = {"assertions": tests}
    if not isinstance(tests, dict):
        raise ValueError(f"tests must be a dict, a list of assertions or a JSON string, got {type(tests).__name__}")
    if "assertions" in tests:
        return tuple(TestCase(assertion=str(a)) for a in tests["assertions"])
    if "fn_name" in tests:
        raise ValueError("call-based APPS/TACO tests (fn_name) are not supported; convert them to assertions")
    inputs, outputs = tests.get("inputs"), tests.get("outputs")
    if inputs is None or outputs is None or len(inputs) != len(outputs):
        raise ValueError("stdin/stdout tests need 'inputs' and 'outputs' lists of equal length")
    return tuple(TestCase(stdin=_as_text(i), expected_stdout=_as_text(o)) for i, o in zip(inputs, outputs))


def _as_text(value) -> str:
    return "\n".join(map(str, value)) if isinstance(value, list) else str(value)


def problem_from_json(record: dict) -> Problem:
    tests = record.get("tests", record.get("input_output"))
    return Problem(str(record["problem_id"]), parse_tests(tests), record.get("setup", ""))


def outputs_match(actual: str, expected: str, float_tolerance: float | None = None) -> bool:
    """Whitespace-tolerant comparison: equal token sequences (any run of whitespace, including
    line breaks and trailing blanks, separates tokens). With ``float_tolerance``, tokens that
    both parse as numbers match when |a − e| ≤ tol · max(1, |e|)."""
    actual_tokens, expected_tokens = actual.split(), expected.split()
    if len(actual_tokens) != len(expected_tokens):
        return False
    for got, want in zip(actual_tokens, expected_tokens):
        if got == want:
            continue
        if float_tolerance is None:
            return False
        try:
            got_value, want_value = float(got), float(want)
        except ValueError:
            return False
        if not (math.isfinite(got_value) and math.isfinite(want_value)):
            return False
        if abs(got_value - want_value) > float_tolerance * max(1.0, abs(want_value)):
            return False
    return True
