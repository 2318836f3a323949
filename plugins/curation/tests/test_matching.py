"""Decontamination and duplicate removal on hand-made rows whose answer is known."""

from __future__ import annotations

import pytest

from reasonrl.plugins.curation.decontamination import Decontaminate
from reasonrl.plugins.curation.dedup import ExactDedup, NearDedup
from reasonrl.plugins.curation.stage import Drop
from reasonrl.plugins.curation.text import ngrams, words

AIME = (
    "Let N be the number of ordered pairs of positive integers (a, b) such that a + b = 1000 and "
    "neither a nor b has a zero digit. Find the remainder when N is divided by 1000."
)


def row(question: str, id_: int = 0) -> dict:
    return {"id": str(id_), "question": question, "answer": "1"}


def test_a_training_question_sharing_a_16_gram_with_an_eval_question_is_dropped():
    stage = Decontaminate([AIME, "What is 2+2?"], n=16)
    eval_words = words(AIME)
    window = " ".join(eval_words[5:21])  # 16 consecutive words of the eval problem
    copied = row(f"Warm-up. {window.upper()}!! Then answer.")
    fifteen = row("Warm-up. " + " ".join(eval_words[5:20]) + " zebra " + " ".join(eval_words[21:25]))
    dropped = stage.process(copied)
    assert isinstance(dropped, Drop) and dropped.reason == "contaminated" and dropped.detail == window
    assert stage.process(fifteen) == fifteen, "15 shared words in a row are not a 16-gram"


def test_an_eval_question_shorter_than_n_counts_whole():
    stage = Decontaminate(["What is 2+2?"], n=16)
    assert isinstance(stage.process(row("Quick: what is 2 + 2? Show work.")), Drop)
    assert stage.process(row("What is 2+3?"))["id"] == "0"


def test_exact_duplicates_ignore_case_punctuation_and_spacing():
    stage = ExactDedup()
    first, again, other = row("Find x: 2x = 4.", 0), row("find  X 2x=4", 1), row("Find y: 2y = 4.", 2)
    assert stage.process(first) == first
    assert stage.process(again) == Drop("exact_duplicate", "of row 0")
    assert stage.process(other) == other


def _jaccard(a: str, b: str, shingle: int = 3) -> float:
    x, y = ngrams(words(a), shingle), ngrams(words(b), shingle)
    return len(x & y) / len(x | y)


BASE = (
    "A bag holds red green and blue marbles in the ratio three to four to five and after twelve red marbles "
    "are added the ratio of red to blue becomes one to one how many marbles were in the bag at first "
    "before any marble was added by the teacher during the morning lesson on ratios and proportions"
)


@pytest.mark.parametrize("threshold, mid_dropped", [(0.8, False), (0.3, True)])
def test_near_duplicates_are_found_at_the_threshold_and_others_kept(threshold, mid_dropped):
    tokens = BASE.split()
    near = " ".join(tokens[:-1] + ["today"])  # the last word changed
    mid = " ".join(tokens[: len(tokens) // 2] + ["what", "is", "the", "sum", "of", "all", "primes", "below", "fifty"])
    other = "Compute the integral of x squared from zero to three and give the result as a fraction"
    assert _jaccard(BASE, near) > 0.9 and 0.35 < _jaccard(BASE, mid) < 0.45 and _jaccard(BASE, other) == 0
    stage = NearDedup(threshold=threshold, num_perm=256)
    assert stage.process(row(BASE, 0))["id"] == "0"
    dropped = stage.process(row(near, 1))
    assert isinstance(dropped, Drop) and dropped.reason == "near_duplicate" and "of row 0" in dropped.detail
    assert isinstance(stage.process(row(mid, 2)), Drop) == mid_dropped, "J ≈ 0.4: kept at 0.8, dropped at 0.3"
    assert stage.process(row(other, 3))["id"] == "3"


def test_near_dedup_settings_are_checked():
    with pytest.raises(ValueError, match="threshold"):
        NearDedup(threshold=0.0)
