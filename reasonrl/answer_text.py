"""Reading a final answer out of a model's text: shared by the plugins that grade answers."""

from __future__ import annotations


def last_boxed(text: str) -> str | None:
    """The contents of the last ``\\boxed{...}`` (balanced braces), or None."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, i = 0, start + len("\\boxed")
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1 : j]
    return None  # unbalanced: no complete boxed answer
