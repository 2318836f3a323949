"""Kimi k1.5 §2.4 long2short data (framework-free).

- *Shortest rejection sampling*: sample a question n times (Kimi: n = 8) and keep the shortest
  correct response for supervised fine-tuning.
- *DPO pairs*: the shortest correct response is the positive; the negatives are the longer
  responses — wrong ones longer than the positive, and correct ones at least 1.5× its length.

Lengths are response tokens. Ties in length go to the earlier sample (sampling order), so the
choice is reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: Kimi §2.4: correct responses this many times the positive's length (or more) are negatives
LONG_CORRECT_RATIO = 1.5


@dataclass(frozen=True)
class Sample:
    """One sampled response to a question: its text, its length in tokens and its verdict."""

    text: str
    length: int
    correct: bool


def shortest_correct(samples: Sequence[Sample]) -> int | None:
    """Index of the shortest correct sample (the earliest among equal lengths), None if none is correct."""
    correct = [i for i, s in enumerate(samples) if s.correct]
    return min(correct, key=lambda i: (samples[i].length, i)) if correct else None


def dpo_negatives(samples: Sequence[Sample], ratio: float = LONG_CORRECT_RATIO) -> tuple[int | None, list[int]]:
    """(positive index, negative indices in sampling order): wrong responses longer than the
    positive, correct ones ≥ ``ratio`` × its length. No correct sample: (None, [])."""
    positive = shortest_correct(samples)
    if positive is None:
        return None, []
    length = samples[positive].length
    negatives = [
        i
        for i, s in enumerate(samples)
        if i != positive and ((not s.correct and s.length > length) or (s.correct and s.length >= ratio * length))
    ]
    return positive, negatives


def check_samples_per_question(n: int) -> None:
    if n < 2:
        raise ValueError(f"n: {n} samples per question cannot be rejection-sampled (at least 2)")
