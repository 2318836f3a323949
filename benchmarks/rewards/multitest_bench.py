"""The multi-test workload of ``reasonrl bench judge`` (issue 24): stdin/stdout problems with 10
tests each and, per problem, a correct, a wrong, a crashing program and one that prints the
right answer and then exits non-zero — judged by this judge and by verl's own code scorer
(``verl.utils.reward_score.prime_code.compute_score(..., continuous=True)``, as verl's reward
function calls it), per-test verdicts compared.

Where they differ by design: the judge calls a run that exits non-zero a runtime error even when
its output was right (the process failed); prime_code, which ``exec``s the program in its own
worker and compares what was printed, passes it. No time-limit programs here: prime_code's
per-test timeout is 10 s, which would make the workload minutes long.
"""

from __future__ import annotations

import json
import random
import time
from concurrent.futures import ThreadPoolExecutor

TESTS_PER_PROBLEM = 10

#: name: (reference solution, an off-by-one-style wrong one, how a test input is made from a Random)
TASKS = {
    "sum": (
        "print(sum(map(int, input().split())))",
        "print(sum(map(int, input().split())) + 1)",
        lambda r: " ".join(str(r.randint(-99, 99)) for _ in range(r.randint(1, 12))),
    ),
    "max": (
        "print(max(map(int, input().split())))",
        "print(min(map(int, input().split())))",
        lambda r: " ".join(str(r.randint(-99, 99)) for _ in range(r.randint(2, 12))),
    ),
    "reverse": (
        "print(input()[::-1])",
        "print(input()[:0:-1])",
        lambda r: "".join(r.choice("abcdefgh") for _ in range(r.randint(2, 20))),
    ),
    "vowels": (
        "s = input()\nprint(sum(c in 'aeiou' for c in s))",
        "s = input()\nprint(sum(c in 'aeio' for c in s) + 1)",
        lambda r: "".join(r.choice("abcdeiou") for _ in range(r.randint(1, 20))),
    ),
    "sort": (
        "print(*sorted(map(int, input().split())))",
        "print(*sorted(map(int, input().split()), reverse=True), 0)",
        lambda r: " ".join(str(r.randint(0, 50)) for _ in range(r.randint(1, 10))),
    ),
    "fib": (
        "n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, a + b\nprint(a)",
        "n = int(input())\na, b = 0, 1\nfor _ in range(n):\n    a, b = b, a + b\nprint(b)",
        lambda r: str(r.randint(0, 60)),
    ),
}
#: program kinds: the reference, a wrong answer, a crash (IndexError), right output then exit 1
KINDS = ("correct", "wrong", "crash", "exit_after_output")
CRASH = "values = input().split()\nprint(values[len(values)])"


def workload(problems_per_task: int = 4, seed: int = 0) -> list[dict]:
    """``[{problem_id, kind, code, inputs, outputs}]``: TESTS_PER_PROBLEM tests per problem."""
    rng = random.Random(seed)
    items = []
    for name, (reference, wrong, make_input) in TASKS.items():
        programs = {
            "correct": reference,
            "wrong": wrong,
            "crash": CRASH,
            "exit_after_output": reference + "\nimport sys\nsys.exit(1)",
        }
        for index in range(problems_per_task):
            inputs = [make_input(rng) + "\n" for _ in range(TESTS_PER_PROBLEM)]
            outputs = [_expected(reference, text) for text in inputs]
            for kind in KINDS:
                items.append(
                    {
                        "problem_id": f"{name}-{index}",
                        "kind": kind,
                        "code": programs[kind],
                        "inputs": inputs,
                        "outputs": outputs,
                    }
                )
    return items


def _expected(reference: str, stdin: str) -> str:
    import contextlib
    import io
    import sys

    out, old_stdin = io.StringIO(), sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out):
            exec(reference, {"__name__": "__main__"})
    finally:
        sys.stdin = old_stdin
    return out.getvalue()


PRIME_VERDICT = {True: "passed", False: "wrong_answer", -1: "runtime_error", -2: "compile_error"}


def prime_code_verdicts(item: dict) -> list[str]:
    """Per-test verdicts of verl's scorer as verl's reward function calls it (``continuous=True``:
    all tests at once; on any failure, each of the first 10 tests alone)."""
    from verl.utils.reward_score import prime_code

    tests = json.dumps({"inputs": item["inputs"], "outputs": item["outputs"]})
    score, metadata = prime_code.compute_score(item["code"], tests, continuous=True)
    if score is True:
        return ["passed"] * len(item["inputs"])
    return [PRIME_VERDICT.get(_first(entry["test_case"]["res"]), "runtime_error") for entry in metadata]


def _first(res: str):
    value = json.loads(res.replace("True", "true").replace("False", "false"))[0]
    return value if not isinstance(value, bool) else bool(value)


def run_prime_code(items: list[dict], workers: int) -> tuple[float, list[list[str]]]:
    import contextlib
    import io

    start = time.perf_counter()
    # its messages silenced once for all threads (redirect_stdout is process-wide: per thread, the
    # threads would restore each other's replacement and leave stdout swallowed)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        with ThreadPoolExecutor(max_workers=workers) as pool:
            verdicts = list(pool.map(prime_code_verdicts, items))
    return time.perf_counter() - start, verdicts


def run_judge(items: list[dict], workers: int | None) -> tuple[float, list[list[str]]]:
    from reasonrl.plugins.rewards.judge import JudgeLimits, LocalJudge, Problem, Submission, TestCase

    submissions = [
        Submission(
            Problem(
                item["problem_id"],
                tuple(TestCase(stdin=i, expected_stdout=o) for i, o in zip(item["inputs"], item["outputs"])),
            ),
            item["code"],
            "python",
            item["kind"],
        )
        for item in items
    ]
    with LocalJudge(JudgeLimits(time_s=5.0), workers=workers) as judge:
        judge.judge_sync(submissions[: judge.workers])  # runners warm
        start = time.perf_counter()
        results = judge.judge_sync(submissions)
        elapsed = time.perf_counter() - start
    return elapsed, [[verdict.value for verdict in result.verdicts] for result in results]


#: the one disagreement the judge makes on purpose: a run that exits non-zero fails, whatever it printed
BY_DESIGN = {"exit_after_output": "judge runtime_error / prime_code passed"}


def only_by_design(table: dict[str, dict[str, int]]) -> bool:
    """Every disagreement in ``compare``'s table is :data:`BY_DESIGN` for its program kind."""
    return all(key == "agree" or key == BY_DESIGN.get(kind) for kind, row in table.items() for key in row)


def compare(items: list[dict], judge_verdicts, prime_verdicts) -> dict[str, dict[str, int]]:
    """Per program kind: tests where both agree, and each (judge, prime_code) disagreement."""
    table: dict[str, dict[str, int]] = {}
    for item, ours, theirs in zip(items, judge_verdicts, prime_verdicts):
        row = table.setdefault(item["kind"], {})
        for a, b in zip(ours, theirs):
            key = "agree" if a == b else f"judge {a} / prime_code {b}"
            row[key] = row.get(key, 0) + 1
    return table
