"""Incomplete-signal masking (LongCat-Flash-Thinking §3.2.2).

A response whose grade is not a real signal is left out of the loss and out of its group's
statistics instead of being scored 0:
- its grading failed for infrastructure reasons (the judge, not the program: ``judge_error``);
- it was cut at the length limit and is *not* a repetition loop (a loop that hit the limit is
  a real failure and keeps its 0).

Repetition: the response's last ``window`` tokens are periodic with a period of at most
``window // min_repeats`` tokens (the same chunk repeated at least ``min_repeats`` times).
"""

from __future__ import annotations

from typing import Sequence


def is_repetitive(token_ids: Sequence[int], window: int = 256, min_repeats: int = 4) -> bool:
    """Does the tail of ``token_ids`` repeat one chunk at least ``min_repeats`` times?"""
    tail = list(token_ids[-window:])
    if len(tail) < min_repeats:
        return False
    for period in range(1, len(tail) // min_repeats + 1):
        if all(tail[i] == tail[i + period] for i in range(len(tail) - period)):
            return True
    return False


def is_truncated(response_ids: Sequence[int], max_response_length: int, stop_ids: frozenset[int] = frozenset()) -> bool:
    """Cut by the length limit: the limit was reached and the last token is not a stop token."""
    return len(response_ids) >= max_response_length and not (response_ids and response_ids[-1] in stop_ids)


def is_incomplete(judge_error: bool, truncated: bool, repetitive: bool) -> bool:
    """Should this response be masked out (see the module docstring)?"""
    return bool(judge_error) or (bool(truncated) and not repetitive)
