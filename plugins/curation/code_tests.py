"""Code problems keep only tests their reference solutions pass (Kimi k1.5 §2.3, test case
generation for coding): every reference solution runs on every test in the sandboxed judge; a
test is kept when at least ``test_pass_fraction`` of the solutions pass it (Kimi: 7 of 10), and the
problem is kept when at least ``problem_pass_fraction`` of the solutions pass all kept tests (Kimi:
9 of 10) and ``min_tests`` remain. A generated test with a wrong expected output is so removed;
a problem whose tests its own solutions fail is dropped.

The kept row's ``tests`` are the kept tests, and ``solution_test_verdicts`` (solutions × kept
tests) is what MiMo's test-difficulty calibration reads (``reasonrl.api.calibrate_difficulty``).
"""

from __future__ import annotations

import json

from reasonrl.plugins.curation.stage import CurationError, Drop, Row, Stage


class CodeTests(Stage):
    name = "code_tests"

    def __init__(
        self,
        test_pass_fraction: float = 0.7,
        problem_pass_fraction: float = 0.9,
        min_tests: int = 1,
        time_s: float = 2.0,
        language: str = "python",
    ):
        self.test_pass_fraction, self.problem_pass_fraction = test_pass_fraction, problem_pass_fraction
        self.min_tests, self.time_s, self.language = min_tests, time_s, language
        self.tests_removed = 0  # from rows that are kept (the data card's count)

    def settings(self) -> dict:
        return {
            "test_pass_fraction": self.test_pass_fraction,
            "problem_pass_fraction": self.problem_pass_fraction,
            "min_tests": self.min_tests,
            "time_s": self.time_s,
            "language": self.language,
        }

    def process(self, row: Row) -> Row | Drop:
        from reasonrl.api import CodeJudgeError, run_code_tests

        tests, solutions = row.get("tests"), row.get("solutions")
        if not tests:
            return row  # not a code problem: nothing to check here
        tests = json.loads(tests) if isinstance(tests, str) else dict(tests)
        if not solutions:
            raise CurationError(f"row {row['id']}: a code problem needs reference `solutions` to check its tests")
        inputs, outputs = list(tests["inputs"]), list(tests["outputs"])
        try:
            passed = run_code_tests(list(solutions), {"inputs": inputs, "outputs": outputs}, self.language, self.time_s)
        except CodeJudgeError as error:  # the sandbox failed, not the tests: stop, never drop the row
            raise CurationError(f"row {row['id']}: {error}") from error
        keep = [t for t in range(len(inputs)) if sum(p[t] for p in passed) >= self.test_pass_fraction * len(passed)]
        if len(keep) < self.min_tests:
            return Drop("tests_rejected", f"{len(inputs) - len(keep)} of {len(inputs)} tests failed by the references")
        verdicts = [[p[t] for t in keep] for p in passed]
        passing = sum(all(v) for v in verdicts)
        if passing < self.problem_pass_fraction * len(passed):
            return Drop("references_fail", f"{passing} of {len(passed)} references pass the kept tests")
        kept = {"inputs": [inputs[t] for t in keep], "outputs": [outputs[t] for t in keep]}
        self.tests_removed += len(inputs) - len(keep)
        return {**row, "tests": kept, "solution_test_verdicts": verdicts}

    def counters(self) -> dict:
        return {"tests_removed_from_kept_problems": self.tests_removed}
