"""The bench's multi-test workload (issue 24) and its comparison with verl's prime_code: the
per-test verdicts agree except where the judge is stricter by design (exit 1 after correct output)."""

from __future__ import annotations

from benchmarks.rewards import multitest_bench


def test_the_workload_has_ten_tests_per_program_and_reference_outputs():
    items = multitest_bench.workload(problems_per_task=1, seed=3)
    assert len(items) == len(multitest_bench.TASKS) * len(multitest_bench.KINDS)
    assert all(len(item["inputs"]) == len(item["outputs"]) == multitest_bench.TESTS_PER_PROBLEM for item in items)
    summing = next(item for item in items if item["problem_id"] == "sum-0")
    for stdin, expected in zip(summing["inputs"], summing["outputs"]):
        assert int(expected) == sum(map(int, stdin.split()))


def test_judge_and_prime_code_agree_per_test_except_exit_after_output():
    items = [item for item in multitest_bench.workload(problems_per_task=1) if item["problem_id"] == "sum-0"]
    _, prime = multitest_bench.run_prime_code(items, workers=2)
    _, judge = multitest_bench.run_judge(items, workers=2)
    table = multitest_bench.compare(items, judge, prime)
    tests = multitest_bench.TESTS_PER_PROBLEM
    assert table["correct"] == table["wrong"] == table["crash"] == {"agree": tests}
    assert table["exit_after_output"] == {"judge runtime_error / prime_code passed": tests}
    by_kind = {item["kind"]: verdicts for item, verdicts in zip(items, judge)}
    assert set(by_kind["wrong"]) == {"wrong_answer"} and set(by_kind["crash"]) == {"runtime_error"}
