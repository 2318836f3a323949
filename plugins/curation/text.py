"""Text normalisation shared by the matching stages: lower-case word tokens."""

from __future__ import annotations

import re

_WORD = re.compile(r"[0-9a-z]+")


def words(text: str) -> list[str]:
    """Lower-case alphanumeric tokens: punctuation, LaTeX markup and spacing do not matter."""
    return _WORD.findall(text.lower())


def ngrams(tokens: list[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}
