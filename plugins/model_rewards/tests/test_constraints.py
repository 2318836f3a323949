"""The instruction-following reward on IFEval's own checks: scores, kinds, thinking ignored, and
ids that cannot be checked are refused by name instead of skipped."""

from __future__ import annotations

import pytest

from reasonrl.plugins.model_rewards.constraints import ConstraintError, constraint_reward, unavailable

IDS = ["keywords:existence", "change_case:english_lowercase", "length_constraints:number_words"]
KWARGS = [{"keywords": ["river"]}, {}, {"num_words": 15, "relation": "less than"}]


def test_binary_and_partial_scores():
    assert constraint_reward("a calm river runs through the valley and the town.", IDS, KWARGS).score == 1.0
    upper = constraint_reward("A calm river runs through the valley and the town.", IDS, KWARGS)
    assert (upper.score, upper.followed) == (0.0, (True, False, True))
    assert constraint_reward(
        "A calm river runs through the valley and the town.", IDS, KWARGS, kind="partial_strict"
    ).score == pytest.approx(2 / 3)
    long = " ".join(["the river"] * 9)
    assert constraint_reward(long, IDS, KWARGS, kind="partial_strict").followed == (True, True, False)


def test_loose_accepts_a_markdown_wrapper_strict_does_not():
    ids, kwargs = ["startend:end_checker"], [{"end_phrase": "That is all."}]
    wrapped = "Sure:\ndone. That is all.\n```"
    assert constraint_reward(wrapped, ids, kwargs, kind="binary_strict").score == 0.0
    assert constraint_reward(wrapped, ids, kwargs, kind="binary_loose").score == 1.0


def test_the_thinking_is_not_checked():
    response = "<think>I MUST NOT SHOUT</think>a calm river runs through the valley and the town."
    assert constraint_reward(response, IDS, KWARGS).score == 1.0
    assert constraint_reward("<think>only thinking, a river</think>", IDS, KWARGS).followed == (False, False, False)


def test_unknown_and_uncheckable_ids_are_named():
    with pytest.raises(ConstraintError, match="'keywords:exists' is not an IFEval instruction"):
        constraint_reward("x", ["keywords:exists"], [{}])
    with pytest.raises(ConstraintError, match="2 constraint ids with 1 argument dicts"):
        constraint_reward("x", IDS[:2], KWARGS[:1])
    # the sentence counter needs NLTK's punkt data, which pip does not install
    assert "length_constraints:number_sentences" in unavailable()
    with pytest.raises(ConstraintError, match="number_sentences' needs NLTK data"):
        constraint_reward(
            "One. Two.", ["length_constraints:number_sentences"], [{"num_sentences": 2, "relation": "at least"}]
        )
