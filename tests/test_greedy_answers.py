"""``greedy_answers`` hands its scorer to the answering process by name: a function that name
would not bring back is refused before any engine starts."""

from __future__ import annotations

import pytest

from reasonrl.greedy_answers import _importable_name, greedy_answers


def test_a_module_level_scorer_is_passed_by_its_importable_name():
    from reasonrl.api import math_reward

    assert _importable_name(math_reward) == "reasonrl.plugins.rewards.math_reward:math_reward"


def test_a_scorer_the_answering_process_could_not_import_is_refused_before_any_engine(tmp_path):
    def nested(answer: str, truth: str) -> float:
        return 0.0

    for scorer in (lambda answer, truth: 0.0, nested):
        with pytest.raises(ValueError, match="module-level function importable by its name"):
            greedy_answers({"m": tmp_path / "no-model"}, {"val": str(tmp_path / "no.parquet")}, 1, 1, scorer)
