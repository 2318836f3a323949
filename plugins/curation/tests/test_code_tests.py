"""Code tests checked by reference solutions in the sandboxed judge (Kimi k1.5's rule)."""

from __future__ import annotations

from reasonrl.plugins.curation.code_tests import CodeTests
from reasonrl.plugins.curation.stage import Drop

ADD = "a, b = map(int, input().split())\nprint(a + b)"
ADD_TOO = "print(sum(int(x) for x in input().split()))"
ADD_BUGGY = "a, b = map(int, input().split())\nprint(a + b if a < 100 else 0)"  # wrong on large inputs


def test_a_wrong_test_is_removed_and_the_rest_kept_with_the_references_verdicts():
    tests = {"inputs": ["1 2", "10 5", "7 7", "100 1"], "outputs": ["3", "15", "15", "101"]}  # "7 7" -> 15 is wrong
    stage = CodeTests(test_pass_fraction=0.6, problem_pass_fraction=0.6)
    out = stage.process(
        {"id": "p", "question": "add", "answer": "", "tests": tests, "solutions": [ADD, ADD_TOO, ADD_BUGGY]}
    )
    assert out["tests"] == {"inputs": ["1 2", "10 5", "100 1"], "outputs": ["3", "15", "101"]}
    assert out["solution_test_verdicts"] == [[True, True, True], [True, True, True], [True, True, False]]
    assert stage.counters() == {"tests_removed_from_kept_problems": 1}


def test_a_problem_is_dropped_when_its_references_fail_its_tests():
    wrong = {"inputs": ["1 2", "2 2"], "outputs": ["2", "0"]}  # tests of another problem (a * b - ...)
    stage = CodeTests()
    out = stage.process({"id": "q", "question": "add", "answer": "", "tests": wrong, "solutions": [ADD, ADD_TOO]})
    assert isinstance(out, Drop) and out.reason == "tests_rejected"
    strict = CodeTests(test_pass_fraction=0.6, problem_pass_fraction=0.9)  # Kimi's 9 of 10: 2 of 3 is not enough
    tests = {"inputs": ["1 2", "100 1"], "outputs": ["3", "101"]}
    out = strict.process(
        {"id": "r", "question": "add", "answer": "", "tests": tests, "solutions": [ADD, ADD_TOO, ADD_BUGGY]}
    )
    assert out == Drop("references_fail", "2 of 3 references pass the kept tests")


def test_rows_without_tests_pass_through():
    row = {"id": "m", "question": "2+2?", "answer": "4"}
    assert CodeTests().process(row) is row


def test_a_judge_failure_stops_the_stage_naming_the_row_never_a_drop(monkeypatch):
    """The sandbox failing is not the tests failing: a dropped row would be lost for a wrong reason.
    (The failure is injected: a runner crash cannot be provoked through input/output tests.)"""
    import pytest

    import reasonrl.api
    from reasonrl.plugins.curation.stage import CurationError

    def judge_fails(*_args, **_kwargs):
        raise reasonrl.api.CodeJudgeError("the judge failed on program(s) [0]: runner died")

    monkeypatch.setattr(reasonrl.api, "run_code_tests", judge_fails)
    row = {
        "id": "s",
        "question": "add",
        "answer": "",
        "tests": {"inputs": ["1 2"], "outputs": ["3"]},
        "solutions": [ADD],
    }
    with pytest.raises(CurationError, match="row s: the judge failed"):
        CodeTests().process(row)
