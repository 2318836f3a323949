"""Benchmark formats, answer extraction and the metrics, on hand-made rows."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import pytest

from reasonrl.plugins.evaluation.eval_sets import TEMPLATES, BenchmarkError, load
from reasonrl.plugins.evaluation.metrics import majority, summarize
from reasonrl.plugins.evaluation.scoring import correct, final_answer, judge_code


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_each_format_reads_and_bad_rows_are_named(tmp_path):
    name, (aime,) = load(write(tmp_path / "aime.jsonl", [{"problem": "Find x.", "answer": 204}]))
    assert name == "aime" and aime.kind == "math" and aime.reference == "204"
    _, (gpqa,) = load(write(tmp_path / "gpqa.jsonl", [{"question": "Q?", "choices": ["a", "b", "c"], "answer": 2}]))
    assert gpqa.kind == "choice" and gpqa.reference == "C"
    assert gpqa.prompt(TEMPLATES["choice"]).startswith("Q?\n(A) a\n(B) b\n(C) c\nPlease reason")
    tests = {"inputs": ["1"], "outputs": ["2"]}
    _, (lcb,) = load(write(tmp_path / "lcb.jsonl", [{"question": "double it", "tests": json.dumps(tests)}]))
    assert lcb.kind == "code" and lcb.tests == tests
    _, (named,) = load(write(tmp_path / "plain.jsonl", [{"question": "q", "answer": "1"}]) + ":math")
    assert named.kind == "math"
    with pytest.raises(BenchmarkError, match=r"bad.jsonl:2: no 'answer'"):
        load(write(tmp_path / "bad.jsonl", [{"problem": "a", "answer": 1}, {"problem": "b"}]))
    with pytest.raises(BenchmarkError, match="answer 'E' is not one of the 2 choices"):
        load(write(tmp_path / "mc.jsonl", [{"question": "q", "choices": ["x", "y"], "answer": "E"}]))
    with pytest.raises(BenchmarkError, match="no such file"):
        load(str(tmp_path / "missing.jsonl"))


def test_answers_are_read_after_the_thinking(tmp_path):
    _, (math,) = load(write(tmp_path / "m.jsonl", [{"problem": "p", "answer": "\\frac{1}{2}"}]))
    assert final_answer(math, "<think>maybe \\boxed{3}</think> so \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"
    assert final_answer(math, "<think>\\boxed{9}</think>it is 0.5") == "0.5"
    assert correct(math, "0.5") and correct(math, "\\frac{2}{4}") and not correct(math, "") and not correct(math, "3")
    _, (mc,) = load(write(tmp_path / "c.jsonl", [{"question": "q", "choices": list("wxyz"), "answer": "B"}]))
    assert final_answer(mc, "I pick \\boxed{(B)}") == "B" and final_answer(mc, "A or ... B") == "B"
    assert final_answer(mc, "<think>A</think>none") == "" and correct(mc, "B") and not correct(mc, "A")
    assert final_answer(mc, "\\boxed{y}") == "C" and final_answer(mc, "z") == "D", "the option's text for its letter"
    _, (code,) = load(write(tmp_path / "k.jsonl", [{"question": "q", "tests": {"inputs": ["3"], "outputs": ["6"]}}]))
    programs = [
        final_answer(code, t) for t in ("```python\nprint(int(input())*2)\n```", "```\nprint(7)\n```", "no code")
    ]
    assert programs[2] == "" and judge_code(code, programs) == [True, False, False]


def _independent(samples: list[list[bool]], votes: list[bool]) -> dict:
    n = len(samples[0])
    out = {"avg": sum(sum(s) for s in samples) / (n * len(samples)), "cons": sum(votes) / len(votes)}
    for k in (1, 2, 4, n):
        per = [
            sum(any(c) for c in itertools.combinations(s, k)) / len(list(itertools.combinations(s, k))) for s in samples
        ]
        out[k] = sum(per) / len(per)
    return out


def test_the_metrics_equal_an_independent_count():
    samples = [
        [True] * 6,
        [False] * 6,
        [True, False, False, True, False, False],
        [False, False, False, False, False, True],
    ]
    votes = [True, False, False, True]
    got = summarize(list(zip(samples, votes)))
    want = _independent(samples, votes)
    assert got["problems"] == 4 and got["n"] == 6
    assert got["avg@6"] == pytest.approx(want["avg"]) and got["cons@6"] == pytest.approx(want["cons"])
    for k in (1, 2, 4, 6):
        assert got[f"pass@{k}"] == pytest.approx(want[k], abs=1e-12)
    assert "cons@6" not in summarize([(s, None) for s in samples]), "no vote: no cons (code)"


def test_majority_ignores_empty_answers_and_breaks_ties_by_first_given():
    assert majority(["", "3", "4", "4", "", ""]) == "4"
    assert majority(["5", "3", "3", "5"]) == "5" and majority(["", ""]) == ""
    assert Counter(["5", "3", "3", "5"]).most_common(1)[0][0] == "5"  # same rule as Counter's (insertion order)


def test_the_recipes_validation_sampling_is_what_eval_uses():
    from reasonrl.plugins.evaluation.cli import recipe_sampling

    # MiMo §3.5.1's generation length (32,768), not the RL recipe's response budget (30,720)
    assert recipe_sampling("mimo") == {"n": 8, "temperature": 0.6, "top_p": 0.95, "max_tokens": 32768}
    assert recipe_sampling("mimo_0530") == {**recipe_sampling("mimo"), "max_tokens": 47104}  # §3.6: 48K
    assert recipe_sampling("longcat")["n"] == 32 and recipe_sampling("longcat")["temperature"] == 1.0


def test_each_report_evaluates_its_benchmarks_with_its_own_samples():
    from reasonrl.plugins.evaluation.cli import report_settings, samples_per_benchmark
    from reasonrl.plugins.evaluation.generate import Sampling
    from reasonrl.plugins.evaluation.run import samples_for

    base = Sampling(n=8)
    longcat = samples_per_benchmark("longcat")
    names = ("aime_2024", "HMMT-feb25", "MATH-500", "BeyondAIME", "gpqa_diamond", "livecodebench_v6", "mine")
    got = {name: samples_for(name, base, longcat).n for name in names}
    assert got == {"aime_2024": 32, "HMMT-feb25": 32, "MATH-500": 1, "BeyondAIME": 10, "gpqa_diamond": 16,
                   "livecodebench_v6": 4, "mine": 8}  # fmt: skip
    assert samples_for("aime24", base, samples_per_benchmark("mimo")).n == 32
    assert samples_per_benchmark(None) == {} and samples_per_benchmark("kimi_k15") == {}
    for report, settings in report_settings().items():
        for key, entry in settings.items():
            if key == "recipe":
                continue
            assert entry["basis"] in ("report", "reading", "assumption"), (report, key)
            assert entry["basis"] == "assumption" or "§" in entry["source"], (report, key)
