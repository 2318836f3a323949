"""The long-CoT toy's answers (what the long2short comparison shortens) and the comparison table."""

from __future__ import annotations

import json

import pytest

from benchmarks.long2short.compare import write_table
from benchmarks.long2short.toy import LEVELS, long_cot_answer, reasoning
from reasonrl.api import math_reward
from reasonrl.smoke.arithmetic import Problem
from reasonrl.smoke.tokenizer import CHARACTERS


@pytest.mark.parametrize(
    "problem, level, expected",
    [
        (Problem(12, 34), 1, "<think>12+34</think>46"),
        (Problem(12, 34), 2, "<think>2+4=6 1+3+0=4</think>46"),
        (Problem(58, 7), 2, "<think>8+7=15 5+0+1=6</think>65"),
        (Problem(99, 1), 3, "<think>9+1=10 9+0+1=10 so 99+1=100</think>100"),
    ],
)
def test_long_cot_answers_reason_digit_by_digit(problem, level, expected):
    assert long_cot_answer(problem, level) == expected


def test_every_level_is_graded_right_spells_in_the_vocabulary_and_fits_the_model():
    for problem in (Problem(a, b) for a in range(0, 100, 7) for b in range(0, 100, 11)):
        lengths = []
        for level in LEVELS:
            answer = long_cot_answer(problem, level)
            assert math_reward(answer, problem.answer) == 1.0
            assert set(answer) - {"<", ">", "/"} <= set(CHARACTERS)
            lengths.append(len(answer))
        assert lengths == sorted(lengths) and lengths[0] < lengths[-1]
        # one token per character: prompt + longest answer + EOS within the smoke model's 64 positions
        assert len(problem.prompt) + lengths[-1] + 1 <= 64
    with pytest.raises(ValueError, match="level 4"):
        reasoning(Problem(1, 2), 4)


def test_the_comparison_table_lists_length_and_reward_per_method(tmp_path):
    table = {"long-CoT (start)": {"reward": 0.5, "mean_length": 35.25, "questions": 8},
             "DPO": {"reward": 0.625, "mean_length": 20.0, "questions": 8}}  # fmt: skip
    write_table(table, tmp_path)
    assert json.loads((tmp_path / "comparison.json").read_text()) == table
    assert (tmp_path / "comparison.md").read_text().splitlines()[2:] == [
        "| long-CoT (start) | 35.2 | 0.500 |",
        "| DPO | 20.0 | 0.625 |",
    ]
    assert (tmp_path / "comparison.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
