"""``reasonrl eval run`` on small benchmark files of each format made here from the smoke task
(math, multiple choice, code with tests), the smoke model served by ``vllm serve`` (vLLM's CPU
build) from ``--model``: the reported avg@n / pass@k / cons@n equal an independent computation from
the run's own saved generations (math answers re-verified with Math-Verify directly), a rerun
resumes without generating, and ``reasonrl eval compare`` puts two runs side by side."""

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
import sys
from collections import Counter

import pytest

from reasonrl.smoke.arithmetic import Problem
from reasonrl.smoke.prepare import prepare

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

N = 4


def benchmark_files(folder):
    problems = [Problem(a, b) for a, b in ((12, 34), (7, 8), (50, 49), (23, 61), (90, 9), (33, 33))]
    math = [{"problem": p.prompt, "answer": p.answer} for p in problems]
    choice = [{"question": p.prompt, "choices": [str(int(p.answer) + 1), p.answer, "0"], "answer": 1} for p in problems]
    inputs = ["0\n", "5\n"]
    code = [
        {"question": p.code_prompt, "tests": {"inputs": inputs, "outputs": [f"{int(x) + p.b}\n" for x in inputs]}}
        for p in problems
    ]
    for name, rows in (("sums", math), ("sums_choice", choice), ("sums_code", code)):
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return [str(folder / "sums.jsonl"), str(folder / "sums_choice.jsonl"), str(folder / "sums_code.jsonl:code")]


def independent(generations: list[dict], references: dict | None) -> dict:
    from math_verify import parse, verify

    by_problem: dict[str, list[dict]] = {}
    for record in generations:
        by_problem.setdefault(record["problem"], []).append(record)
    if references is not None:  # math: the saved answers re-verified with Math-Verify itself
        for pid, records in by_problem.items():
            for r in records:
                right = bool(r["answer"]) and verify(parse(f"${references[pid]}$"), parse(f"${r['answer']}$"))
                assert right == r["correct"], (pid, r["answer"])
    flags = [[r["correct"] for r in sorted(rs, key=lambda r: r["sample"])] for rs in by_problem.values()]
    out = {f"avg@{N}": sum(map(sum, flags)) / (N * len(flags))}
    for k in (1, 2, 4):
        out[f"pass@{k}"] = sum(
            sum(any(c) for c in itertools.combinations(f, k)) / len(list(itertools.combinations(f, k))) for f in flags
        ) / len(flags)
    votes = []
    for records in by_problem.values():
        counts = Counter(r["answer"] for r in records if r["answer"])
        top = max(counts.values(), default=0)
        chosen = next((r for r in records if r["answer"] and counts[r["answer"]] == top), None)
        votes.append(bool(chosen and chosen["correct"]))
    out[f"cons@{N}"] = sum(votes) / len(votes)
    return out


def test_eval_run_matches_an_independent_computation_and_resumes(tmp_path):
    model = prepare() / "model"
    benches = benchmark_files(tmp_path)
    command = [sys.executable, "-m", "reasonrl.cli.main", "eval", "run", "--model", str(model), "--max-model-len", "64",
               "--n", str(N), "--temperature", "1.0", "--top-p", "1.0", "--max-tokens", "40",
               "--template", "math={question}", "--template", "choice={question}", "--template", "code={question}",
               "--out", str(tmp_path / "run")]  # fmt: skip
    for bench in benches:
        command += ["--bench", bench]
    done = subprocess.run(command, capture_output=True, text=True, timeout=700)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(done.stdout)
    results = json.loads((tmp_path / "run" / "results.json").read_text())["benchmarks"]
    assert set(results) == {"sums", "sums_choice", "sums_code"}
    references = {str(i): row["answer"] for i, row in enumerate(map(json.loads, open(tmp_path / "sums.jsonl")))}
    for bench, refs in (("sums", references), ("sums_choice", None), ("sums_code", None)):
        generations = [json.loads(line) for line in open(tmp_path / "run" / bench / "generations.jsonl")]
        assert len(generations) == 6 * N
        want = independent(generations, refs)
        got = results[bench]
        for metric, value in want.items():
            if bench == "sums_code" and metric.startswith("cons"):
                assert metric not in got
                continue
            assert got[metric] == pytest.approx(value, abs=1e-12), (bench, metric)
    assert all(results[b][f"avg@{N}"] > 0 for b in results), "every format scored some right answers"
    assert (tmp_path / "run" / "results.png").stat().st_size > 0

    again = subprocess.run(command, capture_output=True, text=True, timeout=700)
    assert again.returncode == 0, again.stderr[-3000:]
    assert sum(1 for _ in open(tmp_path / "run" / "sums" / "generations.jsonl")) == 6 * N, (
        "resumed: nothing regenerated"
    )
    shutil.copytree(
        tmp_path / "run", tmp_path / "copy" / "run"
    )  # a second checkpoint's results, as far as compare knows
    compared = subprocess.run(
        [sys.executable, "-m", "reasonrl.cli.main", "eval", "compare", str(tmp_path / "run"), str(tmp_path / "copy" / "run"),
         "--plot", str(tmp_path / "compare.png")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert compared.returncode == 0, compared.stderr[-2000:]
    assert (
        f"| sums | avg@{N} | {results['sums'][f'avg@{N}']:.3f} | {results['sums'][f'avg@{N}']:.3f} |" in compared.stdout
    )
