"""Repeat detection, framework-free (Kimi k1.5 §2.6.2: "repeat detection with early termination
and an extra penalty").

Inside generation the detection is vLLM's own (``SamplingParams.repetition_detection``, finish
reason ``repetition``; ``verl_request.py`` asks for it). This module holds the same tail rule
for what happens outside the engine — flagging and counting in tests and the benchmark — and the
penalty applied to flagged rewards.
"""

from __future__ import annotations

from typing import Sequence


def repeated_tail(token_ids: Sequence[int], min_pattern: int, max_pattern: int, min_count: int) -> int | None:
    """The period of the repetition that ends ``token_ids``, else None: the last ``L·min_count``
    tokens are one pattern of ``L`` tokens (``min_pattern <= L <= max_pattern``) written
    ``min_count`` times in a row. The smallest such ``L`` is returned. The rule is vLLM's stop
    condition, checked after every generated token, so a generation it stops ends with the
    first tail that satisfies it."""
    if max_pattern < 1 or min_count < 2:
        return None
    for period in range(max(1, min_pattern), max_pattern + 1):
        span = period * min_count
        if span > len(token_ids):
            return None
        tail = token_ids[-span:]
        if all(tail[i] == tail[i % period] for i in range(period, span)):
            return period
    return None


def first_repetition_stop(token_ids: Sequence[int], min_pattern: int, max_pattern: int, min_count: int) -> int | None:
    """Where a generation of ``token_ids`` would have stopped under repeat detection: the number
    of tokens kept (the first prefix whose tail repeats), or None if it never triggers."""
    for end in range(1, len(token_ids) + 1):
        if repeated_tail(token_ids[:end], min_pattern, max_pattern, min_count) is not None:
            return end
    return None


def penalised(rewards: Sequence[float], stopped_for_repetition: Sequence[bool], penalty: float) -> list[float]:
    """Each reward minus ``penalty`` where the generation was stopped for repetition."""
    if penalty < 0:
        raise ValueError(f"penalty must be >= 0, got {penalty}")
    return [float(r) - (penalty if flag else 0.0) for r, flag in zip(rewards, stopped_for_repetition)]
