"""The judge's verdicts on ordinary programs: per test, both test kinds, both languages."""

from __future__ import annotations

import asyncio

import pytest

from reasonrl.plugins.rewards.judge import (
    JudgeLimits,
    LocalJudge,
    Problem,
    Submission,
    TestCase,
    Verdict,
    outputs_match,
    parse_tests,
)

STDIO = Problem("sum", parse_tests({"inputs": ["1 2\n", "5 5\n", "2 2\n"], "outputs": ["3\n", "10\n", "4\n"]}))
ASSERTS = Problem("inc", parse_tests(["assert inc(1) == 2", "assert inc(-1) == 0", "assert inc(10) == 12"]))


@pytest.fixture(scope="module")
def judge():
    with LocalJudge(JudgeLimits(time_s=1.0, float_tolerance=1e-6), workers=2) as judge:
        yield judge


def test_stdio_verdicts_per_test(judge):
    wrong_on_second = "a, b = map(int, input().split())\nprint(a + b if a != 5 else 0)\n"
    crash_on_third = "a, b = map(int, input().split())\nassert a != 2\nprint(a + b)\n"
    results = judge.judge_sync(
        [Submission(STDIO, wrong_on_second, solution_id="w"), Submission(STDIO, crash_on_third, solution_id="c")]
    )
    assert [r.solution_id for r in results] == ["w", "c"]
    assert results[0].verdicts == [Verdict.PASSED, Verdict.WRONG_ANSWER, Verdict.PASSED]
    assert results[1].verdicts == [Verdict.PASSED, Verdict.PASSED, Verdict.RUNTIME_ERROR]


def test_assertion_tests_run_one_by_one(judge):
    result = judge.judge_one(Submission(ASSERTS, "def inc(x):\n    return x + 1\n"))
    assert result.verdicts == [Verdict.PASSED, Verdict.PASSED, Verdict.WRONG_ANSWER]
    crash = judge.judge_one(Submission(ASSERTS, "def inc(x):\n    return 10 // (x + 1) * 0 + x + 1\n"))
    assert crash.verdicts == [Verdict.PASSED, Verdict.RUNTIME_ERROR, Verdict.WRONG_ANSWER]
    # an early exit skips the assertions: not a pass
    assert judge.judge_one(Submission(ASSERTS, "import sys\nsys.exit(0)\n")).verdicts == [Verdict.RUNTIME_ERROR] * 3


def test_compile_errors_and_time_limit(judge):
    assert judge.judge_one(Submission(STDIO, "def broken(:\n")).verdicts == [Verdict.COMPILE_ERROR] * 3
    assert judge.judge_one(Submission(STDIO, "int main( {", "cpp")).verdicts == [Verdict.COMPILE_ERROR] * 3
    slow = "a, b = map(int, input().split())\nif a == 5:\n    while True:\n        pass\nprint(a + b)\n"
    assert judge.judge_one(Submission(STDIO, slow)).verdicts == [Verdict.PASSED, Verdict.TIME_LIMIT, Verdict.PASSED]


def test_cpp_is_compiled_once_and_run_per_test(judge):
    code = (
        '#include <cstdio>\nint main(){ long a, b; scanf("%ld %ld", &a, &b); printf("%ld\\n", a == 2 ? 0 : a + b); }\n'
    )
    result = judge.judge_one(Submission(STDIO, code, "cpp"))
    assert result.verdicts == [Verdict.PASSED, Verdict.PASSED, Verdict.WRONG_ANSWER]
    assert len(STDIO.tests) == 3 and result.compilations == 1  # the runner's count of g++ runs


def test_float_tolerance_and_whitespace(judge):
    problem = Problem("third", (TestCase(stdin="1\n", expected_stdout="0.333333333\n"),))
    assert judge.judge_one(Submission(problem, "print(1/3, end='  \\n\\n')")).verdicts == [Verdict.PASSED]
    assert judge.judge_one(Submission(problem, "print(0.3334)")).verdicts == [Verdict.WRONG_ANSWER]


def test_invalid_test_is_a_judge_error(judge):
    problem = Problem("bad", (TestCase(assertion="assert (("),))
    result = judge.judge_one(Submission(problem, "x = 1\n"))
    assert result.verdicts == [Verdict.JUDGE_ERROR] and result.judge_error


def test_async_api_runs_submissions_concurrently(judge):
    sleeper = "import time\ntime.sleep(0.4)\nprint(3)\n"
    problem = Problem("p", (TestCase(stdin="", expected_stdout="3"),))
    seen = []

    async def main():
        return await judge.judge(
            [Submission(problem, sleeper, solution_id=str(i)) for i in range(4)], on_result=seen.append
        )

    import time

    start = time.monotonic()
    results = asyncio.run(main())
    elapsed = time.monotonic() - start
    assert [r.verdicts for r in results] == [[Verdict.PASSED]] * 4 and len(seen) == 4
    assert elapsed < 1.4, f"4 × 0.4 s sleeps on 2 runners took {elapsed:.2f} s: not parallel"


@pytest.mark.parametrize(
    ("actual", "expected", "tolerance", "match"),
    [
        ("1 2\n3", "1 2 3", None, True),
        ("1  2", "1 2 3", None, False),
        ("1.0000001", "1", 1e-6, True),
        ("1.1", "1", 1e-6, False),
        ("1.0", "1", None, False),
        ("nan", "nan", 1e-6, True),
        ("inf", "1", 1e-6, False),
        ("", "", None, True),
    ],
)
def test_outputs_match(actual, expected, tolerance, match):
    assert outputs_match(actual, expected, tolerance) is match


def test_parse_tests_accepts_the_dataset_shapes():
    assert parse_tests('{"inputs": ["1"], "outputs": ["2"]}') == (TestCase(stdin="1", expected_stdout="2"),)
    assert parse_tests({"inputs": [["1", "2"]], "outputs": [["3"]]}) == (TestCase(stdin="1\n2", expected_stdout="3"),)
    assert parse_tests({"assertions": ["assert f()"]}) == (TestCase(assertion="assert f()"),)
    with pytest.raises(ValueError, match="equal length"):
        parse_tests({"inputs": ["1"], "outputs": []})


def test_runner_files_under_the_hosts_tmp_are_bound_over_the_fresh_tmp(monkeypatch, tmp_path):
    """A checkout or venv under /tmp (CI clones there) must stay visible inside the sandbox."""
    from reasonrl.plugins.rewards.judge import sandbox

    assert str(tmp_path).startswith("/tmp/")
    (tmp_path / "venv" / "lib").mkdir(parents=True)
    monkeypatch.setattr(sandbox, "_needed_trees", lambda: [str(tmp_path), str(tmp_path / "venv" / "lib"), "/usr/lib"])
    command = sandbox.bubblewrap_command(0, 64)
    tmpfs = command.index("/tmp", command.index("--tmpfs", command.index("--size")))
    binds = [command[i + 1] for i in range(tmpfs, len(command) - 1) if command[i] == "--ro-bind"]
    assert binds == [str(tmp_path)]  # after the tmpfs, once: the nested tree is covered by its parent
