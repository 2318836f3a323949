"""``reasonrl judge`` and ``reasonrl difficulty calibrate`` end to end, as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


def reasonrl(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "reasonrl.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def write_jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_judge_then_calibrate(tmp_path):
    problems = write_jsonl(
        tmp_path / "problems.jsonl",
        [
            {
                "problem_id": "sum",
                "tests": {"inputs": ["1 2", "10 20", "100000 200000", "-1 1"], "outputs": ["3", "30", "300000", "0"]},
            },
            {"problem_id": "inc", "tests": {"assertions": ["assert inc(1) == 2", "assert inc(-1) == 0"]}},
        ],
    )
    solutions = write_jsonl(
        tmp_path / "solutions.jsonl",
        [
            {
                "problem_id": "sum",
                "solution_id": "right",
                "language": "python",
                "code": "a, b = map(int, input().split())\nprint(a + b)",
            },
            {
                "problem_id": "sum",
                "solution_id": "small",
                "language": "python",
                "code": "a, b = map(int, input().split())\nprint(a + b if b < 1000 else 0)",
            },
            {
                "problem_id": "sum",
                "solution_id": "positive",
                "language": "cpp",
                "code": '#include <cstdio>\nint main(){long a,b;scanf("%ld %ld",&a,&b);printf("%ld\\n", a < 0 ? 1 : a+b);}',
            },
            {"problem_id": "sum", "solution_id": "first", "language": "python", "code": "print(3)"},
            {"problem_id": "inc", "solution_id": "ok", "code": "def inc(x):\n    return x + 1"},
        ],
    )
    verdicts = tmp_path / "out" / "verdicts.jsonl"
    judged = reasonrl("judge", "--problems", problems, "--solutions", solutions, "--out", verdicts, "--workers", "2")
    assert judged.returncode == 0, judged.stderr
    assert "5/5" in judged.stderr  # the progress bar
    assert "all tests pass" in judged.stdout and "wrong_answer" in judged.stdout
    lines = [json.loads(line) for line in verdicts.read_text().splitlines()]
    assert [line["solution_id"] for line in lines] == ["right", "small", "positive", "first", "ok"]
    assert lines[1]["verdicts"] == ["passed", "passed", "wrong_answer", "passed"]
    assert lines[2]["verdicts"] == ["passed", "passed", "passed", "wrong_answer"]
    assert lines[3]["verdicts"] == ["passed", "wrong_answer", "wrong_answer", "wrong_answer"]
    assert lines[4]["passed"] == lines[4]["total"] == 2

    calibration = tmp_path / "calib.jsonl"
    calibrated = reasonrl("difficulty", "calibrate", "--verdicts", verdicts, "--out", calibration, "--levels", "3")
    assert calibrated.returncode == 0, calibrated.stderr
    by_problem = {r["problem_id"]: r["difficulty"] for r in map(json.loads, calibration.read_text().splitlines())}
    # sum: pass rates 1.0, 0.75, 0.5, 0.5 → three levels, the tied tests together
    assert by_problem["sum"]["pass_rates"] == [1.0, 0.75, 0.5, 0.5]
    assert by_problem["sum"]["levels"] == [0, 1, 2, 2]
    assert by_problem["inc"]["levels"] == [0, 0] and by_problem["inc"]["level_scores"] == [1.0]
    plots = sorted(p.name for p in calibration.with_suffix(".plots").iterdir())
    assert plots == ["inc.png", "sum.png"]


def test_judge_refuses_a_solution_for_an_unknown_problem(tmp_path):
    problems = write_jsonl(tmp_path / "p.jsonl", [{"problem_id": "a", "tests": {"assertions": ["assert True"]}}])
    solutions = write_jsonl(tmp_path / "s.jsonl", [{"problem_id": "b", "code": "pass"}])
    result = reasonrl("judge", "--problems", problems, "--solutions", solutions, "--out", tmp_path / "v.jsonl")
    assert result.returncode == 2 and "unknown problem 'b'" in result.stderr


def test_bench_judge_agrees_with_human_evals_harness():
    """``reasonrl bench judge`` runs both judges on the 164 HumanEval canonical solutions; it exits 1
    unless both pass all 164. The throughput is printed, not asserted (benchmarks, not tests). The
    multi-test workload against verl's prime_code is left out here (test_multitest_bench.py)."""
    result = reasonrl("bench", "judge", "--multitest-problems", "0")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert "passed 164/164" in lines[1] and "passed 164/164" in lines[2]
    # the printed ratio is the two judges' throughputs divided (harness time / judge time)
    rates = [float(line.split("programs/s")[0].split()[-1]) for line in lines[1:3]]
    assert lines[-1].startswith("ratio: ") and float(lines[-1].split()[1]) == pytest.approx(
        rates[1] / rates[0], rel=0.02
    )
