"""The judge's verdicts on ordinary programs: per test, both test kinds, both languages."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

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


#: folders (mode) and files (text) or links ("->target") under each test root: three untraversable
#: levels above the trees, and one tree that is untraversable itself
LAYOUT = {
    "a": 0o700,
    "a/secret.txt": "secret",
    "a/b": 0o755,
    "a/b/c": 0o700,
    "a/b/c/other.txt": "secret",
    "a/b/c/tree": 0o700,
    "a/b/c/tree/file.txt": "file",
    "a/b/c/tree/sub": 0o755,
    "a/b/c/tree/sub/x.txt": "x",
    "a/b/c/tree/link": "->file.txt",
    "a/b/c/open": 0o755,
    "a/b/c/open/y.txt": "y",
    "a/b/c/open/deep": 0o700,  # inside a bound tree, above another tree
    "a/b/c/open/deep/hidden.txt": "secret",
    "a/b/c/open/deep/inner": 0o755,
    "a/b/c/open/deep/inner/z.txt": "z",
}


def _make_layout(root: Path) -> None:
    for name, entry in LAYOUT.items():
        path = root / name
        if isinstance(entry, int):
            path.mkdir()
        elif entry.startswith("->"):
            path.symlink_to(entry[2:])
        else:
            path.write_text(entry)
    for name, entry in sorted(LAYOUT.items(), reverse=True):  # children first
        if isinstance(entry, int):
            (root / name).chmod(entry)


def _as_runner(plan: list[str], script: str) -> subprocess.CompletedProcess:
    """``script`` in a sandbox with ``plan``'s mounts, as the runner's user (uid 60000 when root)."""
    command = ["bwrap", "--unshare-pid", "--unshare-net", "--die-with-parent", "--ro-bind", "/", "/"]
    command += [
        "--perms",
        "1777",
        "--size",
        str(16 << 20),
        "--tmpfs",
        "/tmp",
        *plan,
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    if os.geteuid() != 0:
        command[1:1] = ["--unshare-user"]
    else:
        command += ["/usr/bin/setpriv", "--reuid", "60000", "--regid", "60000", "--clear-groups", "--no-new-privs"]
    return subprocess.run([*command, "/bin/sh", "-c", script], capture_output=True, text=True, timeout=60)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")
def test_the_runner_reaches_its_trees_through_untraversable_folders_at_any_depth(tmp_path):
    """Issue 42: a checkout or venv under a ``mktemp -d`` folder (0700) in /tmp, or under several
    0700 folders elsewhere (``/root/...``), as root: each needed tree is readable by the runner's
    uid at its own path, read-only, and nothing else of those folders is visible."""
    from reasonrl.plugins.rewards.judge import sandbox

    outside = Path(tempfile.mkdtemp(prefix="reasonrl-judge-", dir="/var/tmp")).resolve()  # 0700, not under /tmp
    try:
        for root in (tmp_path, outside):
            _make_layout(root)
        trees = [str(root / "a/b/c" / name) for root in (tmp_path, outside) for name in ("tree", "open")]
        inner = [str(root / "a/b/c/open/deep/inner") for root in (tmp_path, outside)]
        plan = sandbox.mount_plan(trees + inner, as_root=os.geteuid() == 0)
        reads = " ".join(
            f"{t}/file.txt {t}/sub/x.txt {t}/link" if t.endswith("tree") else f"{t}/y.txt {t}/deep/inner/z.txt"
            for t in trees
        )
        hidden = [
            str(root / "a" / name)
            for root in (tmp_path, outside)
            for name in ("secret.txt", "b/c/other.txt", "b/c/open/deep/hidden.txt")
        ]
        script = f"cat {reads} && for f in {' '.join(hidden)}; do test ! -e $f || echo LEAK $f; done"
        script += f"; for d in {trees[0]} {trees[1]} {outside}/a; do touch $d/new 2>/dev/null && echo WRITABLE $d; done"
        result = _as_runner(plan, script)
        assert result.stdout == "filexfileyz" * 2, result.stdout + result.stderr
    finally:
        shutil.rmtree(outside, ignore_errors=True)


def test_run_code_tests_facade_gives_the_programs_by_tests_matrix():
    from reasonrl.api import run_code_tests

    tests = {"inputs": ["2", "5"], "outputs": ["4", "10"]}
    programs = ["print(int(input()) * 2)", "print(int(input()) + 2)", "raise SystemExit(1)"]
    assert run_code_tests(programs, tests) == [[True, True], [True, False], [False, False]]
    assert run_code_tests(["def f(x):\n    return x + 1"], ["assert f(1) == 2", "assert f(2) == 2"]) == [[True, False]]


def test_run_code_tests_raises_when_the_judge_fails_never_a_failed_test():
    """A judge_error (here a test the judge cannot run) is not the program's failure: curation would
    otherwise count a test as failed by its reference solutions and drop it."""
    from reasonrl.plugins.rewards.facades import CodeJudgeError, run_code_tests

    with pytest.raises(CodeJudgeError, match=r"program\(s\) \[0\]"):
        run_code_tests(["x = 1"], ["assert ((", "assert x == 1"])
